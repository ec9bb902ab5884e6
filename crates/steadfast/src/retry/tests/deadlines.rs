//! Deadlines and timeouts: the call's limit, each attempt's own, and the
//! ambient deadline.

use std::future::IntoFuture;
use std::sync::Arc;

use super::*;
use crate::call::{Attempt, StopReason, Verdict};
use crate::clock::VirtualClock;
use crate::retry::{BlockingRetryable, Retryable};

#[test]
fn a_two_hour_backoff_under_a_one_hour_deadline_is_never_slept() {
    let clock = VirtualClock::new();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(7200)]))
        .max_attempts(5)
        .max_delay(secs(10_000))
        .max_elapsed(secs(3600))
        .build()
        .unwrap();
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .clock(clock.clone())
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.attempts(), 1);
    assert_eq!(
        clock.elapsed(),
        Duration::ZERO,
        "the long sleep was never taken"
    );
}

#[test]
fn no_sleep_ends_past_the_deadline() {
    // Waits of 10 s under a 25 s limit: attempts at 0, 10, 20; the next wait
    // would end at 30 > 25, so the call stops at 20 s without sleeping.
    let clock = VirtualClock::new();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(10); 10]))
        .max_attempts(10)
        .max_elapsed(secs(25))
        .build()
        .unwrap();
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .clock(clock.clone())
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.attempts(), 3);
    assert_eq!(clock.elapsed(), secs(20));
    assert_eq!(err.elapsed(), secs(20));
}

#[test]
fn the_attempt_sees_its_deadline() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 3]))
        .max_attempts(3)
        .max_elapsed(secs(10))
        .attempt_timeout(secs(4))
        .build()
        .unwrap();
    let mut seen = Vec::new();
    let _ = (|a: Attempt| {
        seen.push(a.deadline.map(|d| d.instant() - t0));
        Err::<(), _>(())
    })
    .retry_blocking(&policy)
    .clock(clock)
    .call();
    // 4 s per attempt, but never past the call's 10 s: attempts at 0, 1, 2 s.
    assert_eq!(seen, [Some(secs(4)), Some(secs(5)), Some(secs(6))]);
}

#[test]
fn a_hint_past_the_deadline_stops_at_once() {
    let clock = VirtualClock::new();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(4)
        .max_elapsed(secs(10))
        .build()
        .unwrap();
    let err = (|_: Attempt| Err::<(), _>("busy"))
        .retry_blocking(&policy)
        .classify(|_: &Result<(), &str>| Verdict::RetryAfter(secs(60)))
        .clock(clock.clone())
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.attempts(), 1);
    assert_eq!(clock.elapsed(), Duration::ZERO);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_attempt_timeout_drops_the_attempt_and_retries() {
    let t0 = TokioClock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(3)
        .attempt_timeout(secs(2))
        .build()
        .unwrap();
    let result = (|a: Attempt| async move {
        if a.number < 3 {
            std::future::pending::<()>().await; // hangs
        }
        Ok::<_, ()>(a.number)
    })
    .retry(&policy)
    .await;
    assert_eq!(result, Ok(3));
    // two timeouts of 2 s, two waits of 1 s
    assert_eq!(TokioClock.now() - t0, secs(6));
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_deadline_cuts_a_hanging_attempt() {
    let t0 = TokioClock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(3)
        .max_elapsed(secs(5))
        .build()
        .unwrap();
    let err = (|_: Attempt| async { std::future::pending::<Result<(), &str>>().await })
        .retry(&policy)
        .name("hang")
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert!(err.timed_out());
    assert_eq!(TokioClock.now() - t0, secs(5));
    assert_eq!(
        err.to_string(),
        "hang failed after 1 attempt in 5.0s (deadline exceeded): attempt timed out"
    );
}

#[test]
fn the_ambient_deadline_bounds_every_call_in_its_scope() {
    let clock = VirtualClock::new();
    let ambient = crate::deadline::Deadline::after(clock.now(), secs(25));
    let err = crate::deadline::scope(ambient, || {
        (|_: Attempt| Err::<(), _>("down"))
            .retry_blocking(policy(10, &[10; 10]))
            .clock(clock.clone())
            .call()
            .unwrap_err()
    });
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(clock.elapsed(), secs(20));
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn the_ambient_deadline_reaches_an_async_call_and_its_attempts() {
    use crate::deadline::WithDeadlineExt;
    let t0 = TokioClock.now();
    let ambient = crate::deadline::Deadline::after(t0, secs(25));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let err = async move {
        (move |a: Attempt| {
            s.lock().unwrap().push(a.deadline);
            async { Err::<(), _>("down") }
        })
        .retry(policy(10, &[10; 10]))
        .await
        .unwrap_err()
    }
    .with_deadline(ambient)
    .await;
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(TokioClock.now() - t0, secs(20));
    assert!(seen.lock().unwrap().iter().all(|d| *d == Some(ambient)));
}

#[test]
fn each_attempt_runs_under_its_own_deadline() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 3]))
        .max_attempts(2)
        .max_elapsed(secs(10))
        .attempt_timeout(secs(4))
        .build()
        .unwrap();
    let mut ambient = Vec::new();
    let _ = (|a: Attempt| {
        assert_eq!(crate::deadline::current(), a.deadline);
        ambient.push(crate::deadline::current().map(|d| d.instant() - t0));
        Err::<(), _>(())
    })
    .retry_blocking(&policy)
    .clock(clock)
    .call();
    assert_eq!(ambient, [Some(secs(4)), Some(secs(5))]);
    assert_eq!(
        crate::deadline::current(),
        None,
        "the scope ends with the attempt"
    );
}

#[test]
fn an_async_attempt_sees_its_deadline_as_the_ambient_one() {
    let clock = VirtualClock::new();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1)]))
        .max_attempts(2)
        .attempt_timeout(secs(3))
        .build()
        .unwrap();
    let result = futures::executor::block_on(
        (|a: Attempt| async move {
            Ok::<_, ()>(crate::deadline::current() == a.deadline && a.deadline.is_some())
        })
        .retry(&policy)
        .clock(clock)
        .into_future(),
    );
    assert_eq!(result, Ok(true));
}

/// The operation makes each attempt's future with the attempt's deadline as
/// the ambient one, so code that reads it before the future is polled (a
/// `tower::Service::call`) sees the attempt's deadline, not the call's.
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_attempt_is_made_with_its_deadline_ambient() {
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1)]))
        .max_attempts(2)
        .attempt_timeout(secs(5))
        .max_elapsed(secs(60))
        .build()
        .unwrap();
    let start = TokioClock.now();
    let seen = std::cell::RefCell::new(Vec::new());
    let out = (|a: Attempt| {
        seen.borrow_mut()
            .push((crate::deadline::current(), a.deadline));
        async move {
            if a.is_first() {
                Err("reset")
            } else {
                Ok(a.number)
            }
        }
    })
    .retry(&policy)
    .await;
    assert_eq!(out, Ok(2));
    let seen = seen.into_inner();
    assert_eq!(seen.len(), 2);
    for (i, (ambient, own)) in seen.into_iter().enumerate() {
        assert_eq!(ambient, own, "attempt {}", i + 1);
        // Attempt 1 at 0 s, attempt 2 after the 1 s wait: each gets 5 s.
        let expect = start + secs(5) + secs(i as u64);
        assert_eq!(own.map(crate::deadline::Deadline::instant), Some(expect));
    }
}

/// The error describes the last attempt: one that failed, then one cut
/// off by the deadline, gives an error that says the attempt timed out, not
/// the first attempt's error (#28 item 3).
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_error_after_a_timed_out_last_attempt_does_not_name_an_earlier_one() {
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(3)
        .max_elapsed(secs(5))
        .build()
        .unwrap();
    let err = (|a: Attempt| async move {
        if a.number == 1 {
            Err::<(), _>("503 service unavailable")
        } else {
            std::future::pending().await
        }
    })
    .retry(&policy)
    .name("fetch")
    .await
    .unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (StopReason::Deadline, 2));
    assert!(err.timed_out());
    assert_eq!(err.last_error(), None::<&&str>);
    assert_eq!(
        err.to_string(),
        "fetch failed after 2 attempts in 5.0s (deadline exceeded): attempt timed out"
    );
}
