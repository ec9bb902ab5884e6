//! Fallback through both executors: when it fires, what it sees, what the
//! caller gets, and that a cancellation never becomes a fallback value.
#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::*;
use crate::backoff::Backoff;
use crate::call::{Attempt, RetryError, Verdict};
use crate::cancel::CancelToken;
use crate::clock::VirtualClock;
use crate::control::RetryControl;
use crate::control::{CircuitBreaker, WindowKind};
use crate::hedge::Hedgeable;
use crate::policy::{HedgePolicy, RetryPolicy};
use crate::retry::{BlockingRetryable, Retryable};

const MS: Duration = Duration::from_millis(1);

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .backoff(Backoff::constant(10 * MS).build().unwrap())
        .max_attempts(attempts)
        .build()
        .unwrap()
}

fn status_503(r: &Result<u16, &'static str>) -> Verdict {
    match r {
        Ok(503) | Err(_) => Verdict::Retry,
        Ok(_) => Verdict::Success,
    }
}

#[test]
fn a_success_never_reaches_the_fallback() {
    let asked = Cell::new(0);
    let report = (|_: Attempt| Ok::<u16, &str>(200))
        .retry_blocking(policy(3))
        .clock(VirtualClock::new())
        .fallback(from_fn(|f: Failure<u16, &'static str>| {
            asked.set(asked.get() + 1);
            f.into_result()
        }))
        .report()
        .call();
    assert_eq!(asked.get(), 0);
    assert_eq!(
        (report.result.unwrap(), report.stop, report.fell_back),
        (200, None, false)
    );
}

#[test]
fn an_exhausted_response_is_given_to_the_fallback_with_its_reason() {
    let seen = Cell::new(None);
    let report = (|a: Attempt| Ok::<u16, &str>(if a.number < 9 { 503 } else { 200 }))
        .retry_blocking(policy(3))
        .classify(status_503)
        .clock(VirtualClock::new())
        .fallback(from_fn(|f: Failure<u16, &'static str>| {
            seen.set(Some((
                f.reason(),
                f.attempts(),
                f.response().copied(),
                f.waited(),
            )));
            Ok(299)
        }))
        .report()
        .call();
    assert_eq!(
        seen.get(),
        Some((StopReason::Exhausted, 3, Some(503), 20 * MS))
    );
    assert_eq!(
        report.stop,
        Some(StopReason::Exhausted),
        "the report keeps why the call stopped"
    );
    assert_eq!(report.attempts, 3);
    assert!(report.fell_back);
    assert!(!report.succeeded());
    assert_eq!(report.result.unwrap(), 299);
}

#[test]
fn a_permanent_error_reaches_the_fallback_which_may_decline() {
    let declined = (|_: Attempt| Err::<u16, _>("no such key"))
        .retry_blocking(policy(3))
        .when(|_: &&str| false)
        .clock(VirtualClock::new())
        .fallback(from_fn(|f: Failure<u16, &'static str>| match f.reason() {
            StopReason::Permanent => f.into_result(),
            _ => Ok(0),
        }))
        .call()
        .unwrap_err();
    assert_eq!(declined.reason(), StopReason::Permanent);
    assert_eq!(declined.last_error(), Some(&"no such key"));
    assert_eq!(declined.attempts(), 1);
}

#[test]
fn a_static_value_answers_a_call_whose_deadline_passed() {
    let clock = VirtualClock::new();
    let deadline = crate::deadline::Deadline::from_now(&clock, 25 * MS);
    let value = (|_: Attempt| Err::<&str, _>("slow"))
        .retry_blocking(policy(10))
        .deadline(deadline)
        .clock(clock)
        .fallback(value("default"))
        .call();
    assert_eq!(value.unwrap(), "default");
}

#[test]
fn an_open_breaker_refuses_the_call_and_the_fallback_answers_without_an_attempt() {
    let clock = VirtualClock::new();
    let breaker = CircuitBreaker::builder()
        .name("payments")
        .window(WindowKind::Count(10))
        .min_calls(2)
        .failure_ratio(0.5)
        .break_duration(Duration::from_secs(5))
        .build_with_clock(clock.clone())
        .unwrap();
    let breaker: Arc<dyn RetryControl> = Arc::new(breaker);
    let policy = RetryPolicy::builder()
        .backoff(Backoff::constant(10 * MS).build().unwrap())
        .max_attempts(2)
        .control(breaker)
        .build()
        .unwrap();
    let sent = Cell::new(0);
    let call = || {
        (|_: Attempt| {
            sent.set(sent.get() + 1);
            Err::<&str, _>("down")
        })
        .retry_blocking(&policy)
        .clock(clock.clone())
        .fallback(from_fn(|f: Failure<&'static str, &'static str>| {
            Ok(if f.reason() == StopReason::Throttled {
                "refused: cached"
            } else {
                "failed: cached"
            })
        }))
        .call()
    };
    // Fallback after retries after a breaker: two failed attempts open it.
    assert_eq!(call().unwrap(), "failed: cached");
    assert_eq!(sent.get(), 2);
    assert_eq!(call().unwrap(), "refused: cached");
    assert_eq!(sent.get(), 2, "the open breaker sent nothing");
}

#[test]
fn a_blocking_call_cancelled_is_not_turned_into_a_fallback_value() {
    let token = CancelToken::new();
    let t = token.clone();
    let asked = Cell::new(false);
    let err = (|_: Attempt| {
        t.cancel();
        Err::<u16, _>("down")
    })
    .retry_blocking(policy(5))
    .cancel_on(token)
    .clock(VirtualClock::new())
    .fallback(from_fn(|_: Failure<u16, &'static str>| {
        asked.set(true);
        Ok(0)
    }))
    .call()
    .unwrap_err();
    assert!(!asked.get());
    assert_eq!(err.reason(), StopReason::Cancelled);
}

#[tokio::test(start_paused = true)]
async fn an_async_call_asks_a_backup_service() {
    let backups = Arc::new(AtomicU32::new(0));
    let b = backups.clone();
    let report = (|_: Attempt| async { Err::<u32, _>("primary down") })
        .retry(policy(3))
        .name("prices")
        .fallback(backup(move |f: Failure<u32, &'static str>| {
            let b = b.clone();
            async move {
                b.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await; // the replica's own time
                assert_eq!(f.error().and_then(RetryError::name), Some("prices"));
                Ok::<_, RetryError<&str>>(f.attempts() * 100)
            }
        }))
        .report()
        .await;
    assert_eq!(backups.load(Ordering::Relaxed), 1);
    assert_eq!(report.result.unwrap(), 300);
    assert!(report.fell_back);
    assert_eq!(report.waited, 20 * MS);
}

#[tokio::test(start_paused = true)]
async fn an_async_call_cancelled_while_waiting_is_not_turned_into_a_fallback_value() {
    let token = CancelToken::new();
    let asked = Arc::new(AtomicU32::new(0));
    let a = asked.clone();
    let call = (|_: Attempt| async { Err::<u32, _>("down") })
        .retry(
            RetryPolicy::builder()
                .backoff(Backoff::constant(Duration::from_secs(60)).build().unwrap())
                .build()
                .unwrap(),
        )
        .cancel_on(token.clone())
        .fallback(from_fn(move |_: Failure<u32, &str>| {
            a.fetch_add(1, Ordering::Relaxed);
            Ok(0)
        }))
        .report()
        .into_future();
    let handle = tokio::spawn(call);
    tokio::time::sleep(Duration::from_secs(1)).await; // inside the first wait
    token.cancel();
    let report = handle.await.unwrap();
    assert_eq!(asked.load(Ordering::Relaxed), 0);
    assert_eq!(report.stop, Some(StopReason::Cancelled));
    assert!(!report.fell_back);
    assert_eq!(report.result.unwrap_err().reason(), StopReason::Cancelled);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_call_in_its_fallback_drops_the_backup_request() {
    struct Counted(Arc<AtomicU32>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    let dropped = Arc::new(AtomicU32::new(0));
    let d = dropped.clone();
    let call = (|_: Attempt| async { Err::<u32, _>("down") })
        .retry(policy(1))
        .fallback(backup(move |_: Failure<u32, &str>| {
            let guard = Counted(d.clone());
            async move {
                let _guard = guard;
                std::future::pending::<Result<u32, RetryError<&str>>>().await
            }
        }))
        .into_future();
    let timed_out = tokio::time::timeout(Duration::from_secs(1), call).await;
    assert!(timed_out.is_err(), "the backup never answers");
    assert_eq!(
        dropped.load(Ordering::Relaxed),
        1,
        "the backup's future was dropped with the call"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hedged_call_whose_copies_all_fail_falls_back() {
    let policy = HedgePolicy::builder(50 * MS)
        .max_attempts(3)
        .build()
        .unwrap();
    let report = (|a: Attempt| async move { Err::<u32, _>(a.number) })
        .hedge(&policy)
        .fallback(from_fn(|f: Failure<u32, u32>| {
            assert_eq!(f.ending().hedge.map(|h| h.sent), Some(3));
            Ok(f.error()
                .and_then(RetryError::last_error)
                .copied()
                .unwrap_or(0)
                + 1000)
        }))
        .report()
        .await;
    assert!(report.fell_back);
    assert_eq!(report.hedge.map(|h| h.sent), Some(3));
    assert!(report.result.unwrap() > 1000);
}

#[test]
fn fires_is_the_one_rule() {
    for reason in [
        StopReason::Exhausted,
        StopReason::Permanent,
        StopReason::Deadline,
        StopReason::Throttled,
        StopReason::NotReplayable,
        StopReason::NoTimer,
        StopReason::LimitReached,
    ] {
        assert!(fires(Some(reason)), "{reason:?}");
    }
    assert!(!fires(Some(StopReason::Cancelled)));
    assert!(!fires(None));
}
