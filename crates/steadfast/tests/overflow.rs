//! Issue 15, items 5-7: waits too long for `Instant` mean "never" (or the
//! end of the representable time line), never "now" and never a panic; and a
//! blocking retry on a manual virtual clock stops on cancel without waiting
//! for the clock to move. All through the public API, on virtual time.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use steadfast::clock::{Clock, VirtualClock};
use steadfast::policy::{HedgeAction, HedgeDecision};
use steadfast::retry::BlockingRetryable;
use steadfast::{Attempt, CancelToken, HedgePolicy, RetryPolicy, StopReason, Verdict};

#[test]
fn a_hedge_delay_of_duration_max_never_sends_a_second_copy_by_time() {
    let policy = HedgePolicy::builder(Duration::MAX)
        .max_attempts(3)
        .build()
        .expect("valid");
    let clock = VirtualClock::manual();
    let mut call = policy.start(&clock, None);
    assert!(matches!(
        policy.send_due(&mut call, &clock),
        HedgeAction::Send(a) if a.number == 1
    ));
    // Before the fix the overflowing `now + delay` fell back to `now`: copy 2
    // was due at once.
    let action = policy.send_due(&mut call, &clock);
    assert!(
        !matches!(action, HedgeAction::Send(_)),
        "copy 2 sent at once: {action:?}"
    );
    clock.advance(Duration::from_secs(1_000_000_000));
    assert!(!matches!(
        policy.send_due(&mut call, &clock),
        HedgeAction::Send(_)
    ));
    // A failure still sends the next copy at once, as with any long delay.
    assert_eq!(
        policy.on_outcome(&mut call, 1, Verdict::Retry, &clock),
        HedgeDecision::Continue
    );
    assert!(matches!(
        policy.send_due(&mut call, &clock),
        HedgeAction::Send(a) if a.number == 2
    ));
}

#[test]
fn a_pushback_of_duration_max_holds_the_next_copy_back() {
    let policy = HedgePolicy::builder(Duration::from_millis(10))
        .max_attempts(3)
        .max_delay(Duration::MAX)
        .build()
        .expect("valid");
    let clock = VirtualClock::manual();
    let mut call = policy.start(&clock, None);
    assert!(matches!(
        policy.send_due(&mut call, &clock),
        HedgeAction::Send(_)
    ));
    assert_eq!(
        policy.on_outcome(&mut call, 1, Verdict::RetryAfter(Duration::MAX), &clock),
        HedgeDecision::Continue
    );
    clock.advance(Duration::from_secs(3600));
    let action = policy.send_due(&mut call, &clock);
    assert!(
        !matches!(action, HedgeAction::Send(_)),
        "the pushback was ignored: {action:?}"
    );
}

#[test]
fn a_retry_honouring_a_duration_max_hint_does_not_panic() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .max_delay(Duration::MAX)
        .build()
        .expect("valid");
    let clock = VirtualClock::new();
    let start = clock.now();
    let result = (|a: Attempt| {
        if a.number < 3 {
            Err("busy")
        } else {
            Ok(a.number)
        }
    })
    .retry_blocking(&policy)
    .classify(|r: &Result<u32, &str>| match r {
        Ok(_) => Verdict::Success,
        Err(_) => Verdict::RetryAfter(Duration::MAX),
    })
    .clock(clock.clone())
    .call();
    assert_eq!(result, Ok(3));
    // Time went to the end of the representable line, and stayed there.
    assert!(clock.now() > start);
    assert_eq!(clock.now().checked_add(Duration::from_nanos(1)), None);
}

#[test]
fn advancing_a_manual_clock_by_duration_max_does_not_panic() {
    let clock = VirtualClock::manual();
    clock.advance(Duration::MAX);
    clock.advance(Duration::MAX);
    clock.sleep_blocking(Duration::MAX);
    assert_eq!(clock.now().checked_add(Duration::from_nanos(1)), None);
}

#[test]
fn cancel_stops_a_blocking_retry_waiting_on_a_manual_clock() {
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .build()
        .expect("valid");
    let clock = VirtualClock::manual();
    let token = CancelToken::new();
    let attempts = Arc::new(AtomicU32::new(0));
    let (c, t, n) = (clock.clone(), token.clone(), Arc::clone(&attempts));
    let caller = std::thread::spawn(move || {
        (move |_: Attempt| {
            n.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>("down")
        })
        .retry_blocking(&policy)
        .clock(c)
        .cancel_on(t)
        .call()
    });
    // Cancel once the first attempt has failed (the retry then waits on the
    // clock, which nobody advances).
    while attempts.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    token.cancel();
    let err = caller
        .join()
        .expect("no panic")
        .expect_err("cancelled, not succeeded");
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!(clock.elapsed(), Duration::ZERO, "the clock never moved");
}
