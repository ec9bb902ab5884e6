//! Cancellation: a token cancelled before, during or between attempts, and
//! a dropped future.

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::call::{Attempt, StopReason, Verdict};
use crate::clock::VirtualClock;
use crate::retry::{BlockingRetryable, Retryable};

#[test]
fn a_token_cancelled_before_the_call_stops_it_before_any_attempt() {
    let token = CancelToken::new();
    token.cancel();
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        Ok::<_, &str>(())
    })
    .retry_blocking(policy(5, &[1; 5]))
    .cancel_on(token)
    .clock(VirtualClock::new())
    .call()
    .unwrap_err();
    assert_eq!(calls, 0);
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 0);
}

/// A call handed its first attempt's outcome, then cancelled before the
/// policy decided on it, counts that attempt and keeps its error.
#[test]
fn a_resumed_call_cancelled_at_once_counts_the_attempt_it_was_given() {
    let token = CancelToken::new();
    token.cancel();
    let err = futures::executor::block_on(
        (|_: Attempt| std::future::ready(Ok::<u32, &str>(2)))
            .retry(policy(5, &[1; 5]))
            .cancel_on(token)
            .clock(VirtualClock::new())
            .after_first_attempt(
                Err("refused"),
                Verdict::Retry,
                crate::policy::gate::Ticket::FREE,
            ),
    )
    .unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.last_error(), Some(&"refused"));
}

#[test]
fn a_cancelled_token_stops_before_the_next_attempt() {
    let token = CancelToken::new();
    let t = token.clone();
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        t.cancel();
        Err::<(), _>("down")
    })
    .retry_blocking(policy(5, &[1; 5]))
    .cancel_on(token)
    .clock(VirtualClock::new())
    .call()
    .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(err.reason(), StopReason::Cancelled);
}

#[test]
fn blocking_cancel_mid_sleep_wakes_promptly() {
    // Real clock, real thread: a one-hour wait cut short by a cancel from
    // another thread. No timing assertion: the test would hang if it failed.
    let token = CancelToken::new();
    let t = token.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        t.cancel();
    });
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(policy(5, &[3600; 5]))
        .cancel_on(token)
        .call()
        .unwrap_err();
    canceller.join().unwrap();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 1);
}

#[test]
fn cancellation_after_the_deadline_reports_deadline() {
    let clock = VirtualClock::new();
    let token = CancelToken::new();
    let t = token.clone();
    let c = clock.clone();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(5)
        .max_elapsed(secs(10))
        .build()
        .unwrap();
    let err = (|_: Attempt| {
        c.sleep_blocking(secs(11)); // the attempt overran the deadline
        t.cancel(); // and whoever waited gave up
        Err::<(), _>("slow")
    })
    .retry_blocking(&policy)
    .cancel_on(token)
    .clock(clock)
    .call()
    .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_cancel_mid_sleep_returns_in_the_same_instant() {
    let token = CancelToken::new();
    let policy = policy(5, &[3600; 5]);
    let fut = (|_: Attempt| async { Err::<(), _>("down") })
        .retry(&policy)
        .cancel_on(token.clone())
        .into_future();
    let handle = cancel_after(&token, secs(10));
    let err = fut.await.unwrap_err();
    let returned_at = TokioClock.now();
    let cancelled_at = handle.await.unwrap();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(
        returned_at, cancelled_at,
        "stopped at the virtual instant of the cancel"
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_cancel_during_the_first_attempt_stops_at_once() {
    // A lean call with a token: its first attempt runs without any
    // per-call state, and a cancel still ends it promptly.
    let token = CancelToken::new();
    let policy = policy(5, &[1; 5]);
    let fut = (|_: Attempt| async {
        tokio::time::sleep(secs(3600)).await;
        Ok::<_, &str>(())
    })
    .retry(&policy)
    .cancel_on(token.clone())
    .into_future();
    let handle = cancel_after(&token, secs(10));
    let err = fut.await.unwrap_err();
    let returned_at = TokioClock.now();
    assert_eq!(returned_at, handle.await.unwrap());
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 1, "the abandoned attempt counts");
    assert!(err.last_error().is_none());
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_a_cancelled_token_stops_before_the_first_attempt() {
    let token = CancelToken::new();
    token.cancel();
    let calls = AtomicU32::new(0);
    let err = (|_: Attempt| {
        calls.fetch_add(1, Ordering::Relaxed);
        async { Ok::<_, &str>(()) }
    })
    .retry(policy(5, &[1; 5]))
    .cancel_on(token)
    .await
    .unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 0);
    assert_eq!(calls.load(Ordering::Relaxed), 0, "the operation never ran");
}

#[test]
fn dropping_the_future_drops_the_attempt() {
    struct Live(Arc<AtomicU32>);
    impl Drop for Live {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let live = Arc::new(AtomicU32::new(0));
    let l = live.clone();
    let policy = policy(3, &[1, 1]);
    let mut fut = Box::pin(
        (move |_: Attempt| {
            l.fetch_add(1, Ordering::SeqCst);
            let guard = Live(l.clone());
            async move {
                let _guard = guard;
                std::future::pending::<Result<(), ()>>().await
            }
        })
        .retry(&policy)
        .clock(VirtualClock::manual())
        .into_future(),
    );
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(live.load(Ordering::SeqCst), 1);
    drop(fut);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}
