//! Notify hooks: what a notice says, and an async hook awaited before the
//! wait.

use std::sync::Arc;

use super::*;
use crate::call::{Attempt, StopReason};
use crate::clock::VirtualClock;
use crate::retry::{BlockingRetryable, Notice, Retryable};

#[test]
fn notify_sees_attempt_error_and_delay() {
    let mut seen = Vec::new();
    let _ = (|a: Attempt| Err::<(), _>(a.number * 10))
        .retry_blocking(policy(3, &[1, 2]))
        .notify(|n: &Notice<u32>| {
            seen.push((n.attempt, n.error.copied(), n.wait));
        })
        .clock(VirtualClock::new())
        .call();
    assert_eq!(seen, [(1, Some(10), secs(1)), (2, Some(20), secs(2))]);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_notify_hook_is_awaited_before_the_sleep() {
    let t0 = TokioClock.now();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let l = log.clone();
    let result = (|a: Attempt| async move { if a.is_first() { Err("x") } else { Ok(()) } })
        .retry(policy(2, &[1]))
        .notify_async(move |n: &Notice<&str>| {
            let (attempt, delay) = (n.attempt, n.wait);
            let l = l.clone();
            async move {
                tokio::time::sleep(secs(10)).await; // a slow hook
                l.lock().unwrap().push((attempt, delay));
            }
        })
        .await;
    assert_eq!(result, Ok(()));
    assert_eq!(*log.lock().unwrap(), [(1, secs(1))]);
    assert_eq!(TokioClock.now() - t0, secs(11));
}

#[test]
fn the_notice_says_when_and_how_much_time_is_left() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1), secs(2), secs(4), secs(8)]))
        .max_attempts(10)
        .max_elapsed(secs(10))
        .build()
        .unwrap();
    let mut notices = Vec::new();
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .clock(clock.clone())
        .notify(|n: &Notice<&str>| {
            notices.push((n.attempt, n.wait, n.time_left, n.at - t0));
        })
        .call()
        .unwrap_err();
    // Waits of 1, 2 and 4 s fit in 10 s; the 8 s one (from t = 7 s) would
    // end past the deadline, so it is never announced nor taken.
    assert_eq!(
        notices,
        [
            (1, secs(1), Some(secs(10)), secs(0)),
            (2, secs(2), Some(secs(9)), secs(1)),
            (3, secs(4), Some(secs(7)), secs(3)),
        ]
    );
    assert!(notices.iter().all(|(_, wait, left, _)| Some(*wait) < *left));
    assert_eq!(err.reason(), StopReason::Deadline);
}
