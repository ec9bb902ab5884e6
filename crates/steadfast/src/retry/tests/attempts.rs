//! Attempts and schedules: when attempts happen, how many there are, what
//! stops them, and what the error says.

use std::future::IntoFuture;

use super::*;
use crate::call::{Attempt, StopReason, Verdict};
use crate::clock::VirtualClock;
use crate::retry::{BlockingRetryable, Retryable};

#[test]
fn attempts_happen_at_the_scheduled_instants() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let mut times = Vec::new();
    let result = (|a: Attempt| {
        times.push((a.number, clock.now() - t0));
        if a.number < 4 { Err("down") } else { Ok("up") }
    })
    .retry_blocking(policy(5, &[1, 2, 4, 8]))
    .clock(clock.clone())
    .call();
    assert_eq!(result, Ok("up"));
    assert_eq!(
        times,
        [(1, secs(0)), (2, secs(1)), (3, secs(3)), (4, secs(7))]
    );
}

/// Each attempt is told the wait before it, as the policy decided it
/// (after the cap): a server's hint as given, the schedule's delays, zero
/// for the first; in both executors.
#[test]
fn each_attempt_knows_the_wait_before_it() {
    let hinted = |r: &Result<(), &str>| match r {
        Err("busy") => Verdict::RetryAfter(secs(5)),
        Err(_) => Verdict::Retry,
        Ok(()) => Verdict::Success,
    };
    let script = |a: &Attempt| match a.number {
        1 => Err("down"),
        2 => Err("busy"),
        _ => Ok(()),
    };
    let mut waits = Vec::new();
    let result = (|a: Attempt| {
        waits.push((a.number, a.waited));
        script(&a)
    })
    .retry_blocking(policy(4, &[1, 2, 4]))
    .classify(hinted)
    .clock(VirtualClock::new())
    .call();
    assert_eq!(result, Ok(()));
    assert_eq!(waits, [(1, secs(0)), (2, secs(1)), (3, secs(5))]);

    let waits = std::sync::Mutex::new(Vec::new());
    let run = (|a: Attempt| {
        waits
            .lock()
            .expect("not poisoned")
            .push((a.number, a.waited));
        std::future::ready(script(&a))
    })
    .retry(policy(4, &[1, 2, 4]))
    .classify(hinted)
    .clock(VirtualClock::new())
    .into_future();
    assert_eq!(futures::executor::block_on(run), Ok(()));
    assert_eq!(
        *waits.lock().expect("not poisoned"),
        [(1, secs(0)), (2, secs(1)), (3, secs(5))]
    );
}

#[test]
fn max_attempts_counts_the_first() {
    let clock = VirtualClock::new();
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        Err::<(), _>("down")
    })
    .retry_blocking(policy(3, &[1, 1, 1, 1, 1]))
    .clock(clock)
    .call()
    .unwrap_err();
    assert_eq!(calls, 3);
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.last_error(), Some(&"down"));
}

#[test]
fn one_attempt_means_no_retry() {
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(policy(1, &[1]))
        .clock(VirtualClock::new())
        .call()
        .unwrap_err();
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.reason(), StopReason::Exhausted);
}

#[test]
fn a_schedule_that_runs_out_exhausts_the_call() {
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(policy(10, &[1, 1]))
        .clock(VirtualClock::new())
        .call()
        .unwrap_err();
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.reason(), StopReason::Exhausted);
}

#[test]
fn server_hints_are_honoured_and_clamped() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(4)
        .max_delay(secs(30))
        .build()
        .unwrap();
    let mut times = Vec::new();
    let result = (|a: Attempt| {
        times.push(clock.now() - t0);
        Err::<(), u64>(match a.number {
            1 => 5,            // "retry after 5 s"
            2 => 86_400 * 365, // a hostile year
            _ => 0,            // no hint: the schedule
        })
    })
    .retry_blocking(&policy)
    .classify(|r: &Result<(), u64>| match r {
        Err(0) => Verdict::Retry,
        Err(s) => Verdict::RetryAfter(secs(*s)),
        Ok(()) => Verdict::Success,
    })
    .clock(clock.clone())
    .call();
    assert!(result.is_err());
    assert_eq!(times, [secs(0), secs(5), secs(35), secs(36)]);
}

#[test]
fn a_permanent_error_stops_at_once() {
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        Err::<(), _>("forbidden")
    })
    .retry_blocking(policy(5, &[1; 5]))
    .when(|e: &&str| *e != "forbidden")
    .clock(VirtualClock::new())
    .call()
    .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(err.reason(), StopReason::Permanent);
}

#[test]
fn a_retried_ok_value_is_returned_when_attempts_run_out() {
    let result = (|_: Attempt| Ok::<u16, ()>(503))
        .retry_blocking(policy(3, &[1; 5]))
        .classify(|r: &Result<u16, ()>| match r {
            Ok(503) => Verdict::Retry,
            _ => Verdict::Success,
        })
        .clock(VirtualClock::new())
        .call();
    assert_eq!(result, Ok(503));
}

#[test]
fn the_error_explains_itself() {
    let clock = VirtualClock::new();
    let err = (|_: Attempt| Err::<(), _>(std::io::Error::other("connection refused")))
        .retry_blocking(policy(3, &[1, 2]))
        .clock(clock)
        .name("fetch_user")
        .call()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "fetch_user failed after 3 attempts in 3.0s (attempts exhausted): connection refused"
    );
    let source = std::error::Error::source(&err).unwrap();
    assert_eq!(source.to_string(), "connection refused");
    let unnamed = (|_: Attempt| Err::<(), _>("x"))
        .retry_blocking(policy(1, &[]))
        .clock(VirtualClock::new())
        .call()
        .unwrap_err();
    assert_eq!(
        unnamed.to_string(),
        "operation failed after 1 attempt in 0ms (attempts exhausted): x"
    );
}

#[test]
fn a_zero_attempt_policy_is_a_config_error() {
    let err = RetryPolicy::with_schedule(Fixed(vec![]))
        .max_attempts(0)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "max_attempts");
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_attempts_happen_at_the_scheduled_instants() {
    let t0 = TokioClock.now();
    let times = std::sync::Mutex::new(Vec::new());
    let result = (|a: Attempt| {
        times.lock().unwrap().push(TokioClock.now() - t0);
        async move {
            if a.number < 3 {
                Err("down")
            } else {
                Ok(a.number)
            }
        }
    })
    .retry(policy(5, &[1, 2, 4]))
    .await;
    assert_eq!(result, Ok(3));
    assert_eq!(*times.lock().unwrap(), [secs(0), secs(1), secs(3)]);
}

#[test]
fn virtual_clock_async_executor_runs_without_a_runtime() {
    let clock = VirtualClock::new();
    let t0: Instant = clock.now();
    let result = futures::executor::block_on(
        (|a: Attempt| async move { if a.number < 3 { Err(()) } else { Ok(a.number) } })
            .retry(policy(3, &[5, 5]))
            .clock(clock.clone())
            .into_future(),
    );
    assert_eq!(result, Ok(3));
    assert_eq!(clock.now() - t0, secs(10));
}

proptest::proptest! {
    /// `max_attempts` on the backoff and on the policy: one rule, reported
    /// by `build()`: unset on the policy, the backoff's holds; set, it must
    /// not exceed the backoff's; and a failing call makes exactly that many.
    #[test]
    fn max_attempts_in_two_places_follows_one_rule(
        on_backoff in proptest::option::of(1u32..8),
        on_policy in proptest::option::of(1u32..8),
    ) {
        let mut backoff = crate::backoff::Backoff::constant(secs(1));
        if let Some(n) = on_backoff {
            backoff = backoff.max_attempts(n);
        }
        let mut builder = RetryPolicy::builder().backoff(backoff.build().unwrap());
        if let Some(n) = on_policy {
            builder = builder.max_attempts(n);
        }
        let built = builder.build();
        match (on_backoff, on_policy) {
            (Some(b), Some(p)) if p > b => {
                let err = built.unwrap_err();
                proptest::prop_assert_eq!(err.field(), "max_attempts");
                let names_both = format!("{p} (the backoff's: {b})");
                proptest::prop_assert!(err.to_string().contains(&names_both), "{}", err);
            }
            _ => {
                let policy = built.unwrap();
                let expected = on_policy.or(on_backoff).unwrap_or(3);
                proptest::prop_assert_eq!(policy.max_attempts(), expected);
                let err = (|_: Attempt| Err::<(), _>("down"))
                    .retry_blocking(&policy)
                    .clock(VirtualClock::new())
                    .call()
                    .unwrap_err();
                proptest::prop_assert_eq!(err.attempts(), expected);
                proptest::prop_assert_eq!(err.reason(), StopReason::Exhausted);
                // A policy derived from it keeps the rule.
                let once = policy.to_builder().max_attempts(1).build().unwrap();
                proptest::prop_assert_eq!(once.max_attempts(), 1);
            }
        }
    }
}
