//! `StopSending`: no more copies, while those in flight may still win.

use super::*;
use crate::call::StopReason;
use crate::clock::VirtualClock;
use crate::hedge::Hedgeable;
use crate::policy::{HedgeAction, HedgeDecision};

#[test]
fn stop_sending_keeps_the_copies_in_flight_and_sends_no_more() {
    let policy = policy(3, 100);
    let clock = VirtualClock::manual();
    let mut call = policy.start(&clock, None);
    assert!(matches!(
        policy.send_due(&mut call, &clock),
        HedgeAction::Send(_)
    ));
    call.stop_sending();
    clock.advance(ms(100));
    assert_eq!(
        policy.send_due(&mut call, &clock),
        HedgeAction::WaitForOutcome
    );
    // A non-fatal failure does not bring a copy back; the call ends as
    // the caller's (or the classifier's) stop, not as exhausted.
    assert_eq!(
        policy.on_outcome(&mut call, 1, Verdict::Retry, &clock),
        HedgeDecision::Stop(StopReason::Permanent)
    );
    assert_eq!(call.sent(), 1);
}

fn forbidding(r: &Result<u32, Fail>) -> Verdict {
    match r {
        Err(Fail::Pushback(_, _)) => Verdict::StopSending,
        other => classify(other),
    }
}

#[tokio::test(start_paused = true)]
async fn stop_sending_lets_the_copies_in_flight_win() {
    let s = Script::new();
    let control = Arc::new(TestControl {
        allow: 5,
        ..TestControl::default()
    });
    let value = s
        .op(vec![
            (700, Ok(1)),
            (100, Err(Fail::Pushback(2, 0))),
            (1, Ok(3)),
        ])
        .hedge(controlled(3, 500, &control))
        .classify(forbidding)
        .await
        .unwrap();
    // Copy 2's server forbade retries at 600 ms: copy 3 (due then, at
    // once after a failure) is never sent, and copy 1 still wins at 700 ms.
    assert_eq!(value, 1);
    assert_eq!(s.times(), [(1, 0), (2, 500)]);
    assert_eq!(s.elapsed(), ms(700));
    assert_eq!(s.live(), 0);
    assert_eq!(
        control.failures.load(Ordering::SeqCst),
        1,
        "the control counts it"
    );
}

#[tokio::test(start_paused = true)]
async fn stop_sending_ends_the_call_when_the_copies_in_flight_fail() {
    let s = Script::new();
    let err = s
        .op(vec![
            (700, Err(Fail::NonFatal(1))),
            (100, Err(Fail::Pushback(2, 0))),
            (1, Ok(3)),
        ])
        .hedge(policy(3, 500))
        .classify(forbidding)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Permanent);
    assert_eq!(err.last_error(), Some(&Fail::NonFatal(1)));
    assert_eq!(s.times(), [(1, 0), (2, 500)]);
    assert_eq!(s.elapsed(), ms(700), "copy 1 ran to its end");
    assert_eq!(
        (
            err.hedge_stats().unwrap().sent,
            err.hedge_stats().unwrap().failed
        ),
        (2, 2)
    );
}
