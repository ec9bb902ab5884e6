//! Controls: hedges they refuse, and a first copy they do not admit.

use super::*;
use crate::call::{HedgeStats, StopReason};
use crate::clock::VirtualClock;
use crate::hedge::Hedgeable;
use crate::policy::HedgeAction;

#[tokio::test(start_paused = true)]
async fn a_refused_hedge_is_not_sent() {
    let s = Script::new();
    let control = Arc::new(TestControl {
        allow: 1,
        ..Default::default()
    });
    let mut stats = HedgeStats::default();
    let r = s
        .op(vec![
            (1800, Ok(1)),
            (FOREVER, Ok(2)),
            (1, Ok(3)),
            (1, Ok(4)),
        ])
        .hedge(controlled(4, 500, &control))
        .classify(classify)
        .on_finish(|st: &HedgeStats| stats = *st)
        .await;
    assert_eq!(r, Ok(1));
    assert_eq!(
        s.times(),
        [(1, 0), (2, 500)],
        "copy 3 was refused, 4 never asked"
    );
    assert_eq!(control.asked.load(Ordering::SeqCst), 2);
    assert_eq!(control.successes.load(Ordering::SeqCst), 1);
    assert_eq!(stats.refused_by, Some("test budget"));
    assert_eq!(s.live(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_with_nothing_in_flight_ends_the_call() {
    let s = Script::new();
    let control = Arc::new(TestControl::default());
    let err = s
        .op(vec![(100, Err(Fail::NonFatal(1))), (1, Ok(2))])
        .hedge(controlled(3, 500, &control))
        .classify(classify)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Throttled);
    assert_eq!(err.last_error(), Some(&Fail::NonFatal(1)));
    assert_eq!(err.hedge_stats().unwrap().refused_by, Some("test budget"));
    assert_eq!(s.times(), [(1, 0)]);
    assert_eq!(s.elapsed(), ms(100));
    assert_eq!(control.failures.load(Ordering::SeqCst), 1);
    assert!(err.to_string().contains("hedge refused by test budget"));
}

#[test]
fn a_control_refusing_the_first_copy_stops_the_call() {
    #[derive(Debug)]
    struct Closed;
    impl RetryControl for Closed {
        fn admit(&self) -> Result<(), Refusal> {
            Err(Refusal { by: "throttle" })
        }
        fn record(&self, _: Outcome) {}
        fn allow_retry(&self) -> Result<(), Refusal> {
            Ok(())
        }
    }
    let policy = HedgePolicy::builder(ms(1))
        .control(Arc::new(Closed))
        .build()
        .unwrap();
    let clock = VirtualClock::manual();
    let mut call = policy.start(&clock, None);
    assert_eq!(
        policy.send_due(&mut call, &clock),
        HedgeAction::Stop(StopReason::Throttled)
    );
    assert_eq!(call.sent(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_a6_token_bucket_stops_hedges_when_failures_mount() {
    let bucket = Arc::new(
        crate::control::TokenBucket::builder()
            .max_tokens(10)
            .token_ratio(0.1)
            .build()
            .unwrap(),
    );
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(3)
        .control(Arc::clone(&bucket) as Arc<dyn RetryControl>)
        .build()
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let err = (|a: Attempt| async move {
            tokio::time::sleep(ms(10)).await;
            Err::<u32, Fail>(Fail::NonFatal(a.number))
        })
        .hedge(&policy)
        .classify(classify)
        .await
        .unwrap_err();
        seen.push((err.hedge_stats().unwrap().sent, err.reason()));
    }
    // 10 tokens; each failure takes one; hedges stop at <= 5 tokens.
    assert_eq!(
        seen,
        [
            (3, StopReason::Exhausted),
            (2, StopReason::Throttled),
            (1, StopReason::Throttled),
        ]
    );
    assert_eq!(bucket.milli_tokens(), 4000);
}
