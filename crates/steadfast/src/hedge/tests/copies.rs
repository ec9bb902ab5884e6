//! Copies: when they go out (after the delay, at once, after pushback, on
//! an adaptive delay), which one wins, and what the call gives back.

use std::future::IntoFuture;

use super::*;
use crate::call::{HedgeStats, StopReason};
use crate::cancel::CancelToken;
use crate::clock::VirtualClock;
use crate::hedge::Hedgeable;
use crate::policy::AdaptiveDelay;

#[tokio::test(start_paused = true)]
async fn copies_go_out_every_delay_and_pile_up_in_flight() {
    let s = Script::new();
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(4)
        .max_elapsed(ms(2000))
        .build()
        .unwrap();
    let op = s.op(vec![(FOREVER, Ok(1)); 4]);
    let hedged = op.hedge(&policy).classify(classify).clock(TokioClock);
    let probe = async {
        let mut seen = Vec::new();
        for at in [1, 501, 1001, 1501] {
            tokio::time::sleep_until(tokio::time::Instant::from_std(s.t0 + ms(at))).await;
            seen.push(s.live());
        }
        seen
    };
    let (result, in_flight) = tokio::join!(hedged.into_future(), probe);
    assert_eq!(in_flight, [1, 2, 3, 4]);
    assert_eq!(s.times(), [(1, 0), (2, 500), (3, 1000), (4, 1500)]);
    let told: Vec<Vec<u32>> = s.sent.borrow().iter().map(|x| x.2.clone()).collect();
    assert_eq!(told, [vec![], vec![1], vec![1, 2], vec![1, 2, 3]]);
    let err = result.unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.hedge_stats().unwrap().cancelled, 4);
    assert_eq!(s.elapsed(), ms(2000));
    assert_eq!(s.live(), 0, "every copy was dropped");
}

#[tokio::test(start_paused = true)]
async fn a_fast_first_copy_sends_no_hedge() {
    let s = Script::new();
    let mut stats = HedgeStats::default();
    let r = s
        .op(vec![(10, Ok(1)), (10, Ok(2))])
        .hedge(policy(2, 500))
        .classify(classify)
        .on_finish(|st: &HedgeStats| stats = *st)
        .await;
    assert_eq!(r, Ok(1));
    assert_eq!(s.times(), [(1, 0)]);
    assert_eq!(
        (stats.sent, stats.winner, stats.cancelled, stats.elapsed),
        (1, Some(1), 0, ms(10))
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_copy_loses_and_is_cancelled() {
    let s = Script::new();
    let mut stats = HedgeStats::default();
    let r = s
        .op(vec![(10_000, Ok(1)), (100, Ok(2))])
        .hedge(policy(2, 500))
        .classify(classify)
        .on_finish(|st: &HedgeStats| stats = *st)
        .await;
    assert_eq!(r, Ok(2));
    assert_eq!(s.elapsed(), ms(600));
    assert_eq!(s.live(), 0, "the loser was dropped at once");
    assert_eq!((stats.sent, stats.winner, stats.cancelled), (2, Some(2), 1));
}

#[tokio::test(start_paused = true)]
async fn a_non_fatal_error_sends_the_next_copy_at_once() {
    let s = Script::new();
    let mut stats = HedgeStats::default();
    let r = s
        .op(vec![
            (100, Err(Fail::NonFatal(1))),
            (10_000, Ok(2)),
            (50, Ok(3)),
        ])
        .hedge(policy(3, 500))
        .classify(classify)
        .on_finish(|st: &HedgeStats| stats = *st)
        .await;
    assert_eq!(r, Ok(3));
    assert_eq!(s.times(), [(1, 0), (2, 100), (3, 600)]);
    assert_eq!(s.elapsed(), ms(650));
    assert_eq!(
        (stats.sent, stats.failed, stats.cancelled, stats.winner),
        (3, 1, 1, Some(3))
    );
    assert_eq!(s.live(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_fatal_error_cancels_everything_and_is_returned() {
    let s = Script::new();
    let err = s
        .op(vec![
            (10_000, Ok(1)),
            (200, Err(Fail::Fatal(2))),
            (1, Ok(3)),
        ])
        .hedge(policy(3, 500))
        .classify(classify)
        .name("lookup")
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Permanent);
    assert_eq!(err.last_error(), Some(&Fail::Fatal(2)));
    assert_eq!(
        s.times(),
        [(1, 0), (2, 500)],
        "no copy after the fatal error"
    );
    assert_eq!(s.elapsed(), ms(700));
    assert_eq!(
        (
            err.hedge_stats().unwrap().sent,
            err.hedge_stats().unwrap().cancelled
        ),
        (2, 1)
    );
    assert_eq!(s.live(), 0);
    assert!(
        err.to_string()
            .starts_with("lookup failed after 2 hedged attempts")
    );
}

#[tokio::test(start_paused = true)]
async fn when_every_copy_fails_the_last_error_is_returned() {
    let s = Script::new();
    let err = s
        .op(vec![
            (300, Err(Fail::NonFatal(1))),
            (300, Err(Fail::NonFatal(2))),
            (300, Err(Fail::NonFatal(3))),
        ])
        .hedge(policy(3, 500))
        .classify(classify)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.last_error(), Some(&Fail::NonFatal(3)));
    assert_eq!(s.times(), [(1, 0), (2, 300), (3, 600)]);
    assert_eq!(s.elapsed(), ms(900));
    assert_eq!(
        (
            err.hedge_stats().unwrap().sent,
            err.hedge_stats().unwrap().failed,
            err.hedge_stats().unwrap().cancelled
        ),
        (3, 3, 0)
    );
    let retry: crate::call::RetryError<Fail> = err;
    assert_eq!(retry.attempts(), 3);
}

#[tokio::test(start_paused = true)]
async fn zero_delay_sends_every_copy_at_once() {
    let s = Script::new();
    let r = s
        .op(vec![(40, Ok(1)), (30, Ok(2)), (10, Ok(3)), (20, Ok(4))])
        .hedge(policy(4, 0))
        .classify(classify)
        .await;
    assert_eq!(r, Ok(3));
    assert_eq!(s.times(), [(1, 0), (2, 0), (3, 0), (4, 0)]);
    assert_eq!(s.elapsed(), ms(10));
    assert_eq!(s.live(), 0);
}

#[tokio::test(start_paused = true)]
async fn pushback_delays_the_next_copy_then_the_delay_resumes() {
    let s = Script::new();
    let r = s
        .op(vec![
            (100, Err(Fail::Pushback(1, 2000))),
            (10_000, Ok(2)),
            (10, Ok(3)),
        ])
        .hedge(policy(3, 500))
        .classify(classify)
        .await;
    assert_eq!(r, Ok(3));
    // Copy 2 was due at 500 but the server asked for 2 s at 100 ms.
    assert_eq!(s.times(), [(1, 0), (2, 2100), (3, 2600)]);
}

#[tokio::test(start_paused = true)]
async fn pushback_is_capped_by_max_delay() {
    let s = Script::new();
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(2)
        .max_delay(ms(1000))
        .build()
        .unwrap();
    let r = s
        .op(vec![(100, Err(Fail::Pushback(1, 60_000))), (10, Ok(2))])
        .hedge(&policy)
        .classify(classify)
        .await;
    assert_eq!(r, Ok(2));
    assert_eq!(s.times(), [(1, 0), (2, 1100)]);
}

#[tokio::test(start_paused = true)]
async fn adaptive_delay_converges_to_the_latency_quantile() {
    // Every copy takes 1..=100 ms (fixed permutations, a different one for
    // hedges). The 95th percentile of a copy's latency is 95 ms.
    let adaptive = Arc::new(
        AdaptiveDelay::builder(ms(5))
            .quantile(0.95)
            .window(200)
            .min_samples(50)
            .refresh_every(10)
            .build()
            .unwrap(),
    );
    let policy = HedgePolicy::builder(Arc::clone(&adaptive))
        .max_attempts(2)
        .build()
        .unwrap();
    let mut hedges = 0;
    let mut delays = Vec::new();
    for call in 0..2000u64 {
        let first = (call * 37) % 100 + 1;
        let second = (call * 53 + 11) % 100 + 1;
        delays.push(adaptive.current());
        let mut sent = 0;
        let r = (|a: Attempt| async move {
            let latency = if a.is_first() { first } else { second };
            tokio::time::sleep(ms(latency)).await;
            Ok::<_, ()>(a.number)
        })
        .hedge(&policy)
        .on_finish(|s: &HedgeStats| sent = s.sent)
        .await;
        assert!(r.is_ok());
        if call >= 1000 {
            hedges += sent - 1;
        }
    }
    assert_eq!(delays[0], ms(5), "the fallback before any data");
    // Calls whose first copy is slower than the delay record a latency above
    // the delay: the share above the delay is kept, so the quantile holds.
    let last = adaptive.current();
    assert!(
        (ms(94)..=ms(97)).contains(&last),
        "delay {last:?} should sit at the 95th percentile (95 ms)"
    );
    assert!(
        (30..=70).contains(&hedges),
        "about 5 % of the last 1000 calls hedged, got {hedges}"
    );
}

#[test]
fn runs_on_a_manual_virtual_clock_without_a_runtime() {
    use std::task::{Context, Poll, Waker};
    let clock = VirtualClock::manual();
    let policy = policy(3, 500);
    let c2 = clock.clone();
    let hedged = (move |a: Attempt| {
        let clock = c2.clone();
        async move {
            crate::clock::AsyncClock::sleep(&clock, ms(if a.is_first() { 10_000 } else { 100 }))
                .await;
            Ok::<_, ()>(a.number)
        }
    })
    .hedge(&policy)
    .clock(clock.clone());
    let mut fut = Box::pin(hedged.into_future());
    let mut cx = Context::from_waker(Waker::noop());
    let mut steps = 0;
    let result = loop {
        if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            break r;
        }
        let next = clock.next_wake().expect("something waits on the clock");
        clock.advance_to(next);
        steps += 1;
        assert!(steps < 10);
    };
    assert_eq!(result, Ok(2));
    assert_eq!(clock.elapsed(), ms(600));
}

#[test]
fn a_hedged_call_is_send_when_its_parts_are() {
    fn assert_send<T: Send>(_: &T) {}
    let policy = Arc::new(policy(3, 10));
    let fut = (|a: Attempt| async move {
        tokio::time::sleep(ms(1)).await;
        Ok::<_, std::io::Error>(a.number)
    })
    .hedge(Arc::clone(&policy))
    .cancel_on(CancelToken::new())
    .into_future();
    assert_send(&fut);
}

#[tokio::test(start_paused = true)]
async fn a_report_gives_the_copies_of_a_success_and_tells_an_ok_that_ran_out() {
    let s = Script::new();
    let report = s
        .op(vec![(700, Ok(1)), (100, Ok(2)), (1, Ok(3))])
        .hedge(policy(3, 500))
        .classify(classify)
        .report()
        .await;
    assert_eq!(report.result.as_ref().ok(), Some(&2));
    assert!(report.succeeded());
    assert_eq!(
        (
            report.hedge.unwrap().sent,
            report.hedge.unwrap().winner,
            report.hedge.unwrap().cancelled
        ),
        (2, Some(2), 1)
    );

    // Every copy answers an `Ok` the classifier retries: the last one
    // comes back, and the report says the copies ran out.
    let s = Script::new();
    let report = s
        .op(vec![(100, Ok(503)), (100, Ok(503))])
        .hedge(policy(2, 500))
        .classify(|r: &Result<u32, Fail>| match r {
            Ok(503) | Err(_) => Verdict::Retry,
            Ok(_) => Verdict::Success,
        })
        .report()
        .await;
    assert_eq!(report.result.as_ref().ok(), Some(&503));
    assert_eq!(report.stop, Some(StopReason::Exhausted));
    assert_eq!(
        (report.hedge.unwrap().sent, report.hedge.unwrap().failed),
        (2, 2)
    );

    // A failure: the report's stop is the error's reason.
    let s = Script::new();
    let report = s
        .op(vec![(100, Err(Fail::Fatal(1)))])
        .hedge(policy(2, 500))
        .classify(classify)
        .report()
        .await;
    assert_eq!(report.stop, Some(StopReason::Permanent));
    assert_eq!(
        report.into_result().unwrap_err().reason(),
        StopReason::Permanent
    );
}
