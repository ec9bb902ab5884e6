//! The fleet limit around its backend, on virtual time: the timeout, the
//! over-quota cache, failing open and closed, coming back.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::executor::block_on;
use proptest::prelude::*;

use super::*;
use crate::clock::{AsyncClock, VirtualClock};

/// An honest backend: the GCRA of a keyed limit on the test's clock, and a
/// count of the checks it answered.
struct Gcra {
    limit: KeyedRateLimit<String>,
    asked: AtomicU32,
}

impl Gcra {
    fn new(clock: &VirtualClock, quotas: &[Quota]) -> Self {
        let limit = quotas
            .iter()
            .fold(KeyedRateLimit::builder(), |b, q| b.quota(*q))
            .build_with_clock(clock.clone())
            .unwrap();
        Self {
            limit,
            asked: AtomicU32::new(0),
        }
    }
}

impl QuotaBackend for Gcra {
    async fn check(&self, check: QuotaCheck<'_>) -> Result<Decision, BackendError> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        Ok(match self.limit.check_n(check.key, check.cost) {
            Ok(()) => Decision::Admit,
            Err(refused) => Decision::Refuse {
                retry_after: refused.retry_after,
            },
        })
    }
}

/// What a scripted backend does next.
enum Next {
    Answer(Decision),
    Fail,
    /// Never answers.
    Hang,
    /// Answers after this long on the clock.
    Slow(Duration, Decision),
}

struct Scripted {
    clock: VirtualClock,
    script: Mutex<VecDeque<Next>>,
}

impl Scripted {
    fn new(clock: &VirtualClock, script: impl IntoIterator<Item = Next>) -> Self {
        Self {
            clock: clock.clone(),
            script: Mutex::new(script.into_iter().collect()),
        }
    }
}

impl QuotaBackend for Scripted {
    async fn check(&self, _: QuotaCheck<'_>) -> Result<Decision, BackendError> {
        let next = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .expect("script ran out");
        match next {
            Next::Answer(d) => Ok(d),
            Next::Fail => Err(BackendError::new("connection refused")),
            Next::Hang => std::future::pending().await,
            Next::Slow(after, d) => {
                self.clock.sleep(after).await;
                Ok(d)
            }
        }
    }
}

/// Runs `fut` on a manual clock, moving time 1 ms whenever it waits.
fn run<F: std::future::Future>(clock: &VirtualClock, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        clock.advance(Duration::from_millis(1));
    }
}

fn per_second(n: u32) -> Quota {
    Quota::per_second(n).unwrap()
}

#[test]
fn building_asks_for_a_choice_between_failing_open_and_closed() {
    let clock = VirtualClock::new();
    let err = FleetRateLimit::builder(Gcra::new(&clock, &[per_second(1)]))
        .quota(per_second(1))
        .build_with_clock(clock.clone())
        .unwrap_err();
    assert_eq!(err.field(), "fail_open / fail_closed");
    let err = FleetRateLimit::builder(Gcra::new(&clock, &[per_second(1)]))
        .fail_closed()
        .build_with_clock(clock.clone())
        .unwrap_err();
    assert_eq!(err.field(), "quota");
    let err = FleetRateLimit::builder(Gcra::new(&clock, &[per_second(1)]))
        .quota(per_second(1))
        .fail_closed()
        .timeout(Duration::ZERO)
        .build_with_clock(clock)
        .unwrap_err();
    assert_eq!(err.field(), "timeout");
}

#[test]
fn a_backend_that_never_answers_is_given_up_on_at_the_timeout_and_fails_closed() {
    let clock = VirtualClock::new();
    let limit = FleetRateLimit::builder(Scripted::new(&clock, [Next::Hang]))
        .name("maps")
        .quota(per_second(10))
        .fail_closed()
        .build_with_clock(clock.clone())
        .unwrap();
    let refused = block_on(limit.check("k")).unwrap_err();
    assert_eq!(clock.elapsed(), DEFAULT_BACKEND_TIMEOUT);
    let FleetRefused::Unavailable { by, error } = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(*by, "maps");
    assert!(error.is_timeout());
    assert_eq!(refused.retry_after(), None);
    assert!(refused.to_string().contains("fails closed"), "{refused}");
    let stats = limit.stats();
    assert_eq!(
        (
            stats.asked,
            stats.backend_errors,
            stats.timeouts,
            stats.closed_refusals
        ),
        (1, 1, 1, 1)
    );
}

#[test]
fn a_slow_answer_within_the_timeout_is_taken_and_one_past_it_is_not() {
    let clock = VirtualClock::manual();
    let backend = Scripted::new(
        &clock,
        [
            Next::Slow(Duration::from_millis(19), Decision::Admit),
            Next::Slow(Duration::from_millis(21), Decision::Admit),
        ],
    );
    let limit = FleetRateLimit::builder(backend)
        .quota(per_second(10))
        .fail_open(per_second(1))
        .build_with_clock(clock.clone())
        .unwrap();
    assert!(run(&clock, limit.check("k")).is_ok());
    assert_eq!(limit.stats().admitted, 1);
    assert_eq!(clock.elapsed(), Duration::from_millis(19));
    // Past the timeout: served by the local limit instead.
    assert!(run(&clock, limit.check("k")).is_ok());
    let stats = limit.stats();
    assert_eq!((stats.timeouts, stats.local_admitted), (1, 1));
    assert_eq!(clock.elapsed(), Duration::from_millis(39));
}

#[test]
fn failing_open_admits_under_the_local_limit_and_the_backend_is_used_again_when_it_answers() {
    let clock = VirtualClock::manual();
    let admit = || Next::Answer(Decision::Admit);
    let backend = Scripted::new(
        &clock,
        [Next::Fail, Next::Fail, Next::Fail, admit(), admit()],
    );
    let limit = FleetRateLimit::builder(backend)
        .quota(per_second(100))
        .fail_open(per_second(2))
        .build_with_clock(clock.clone())
        .unwrap();
    assert!(block_on(limit.check("k")).is_ok());
    assert!(block_on(limit.check("k")).is_ok());
    let refused = block_on(limit.check("k")).unwrap_err();
    assert_eq!(refused.retry_after(), Some(Duration::from_millis(500)));
    // Back: every call asks the backend again.
    assert!(block_on(limit.check("k")).is_ok());
    assert!(block_on(limit.check("k")).is_ok());
    let stats = limit.stats();
    assert_eq!(
        (
            stats.asked,
            stats.backend_errors,
            stats.local_admitted,
            stats.local_refused,
            stats.admitted
        ),
        (5, 3, 2, 1, 2)
    );
}

#[test]
fn a_hot_key_over_its_quota_is_refused_from_the_cache_until_its_time() {
    let clock = VirtualClock::manual();
    let quota = per_second(10).with_burst(1).unwrap();
    let limit = FleetRateLimit::builder(Gcra::new(&clock, &[quota]))
        .quota(quota)
        .fail_closed()
        .build_with_clock(clock.clone())
        .unwrap();
    assert!(block_on(limit.check("hot")).is_ok());
    let first = block_on(limit.check("hot")).unwrap_err();
    assert_eq!(first.retry_after(), Some(Duration::from_millis(100)));
    for _ in 0..1_000 {
        clock.advance(Duration::from_micros(50));
        let again = block_on(limit.check("hot")).unwrap_err();
        assert_eq!(
            again.retry_after(),
            Some(Duration::from_millis(100) - clock.elapsed())
        );
    }
    // 1,002 checks, 2 of them asked of the backend.
    assert_eq!(limit.backend().asked.load(Ordering::Relaxed), 2);
    assert_eq!(limit.stats().cached_refusals, 1_000);
    // Another key is not refused by the hot one's entry.
    assert!(block_on(limit.check("cold")).is_ok());
    clock.advance(Duration::from_millis(50));
    assert!(block_on(limit.check("hot")).is_ok());
    assert_eq!(limit.backend().asked.load(Ordering::Relaxed), 4);
}

#[test]
fn a_dearer_call_is_refused_from_the_cache_with_its_longer_wait() {
    // #40's repro: 2 a second; two admitted, the third refused for 500 ms;
    // 100 ms later a call of cost 2 is refused for 900 ms, without asking.
    let clock = VirtualClock::manual();
    let quota = per_second(2);
    let limit = FleetRateLimit::builder(Gcra::new(&clock, &[quota]))
        .quota(quota)
        .fail_closed()
        .build_with_clock(clock.clone())
        .unwrap();
    assert!(block_on(limit.check("k")).is_ok());
    assert!(block_on(limit.check("k")).is_ok());
    let third = block_on(limit.check("k")).unwrap_err();
    assert_eq!(third.retry_after(), Some(Duration::from_millis(500)));
    clock.advance(Duration::from_millis(100));
    let dearer = block_on(limit.check_n("k", 2)).unwrap_err();
    assert_eq!(dearer.retry_after(), Some(Duration::from_millis(900)));
    assert_eq!(limit.backend().asked.load(Ordering::Relaxed), 3);
    assert_eq!(limit.stats().cached_refusals, 1);
    // The backend agrees: asked directly, it says the same.
    let direct = block_on(limit.backend().check(QuotaCheck {
        limit: "check",
        key: "k",
        quotas: &[quota],
        cost: 2,
    }));
    assert_eq!(
        direct.unwrap(),
        Decision::Refuse {
            retry_after: Some(Duration::from_millis(900))
        }
    );
    // Under two quotas a dearer call is asked.
    let quotas = [per_second(2), Quota::per_minute(100).unwrap()];
    let two = FleetRateLimit::builder(Gcra::new(&clock, &quotas))
        .quota(quotas[0])
        .quota(quotas[1])
        .fail_closed()
        .build_with_clock(clock.clone())
        .unwrap();
    assert!(block_on(two.check("k")).is_ok());
    assert!(block_on(two.check("k")).is_ok());
    assert!(block_on(two.check("k")).is_err());
    assert!(block_on(two.check_n("k", 2)).is_err());
    assert_eq!(two.backend().asked.load(Ordering::Relaxed), 4);
}

#[test]
fn a_wait_longer_than_any_quota_can_ask_is_a_backend_error_not_a_refusal() {
    let clock = VirtualClock::new();
    let year = Duration::from_secs(365 * 24 * 3600);
    let backend = Scripted::new(
        &clock,
        [Next::Answer(Decision::Refuse {
            retry_after: Some(year),
        })],
    );
    let limit = FleetRateLimit::builder(backend)
        .quota(per_second(10))
        .fail_closed()
        .build_with_clock(clock)
        .unwrap();
    let refused = block_on(limit.check("k")).unwrap_err();
    let FleetRefused::Unavailable { error, .. } = refused else {
        panic!("{refused:?}");
    };
    assert!(error.to_string().contains("longer than any"), "{error}");
    assert_eq!(limit.stats().cached_keys, 0);
}

#[test]
fn a_cost_of_zero_is_admitted_and_one_above_the_burst_refused_without_asking() {
    let clock = VirtualClock::new();
    let limit = FleetRateLimit::builder(Scripted::new(&clock, []))
        .quota(per_second(10))
        .fail_closed()
        .build_with_clock(clock)
        .unwrap();
    assert!(block_on(limit.check_n("k", 0)).is_ok());
    let refused = block_on(limit.check_n("k", 11)).unwrap_err();
    assert!(matches!(
        refused,
        FleetRefused::Quota(RateRefused {
            retry_after: None,
            ..
        })
    ));
    assert_eq!(limit.stats().asked, 0);
}

proptest! {
    /// The fleet limit (cache included) over an honest backend answers
    /// exactly as one keyed limit in the same process: the cache only ever
    /// refuses what the backend would, with the same wait.
    #[test]
    fn over_an_honest_backend_the_fleet_answers_as_a_local_limit(
        count in 1_u32..20,
        burst in 1_u32..6,
        calls in proptest::collection::vec((0_u64..200_000_000, 0_usize..3, 1_u32..4), 1..150),
    ) {
        let quota = Quota::per_second(count).unwrap().with_burst(burst).unwrap();
        let fleet_clock = VirtualClock::manual();
        let local_clock = VirtualClock::manual();
        let fleet = FleetRateLimit::builder(Gcra::new(&fleet_clock, &[quota]))
            .quota(quota)
            .fail_closed()
            .build_with_clock(fleet_clock.clone())
            .unwrap();
        let local = KeyedRateLimit::builder().quota(quota).build_with_clock(local_clock.clone()).unwrap();
        for (gap, key, cost) in calls {
            fleet_clock.advance(Duration::from_nanos(gap));
            local_clock.advance(Duration::from_nanos(gap));
            let key = ["a", "b", "c"][key];
            let by_fleet = block_on(fleet.check_n(key, cost)).map_err(|r| r.retry_after());
            let by_local = local.check_n(key, cost).map_err(|r| r.retry_after);
            prop_assert_eq!(by_fleet, by_local);
        }
    }
}
