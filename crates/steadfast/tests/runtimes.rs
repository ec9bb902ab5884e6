//! Issue 15, item 10: the async retry on runtimes other than tokio, and a
//! clear error (not a panic deep in tokio) when the default tokio clock is
//! used outside a tokio runtime. The waits are real but 1 ms long: these
//! tests check behaviour, never timing.

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use steadfast::backoff::Backoff;
use steadfast::clock::{AsyncIoClock, FuturesTimerClock, TokioClock};
use steadfast::retry::Retryable;
use steadfast::{Attempt, RetryPolicy, StopReason};

fn policy() -> RetryPolicy<Backoff> {
    RetryPolicy::builder()
        .max_attempts(4)
        .backoff(
            Backoff::constant(Duration::from_millis(1))
                .build()
                .expect("valid backoff"),
        )
        .build()
        .expect("valid policy")
}

/// An operation that fails twice, then succeeds; counts its attempts.
fn flaky(
    calls: &Arc<AtomicU32>,
) -> impl FnMut(Attempt) -> std::future::Ready<Result<u32, &'static str>> + use<> {
    let calls = Arc::clone(calls);
    move |attempt: Attempt| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(if attempt.number < 3 {
            Err("connection reset")
        } else {
            Ok(attempt.number)
        })
    }
}

#[test]
fn futures_executor_with_the_futures_timer_clock() {
    let calls = Arc::new(AtomicU32::new(0));
    let policy = policy();
    let result = futures::executor::block_on(
        flaky(&calls)
            .retry(&policy)
            .clock(FuturesTimerClock)
            .into_future(),
    );
    assert_eq!(result, Ok(3));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[test]
fn async_io_block_on_with_the_async_io_clock() {
    let calls = Arc::new(AtomicU32::new(0));
    let policy = policy();
    let result = async_io::block_on(
        flaky(&calls)
            .retry(&policy)
            .clock(AsyncIoClock)
            .into_future(),
    );
    assert_eq!(result, Ok(3));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[test]
fn attempt_timeouts_work_off_tokio() {
    // A timer for each attempt's deadline, too: an attempt that never ends
    // is cut off and retried.
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .attempt_timeout(Duration::from_millis(5))
        .backoff(
            Backoff::constant(Duration::from_millis(1))
                .build()
                .expect("valid"),
        )
        .build()
        .expect("valid");
    let result = futures::executor::block_on(
        (|a: Attempt| async move {
            if a.number < 2 {
                std::future::pending::<()>().await;
            }
            Ok::<_, &str>(a.number)
        })
        .retry(&policy)
        .clock(FuturesTimerClock)
        .into_future(),
    );
    assert_eq!(result, Ok(2));
}

#[test]
fn the_tokio_clock_outside_tokio_is_an_error_not_a_panic() {
    let calls = Arc::new(AtomicU32::new(0));
    let policy = policy();
    // Before: "there is no reactor running" panicked inside tokio at the
    // first retry.
    let err =
        futures::executor::block_on(flaky(&calls).retry(&policy).clock(TokioClock).into_future())
            .expect_err("no timer outside tokio");
    assert_eq!(err.reason(), StopReason::NoTimer);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(err.last_error(), Some(&"connection reset"));
    let message = err.to_string();
    for needle in ["tokio runtime", "futures-timer", "async-io", ".clock("] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    // The success path never needs a timer, so it runs anywhere.
    let ok = futures::executor::block_on(
        (|a: Attempt| std::future::ready(Ok::<_, ()>(a.number)))
            .retry(&policy)
            .into_future(),
    );
    assert_eq!(ok, Ok(1));
}

#[test]
fn an_attempt_timeout_on_the_tokio_clock_outside_tokio_is_an_error() {
    let policy = RetryPolicy::builder()
        .attempt_timeout(Duration::from_secs(1))
        .build()
        .expect("valid");
    let calls = Arc::new(AtomicU32::new(0));
    let err = futures::executor::block_on(flaky(&calls).retry(&policy).into_future())
        .expect_err("no timer outside tokio");
    assert_eq!(err.reason(), StopReason::NoTimer);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "no attempt ran without its deadline"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_default_clock_still_works_inside_tokio() {
    let calls = Arc::new(AtomicU32::new(0));
    let policy = policy();
    assert_eq!(flaky(&calls).retry(&policy).await, Ok(3));
}

/// The hedger too: a copy still pending on the tokio clock outside a tokio
/// runtime would need a timer for the next copy; the call stops with
/// `NoTimer` instead of panicking in tokio, and a copy that answers at once
/// needs no timer at all.
#[test]
fn a_hedge_on_the_tokio_clock_outside_tokio_is_an_error_not_a_panic() {
    use steadfast::{HedgePolicy, Hedgeable};
    let policy = HedgePolicy::builder(Duration::from_millis(10))
        .max_attempts(2)
        .build()
        .expect("valid policy");
    let err = futures::executor::block_on(
        (|_: Attempt| std::future::pending::<Result<u32, ()>>())
            .hedge(&policy)
            .clock(TokioClock)
            .into_future(),
    )
    .expect_err("no timer outside tokio");
    assert_eq!(err.reason(), StopReason::NoTimer);
    let ok = futures::executor::block_on(
        (|a: Attempt| std::future::ready(Ok::<_, ()>(a.number)))
            .hedge(&policy)
            .clock(TokioClock)
            .into_future(),
    );
    assert_eq!(ok, Ok(1));
}
