//! Rate limits under the retry executors: every attempt is admitted by the
//! limit, a refusal stops the call as throttled with the wait in the error,
//! a waiting admission never goes past the deadline, and a turn given up
//! goes back.

use std::future::{Future, IntoFuture};
use std::pin::pin;
use std::task::Context;

use super::*;
use crate::call::{Attempt, StopReason};
use crate::clock::{TokioClock, VirtualClock};
use crate::rate::{Quota, RateLimit};
use crate::retry::{BlockingRetryable, Retryable};

/// One call a second, no burst beyond it, on `clock`.
fn one_per_second<C: crate::clock::Clock>(clock: C) -> RateLimit {
    RateLimit::builder()
        .name("maps api")
        .quota(Quota::per_second(1).unwrap())
        .build_with_clock(clock)
        .unwrap()
}

fn rated(limit: &RateLimit, wait: Option<Duration>) -> RetryPolicy<Fixed> {
    let b = RetryPolicy::with_schedule(Fixed(vec![secs(0), secs(0)])).max_attempts(3);
    match wait {
        None => b.rate_limit(limit.clone()),
        Some(w) => b.rate_limit_waiting(limit.clone(), w),
    }
    .build()
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_call_the_limit_has_no_room_for_is_refused_with_the_wait() {
    let limit = one_per_second(TokioClock);
    let policy = rated(&limit, None);
    // Refusing at once, it is asked on the lean path; waiting needs state.
    assert!(policy.is_lean());
    assert!(!rated(&limit, Some(secs(1))).is_lean());
    assert_eq!(
        (|_: Attempt| async { Ok::<_, &str>(1) })
            .retry(&policy)
            .await,
        Ok(1)
    );
    let err = (|_: Attempt| async { Ok::<_, &str>(2) })
        .retry(&policy)
        .name("geocode")
        .await
        .unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (StopReason::Throttled, 0));
    assert_eq!(
        (err.refused_by(), err.retry_after()),
        (Some("maps api"), Some(secs(1)))
    );
    assert_eq!(
        err.to_string(),
        "geocode failed after 0 attempts in 0ms (refused by maps api, for 1.0s more)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_draws_from_the_limit_and_a_refused_one_keeps_the_last_error() {
    let limit = one_per_second(TokioClock);
    let err = (|_: Attempt| async { Err::<(), _>("unavailable") })
        .retry(rated(&limit, None))
        .await
        .unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (StopReason::Throttled, 1));
    assert_eq!(err.last_error(), Some(&"unavailable"));
    assert_eq!(err.retry_after(), Some(secs(1)));
    assert!(
        err.to_string()
            .contains("retry refused by maps api, for 1.0s more"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiting_call_is_admitted_at_its_turn() {
    let limit = one_per_second(TokioClock);
    limit.check().unwrap();
    let start = tokio::time::Instant::now();
    let value = (|a: Attempt| async move { Ok::<_, &str>(a.number) })
        .retry(rated(&limit, Some(secs(5))))
        .await;
    assert_eq!(value, Ok(1));
    assert_eq!(start.elapsed(), secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_turn_past_the_deadline_is_refused_at_once() {
    let limit = one_per_second(TokioClock);
    limit.check().unwrap();
    let policy = rated(&limit, Some(secs(5)))
        .to_builder()
        .max_elapsed(Duration::from_millis(500))
        .build()
        .unwrap();
    let start = tokio::time::Instant::now();
    let err = (|_: Attempt| async { Ok::<_, &str>(()) })
        .retry(&policy)
        .await
        .unwrap_err();
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "no wait that could not end in time"
    );
    assert_eq!(
        (err.reason(), err.retry_after()),
        (StopReason::Throttled, Some(secs(1)))
    );
}

#[test]
fn a_call_dropped_while_it_waits_gives_its_turn_back() {
    let clock = VirtualClock::manual();
    let limit = one_per_second(clock.clone());
    limit.check().unwrap();
    {
        let fut = (|_: Attempt| async { Ok::<_, &str>(()) })
            .retry(rated(&limit, Some(secs(5))))
            .clock(clock.clone())
            .into_future();
        let mut fut = pin!(fut);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(
            fut.as_mut().poll(&mut cx).is_pending(),
            "waiting for its turn"
        );
        assert!(limit.check().is_err(), "the turn is booked");
    }
    // Dropped: the turn it booked (1 s from now) is free again.
    assert_eq!(limit.check().unwrap_err().retry_after, Some(secs(1)));
    assert_eq!(
        limit.reserve(1, secs(1)).map(|t| t.wait()).ok(),
        Some(secs(1))
    );
}

#[test]
fn the_blocking_executor_is_admitted_refused_and_waits_alike() {
    let clock = VirtualClock::new();
    let limit = one_per_second(clock.clone());
    let ok = (|a: Attempt| Ok::<_, &str>(a.number))
        .retry_blocking(rated(&limit, None))
        .clock(clock.clone())
        .call();
    assert_eq!(ok, Ok(1));
    let err = (|_: Attempt| Ok::<_, &str>(0))
        .retry_blocking(rated(&limit, None))
        .clock(clock.clone())
        .call()
        .unwrap_err();
    assert_eq!(
        (err.reason(), err.retry_after()),
        (StopReason::Throttled, Some(secs(1)))
    );
    let before = clock.now();
    let waited = (|a: Attempt| Ok::<_, &str>(a.number))
        .retry_blocking(rated(&limit, Some(secs(5))))
        .clock(clock.clone())
        .call();
    assert_eq!(waited, Ok(1));
    assert_eq!(clock.now() - before, secs(1));
}
