//! Concurrency limits under the hedger: every copy takes a slot; a copy the
//! limit has no room for is never sent.

use super::*;
use crate::call::StopReason;
use crate::hedge::Hedgeable;
use crate::limit::ConcurrencyLimit;

fn limited(limit: &ConcurrencyLimit, copies: u32) -> HedgePolicy {
    HedgePolicy::builder(ms(10))
        .max_attempts(copies)
        .concurrency_limit(limit.clone())
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn each_copy_holds_a_slot_while_in_flight() {
    let limit = ConcurrencyLimit::fixed(8).build().unwrap();
    let peak = Arc::new(AtomicU32::new(0));
    let value = {
        let (shared, peak) = (limit.clone(), Arc::clone(&peak));
        (move |a: Attempt| {
            let (limit, peak) = (shared.clone(), Arc::clone(&peak));
            async move {
                peak.fetch_max(limit.in_flight(), Ordering::Relaxed);
                // The first two copies are slow; the third answers at once.
                if a.number < 3 {
                    tokio::time::sleep(ms(1000)).await;
                }
                Ok::<_, &str>(a.number)
            }
        })
        .hedge(limited(&limit, 3))
        .clock(TokioClock)
        .await
    };
    assert_eq!(value, Ok(3));
    assert_eq!(peak.load(Ordering::Relaxed), 3);
    assert_eq!(
        limit.in_flight(),
        0,
        "the losers' slots went back when they were dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn a_copy_without_a_slot_is_not_sent_and_the_first_still_wins() {
    let limit = ConcurrencyLimit::fixed(1).build().unwrap();
    let sent = Arc::new(AtomicU32::new(0));
    let report = {
        let sent = Arc::clone(&sent);
        (move |a: Attempt| {
            sent.fetch_add(1, Ordering::Relaxed);
            async move {
                tokio::time::sleep(ms(50)).await;
                Ok::<_, &str>(a.number)
            }
        })
        .hedge(limited(&limit, 3))
        .clock(TokioClock)
        .report()
        .await
    };
    assert_eq!(report.result, Ok(1));
    assert_eq!(sent.load(Ordering::Relaxed), 1);
    assert_eq!(report.hedge.map(|h| h.sent), Some(1));
    assert_eq!(limit.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_full_limit_stops_the_call_before_its_first_copy() {
    let limit = ConcurrencyLimit::fixed(1).name("search").build().unwrap();
    let _held = limit.try_acquire().unwrap();
    let err = (|_: Attempt| async { Ok::<_, &str>(()) })
        .hedge(limited(&limit, 3))
        .clock(TokioClock)
        .await
        .unwrap_err();
    assert_eq!(
        (err.reason(), err.attempts()),
        (StopReason::LimitReached, 0)
    );
    assert_eq!(err.limit_refused().map(|r| r.by), Some("search"));
}

/// One call a second on tokio's (paused) clock.
fn one_per_second() -> crate::rate::RateLimit {
    crate::rate::RateLimit::builder()
        .name("maps api")
        .quota(crate::rate::Quota::per_second(1).unwrap())
        .build_with_clock(TokioClock)
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_copy_the_rate_limit_does_not_admit_is_not_sent_and_the_first_still_wins() {
    let limit = one_per_second();
    let policy = HedgePolicy::builder(ms(10))
        .max_attempts(3)
        .rate_limit(limit.clone())
        .build()
        .unwrap();
    let sent = Arc::new(AtomicU32::new(0));
    let report = {
        let sent = Arc::clone(&sent);
        (move |a: Attempt| {
            sent.fetch_add(1, Ordering::Relaxed);
            async move {
                tokio::time::sleep(ms(50)).await;
                Ok::<_, &str>(a.number)
            }
        })
        .hedge(&policy)
        .clock(TokioClock)
        .report()
        .await
    };
    assert_eq!(report.result, Ok(1));
    assert_eq!(sent.load(Ordering::Relaxed), 1);
    // Refused before its first copy: throttled, with the wait.
    let err = (|_: Attempt| async { Ok::<_, &str>(0) })
        .hedge(&policy)
        .clock(TokioClock)
        .await
        .unwrap_err();
    assert_eq!((err.reason(), err.attempts()), (StopReason::Throttled, 0));
    assert_eq!(err.refused_by(), Some("maps api"));
    assert!(
        err.retry_after()
            .is_some_and(|d| d > Duration::ZERO && d <= Duration::from_secs(1))
    );
}
