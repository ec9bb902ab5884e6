//! Concurrency limits under the retry executors: a slot per attempt, given
//! back between attempts and on every path, refusals that say which limit.

use std::future::{Future, IntoFuture};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::Context;

use super::*;
use crate::call::{Attempt, StopReason};
use crate::clock::VirtualClock;
use crate::limit::{Aimd, ConcurrencyLimit, Signal};
use crate::retry::{BlockingRetryable, Notice, Retryable};

fn limited(attempts: u32, delays: &[u64], limit: &ConcurrencyLimit) -> RetryPolicy<Fixed> {
    RetryPolicy::with_schedule(Fixed(delays.iter().map(|&s| secs(s)).collect()))
        .max_attempts(attempts)
        .concurrency_limit(limit.clone())
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn every_attempt_holds_a_slot_and_gives_it_back_before_the_wait() {
    let limit = ConcurrencyLimit::fixed(1).build().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let value = {
        let (inner, seen) = (limit.clone(), Arc::clone(&seen));
        (move |a: Attempt| {
            let (limit, seen) = (inner.clone(), Arc::clone(&seen));
            async move {
                seen.lock().unwrap().push(limit.in_flight());
                if a.number < 3 {
                    Err("unavailable")
                } else {
                    Ok(a.number)
                }
            }
        })
        .retry(limited(3, &[1, 1], &limit))
        .notify({
            let limit = limit.clone();
            move |_: &Notice<'_, &str>| {
                assert_eq!(limit.in_flight(), 0, "no slot held while waiting");
            }
        })
        .await
    };
    assert_eq!(value, Ok(3));
    assert_eq!(*seen.lock().unwrap(), vec![1, 1, 1]);
    assert_eq!(limit.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_full_limit_refuses_the_call_before_any_attempt_and_says_which() {
    let limit = ConcurrencyLimit::fixed(2).name("ledger").build().unwrap();
    let _a = limit.try_acquire().unwrap();
    let _b = limit.try_acquire().unwrap();
    let calls = AtomicU32::new(0);
    for policy in [
        limited(3, &[1, 1], &limit),
        limited(3, &[1, 1], &limit)
            .to_builder()
            .max_elapsed(secs(5))
            .build()
            .unwrap(),
    ] {
        let err = (|_: Attempt| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Ok::<_, &str>(()) }
        })
        .retry(&policy)
        .name("post")
        .await
        .unwrap_err();
        assert_eq!(
            (err.reason(), err.attempts()),
            (StopReason::LimitReached, 0)
        );
        let refused = err.limit_refused().unwrap();
        assert_eq!(
            (refused.by, refused.in_flight, refused.limit),
            ("ledger", 2, 2)
        );
        assert_eq!(
            err.to_string(),
            "post failed after 0 attempts in 0ms (concurrency limit ledger full: 2 in flight, limit 2)"
        );
    }
    assert_eq!(calls.load(Ordering::Relaxed), 0);
}

#[tokio::test(start_paused = true)]
async fn a_retry_without_a_slot_stops_with_the_last_error_and_refunds_its_grant() {
    let limit = ConcurrencyLimit::fixed(1).build().unwrap();
    let taken = Arc::new(std::sync::Mutex::new(None));
    let err = {
        let (limit, taken) = (limit.clone(), Arc::clone(&taken));
        (|_: Attempt| async { Err::<(), _>("reset") })
            .retry(limited(3, &[1, 1], &limit))
            // Someone else takes the slot while this call waits to retry.
            .notify(move |_: &Notice<'_, &str>| *taken.lock().unwrap() = limit.try_acquire().ok())
            .await
            .unwrap_err()
    };
    assert_eq!(
        (err.reason(), err.attempts()),
        (StopReason::LimitReached, 1)
    );
    assert_eq!(err.last_error(), Some(&"reset"));
    assert_eq!(err.limit_refused().map(|r| r.in_flight), Some(1));
    assert!(
        err.to_string()
            .contains("(retry refused: concurrency limit full: 1 in flight, limit 1)"),
        "{err}"
    );
    drop(taken);
    assert_eq!(limit.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_queued_call_gets_the_slot_another_gives_back_or_stops_after_its_wait() {
    let limit = ConcurrencyLimit::fixed(1)
        .queue(4, secs(2))
        .build()
        .unwrap();
    let held = limit.try_acquire().unwrap();
    let releaser = tokio::spawn(async move {
        tokio::time::sleep(secs(1)).await;
        held.finish(Signal::Success);
    });
    let start = tokio::time::Instant::now();
    let value = (|a: Attempt| async move { Ok::<_, &str>(a.number) })
        .retry(limited(3, &[1, 1], &limit))
        .await;
    assert_eq!(value, Ok(1));
    assert_eq!(
        start.elapsed(),
        secs(1),
        "it waited for the slot, not for its max wait"
    );
    releaser.await.unwrap();

    let _held = limit.try_acquire().unwrap();
    let err = (|_: Attempt| async { Ok::<_, &str>(()) })
        .retry(limited(3, &[1, 1], &limit))
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::LimitReached);
    assert_eq!(err.limit_refused().map(|r| r.waited), Some(secs(2)));
    assert_eq!(limit.snapshot().queued, 0, "it left the queue");
}

#[tokio::test(start_paused = true)]
async fn a_queue_wait_cut_by_the_deadline_stops_for_the_deadline() {
    let limit = ConcurrencyLimit::fixed(1)
        .queue(4, secs(60))
        .build()
        .unwrap();
    let _held = limit.try_acquire().unwrap();
    let policy = limited(3, &[1, 1], &limit)
        .to_builder()
        .max_elapsed(secs(3))
        .build()
        .unwrap();
    let start = tokio::time::Instant::now();
    let err = (|_: Attempt| async { Ok::<_, &str>(()) })
        .retry(&policy)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(start.elapsed(), secs(3));
    assert!(err.limit_refused().is_some());
}

/// Drops the call's future after each number of polls in turn: whatever
/// await point it stops at (an attempt, a wait, the queue), no slot stays
/// taken and no waiter stays queued.
#[test]
fn a_call_dropped_at_any_await_point_gives_its_slot_back() {
    let limit = ConcurrencyLimit::fixed(1)
        .queue(4, secs(5))
        .build()
        .unwrap();
    let clock = VirtualClock::manual();
    for polls in 0..8 {
        for held_elsewhere in [false, true] {
            let other = held_elsewhere.then(|| limit.try_acquire().unwrap());
            {
                let mut call = pin!(
                    (|a: Attempt| {
                        let clock = clock.clone();
                        async move {
                            crate::clock::AsyncClock::sleep(&clock, secs(1)).await;
                            if a.number < 3 {
                                Err("unavailable")
                            } else {
                                Ok(())
                            }
                        }
                    })
                    .retry(limited(3, &[1, 1], &limit))
                    .clock(clock.clone())
                    .into_future()
                );
                let waker = futures::task::noop_waker();
                let mut cx = Context::from_waker(&waker);
                for _ in 0..polls {
                    if call.as_mut().poll(&mut cx).is_ready() {
                        break;
                    }
                    clock.advance(secs(1));
                }
            }
            drop(other);
            assert_eq!(
                (limit.in_flight(), limit.snapshot().queued),
                (0, 0),
                "after {polls} polls"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_attempt_cut_by_its_timeout_is_a_drop_for_an_adaptive_limit() {
    let aimd = Aimd::builder()
        .initial_limit(10)
        .min_limit(1)
        .build()
        .unwrap();
    let limit = ConcurrencyLimit::adaptive(aimd)
        .window(Duration::ZERO, 1)
        .build_with_clock(TokioClock)
        .unwrap();
    let policy = RetryPolicy::builder()
        .max_attempts(1)
        .attempt_timeout(secs(1))
        .concurrency_limit(limit.clone())
        .build()
        .unwrap();
    let err = (|_: Attempt| std::future::pending::<Result<(), &str>>())
        .retry(&policy)
        .await
        .unwrap_err();
    assert!(err.timed_out());
    assert_eq!(limit.limit(), 9, "AIMD: 10 × 0.9 after the drop");
}

#[test]
fn the_blocking_executor_takes_a_slot_per_attempt_and_refuses_when_full() {
    let limit = ConcurrencyLimit::fixed(1).build().unwrap();
    let mut seen = Vec::new();
    let value = (|a: Attempt| {
        seen.push(limit.in_flight());
        if a.number < 2 {
            Err("busy")
        } else {
            Ok(a.number)
        }
    })
    .retry_blocking(limited(3, &[1, 1], &limit))
    .clock(VirtualClock::new())
    .call();
    assert_eq!((value, seen), (Ok(2), vec![1, 1]));
    let held = limit.try_acquire().unwrap();
    let err = (|_: Attempt| Ok::<_, &str>(()))
        .retry_blocking(limited(3, &[1, 1], &limit))
        .clock(VirtualClock::new())
        .call()
        .unwrap_err();
    assert_eq!(
        (err.reason(), err.attempts()),
        (StopReason::LimitReached, 0)
    );
    drop(held);
    assert_eq!(limit.in_flight(), 0);
}

#[test]
fn the_blocking_executor_waits_in_the_queue_for_a_slot_another_thread_frees() {
    let limit = ConcurrencyLimit::fixed(1)
        .queue(2, secs(60))
        .build()
        .unwrap();
    let held = limit.try_acquire().unwrap();
    let waiter = {
        let limit = limit.clone();
        std::thread::spawn(move || {
            (|a: Attempt| Ok::<_, &str>(a.number))
                .retry_blocking(limited(1, &[], &limit))
                .clock(VirtualClock::new())
                .call()
        })
    };
    while limit.snapshot().queued == 0 {
        std::thread::yield_now();
    }
    held.finish(Signal::Success);
    assert_eq!(waiter.join().unwrap(), Ok(1));
    assert_eq!(limit.in_flight(), 0);
}
