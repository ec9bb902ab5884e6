//! Controls: the retries they refuse, the failures they hear, and the
//! grants they get back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::call::{Attempt, StopReason, Verdict};
use crate::clock::VirtualClock;
use crate::control::{Outcome, Refusal, RetryControl};
use crate::retry::{BlockingRetryable, Retryable};

/// A control that admits everything and allows `n` retries.
#[derive(Debug)]
struct Allow(AtomicU32, AtomicU32);

impl RetryControl for Allow {
    fn record(&self, outcome: Outcome) {
        if outcome == Outcome::RetryableFailure {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn allow_retry(&self) -> Result<(), Refusal> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| Refusal { by: "test budget" })
    }
}

#[test]
fn a_control_can_refuse_retries() {
    let control = Arc::new(Allow(AtomicU32::new(1), AtomicU32::new(0)));
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(5)
        .control(control.clone())
        .build()
        .unwrap();
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .clock(VirtualClock::new())
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Throttled);
    assert_eq!(err.refused_by(), Some("test budget"));
    assert_eq!(err.attempts(), 2);
    assert_eq!(
        control.1.load(Ordering::Relaxed),
        2,
        "both failures were recorded"
    );
    assert!(err.to_string().contains("retry refused by test budget"));
}

#[test]
fn stop_sending_stops_a_retry_at_once_and_the_control_counts_it() {
    let control = Arc::new(Allow(AtomicU32::new(5), AtomicU32::new(0)));
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(5)
        .control(control.clone())
        .build()
        .unwrap();
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        Err::<(), _>("pushback: do not retry")
    })
    .retry_blocking(&policy)
    .classify(|_: &Result<(), &str>| Verdict::StopSending)
    .clock(VirtualClock::new())
    .call()
    .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(err.reason(), StopReason::Permanent);
    assert_eq!(err.last_error(), Some(&"pushback: do not retry"));
    assert_eq!(control.1.load(Ordering::Relaxed), 1, "a failure, counted");
    // `Stop` is final too, but the control does not hear it as a failure.
    let _ = (|_: Attempt| Err::<(), _>("bad request"))
        .retry_blocking(&policy)
        .classify(|_: &Result<(), &str>| Verdict::Stop)
        .clock(VirtualClock::new())
        .call();
    assert_eq!(control.1.load(Ordering::Relaxed), 1);
}

/// A control that grants every retry and counts grants and refunds.
#[derive(Debug, Default)]
struct Ledger {
    granted: AtomicU32,
    refunded: AtomicU32,
}

impl RetryControl for Ledger {
    fn record(&self, _: Outcome) {}
    fn allow_retry(&self) -> Result<(), Refusal> {
        self.granted.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn refund(&self, grant: crate::control::Grant) {
        assert_eq!(grant, crate::control::Grant::Retry);
        self.refunded.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_retry_cancelled_before_it_runs_is_refunded() {
    let ledger = Arc::new(Ledger::default());
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(3600); 5]))
        .max_attempts(5)
        .control(ledger.clone())
        .build()
        .unwrap();
    let token = CancelToken::new();
    let t = token.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        t.cancel();
    });
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .cancel_on(token)
        .call()
        .unwrap_err();
    canceller.join().unwrap();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(ledger.granted.load(Ordering::SeqCst), 1);
    assert_eq!(
        ledger.refunded.load(Ordering::SeqCst),
        1,
        "the unused grant went back"
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_async_retry_cancelled_mid_sleep_is_refunded_but_a_used_one_is_not() {
    let ledger = Arc::new(Ledger::default());
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1), secs(3600)]))
        .max_attempts(5)
        .control(ledger.clone())
        .build()
        .unwrap();
    let token = CancelToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(secs(60)).await;
        t.cancel();
    });
    let err = (|_: Attempt| async { Err::<(), _>("down") })
        .retry(&policy)
        .cancel_on(token)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 2);
    // Two grants: the first was used by attempt 2, the second was pending
    // in the one-hour wait when the call was cancelled.
    assert_eq!(ledger.granted.load(Ordering::SeqCst), 2);
    assert_eq!(ledger.refunded.load(Ordering::SeqCst), 1);
}
