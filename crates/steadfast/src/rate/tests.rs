//! The rate limits on virtual time: combined quotas, reservations, keys,
//! and the shared limit against the pure algorithm.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use proptest::prelude::*;

use super::gcra::Step;
use super::*;
use crate::clock::{Clock, VirtualClock};

const MS: Duration = Duration::from_millis(1);

fn limit(clock: &VirtualClock, quotas: &[Quota]) -> RateLimit {
    quotas
        .iter()
        .fold(RateLimit::builder().name("test"), |b, q| b.quota(*q))
        .build_with_clock(clock.clone())
        .unwrap()
}

#[test]
fn a_refusal_by_one_quota_gives_back_the_others_share() {
    let clock = VirtualClock::manual();
    let l = limit(
        &clock,
        &[
            Quota::per_second(10).unwrap(),
            Quota::per_second(1).unwrap(),
        ],
    );
    l.check().unwrap();
    for _ in 0..5 {
        let refused = l.check().unwrap_err();
        assert_eq!(refused.retry_after, Some(1000 * MS));
    }
    let left: Vec<u64> = l.remaining_by_quota().map(|(_, n)| n).collect();
    assert_eq!(left, [9, 0]);
}

#[test]
fn a_weighted_call_takes_its_cost_and_one_above_the_burst_never_fits() {
    let clock = VirtualClock::manual();
    let l = limit(&clock, &[Quota::per_second(10).unwrap()]);
    l.check_n(7).unwrap();
    assert_eq!(l.remaining(), 3);
    assert_eq!(l.check_n(4).unwrap_err().retry_after, Some(100 * MS));
    let never = l.check_n(11).unwrap_err();
    assert_eq!(never.retry_after, None);
    assert!(never.to_string().contains("above its burst"));
    assert_eq!(l.remaining(), 3, "a refused call takes nothing");
}

#[test]
fn callers_who_wait_are_admitted_in_turn_each_at_its_own_instant() {
    let clock = VirtualClock::manual();
    let l = limit(
        &clock,
        &[Quota::per_second(4).unwrap().with_burst(1).unwrap()],
    );
    let turns: Vec<Reservation> = (0..4)
        .map(|_| l.reserve(1, Duration::from_secs(2)).unwrap())
        .collect();
    let waits: Vec<Duration> = turns.iter().map(Reservation::wait).collect();
    assert_eq!(waits, [Duration::ZERO, 250 * MS, 500 * MS, 750 * MS]);
    // Cancelled while waiting: the last two give their turns back.
    let mut turns = turns.into_iter();
    turns.next().unwrap().admit();
    turns.next().unwrap().admit();
    drop(turns);
    assert_eq!(
        l.reserve(1, Duration::from_secs(2)).unwrap().wait(),
        500 * MS
    );
}

#[test]
fn a_reservation_past_its_bound_books_nothing() {
    let clock = VirtualClock::manual();
    let l = limit(&clock, &[Quota::per_second(1).unwrap()]);
    l.check().unwrap();
    let refused = l.reserve(1, 999 * MS).unwrap_err();
    assert_eq!(refused.retry_after, Some(1000 * MS));
    clock.advance(1000 * MS);
    l.check().unwrap();
}

#[test]
fn racing_threads_never_take_more_than_the_burst() {
    let clock = VirtualClock::manual();
    let l = limit(&clock, &[Quota::per_second(1000).unwrap()]);
    let admitted: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| (0..1000).filter(|_| l.check().is_ok()).count()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(admitted, 1000);
}

#[test]
fn bad_configs_are_errors_that_say_which_field() {
    assert_eq!(Quota::per_second(0).unwrap_err().field(), "count");
    assert_eq!(Quota::per(Duration::ZERO, 1).unwrap_err().field(), "period");
    assert_eq!(
        Quota::per(Duration::from_nanos(5), 10).unwrap_err().field(),
        "count"
    );
    assert_eq!(
        Quota::per_second(1)
            .unwrap()
            .with_burst(0)
            .unwrap_err()
            .field(),
        "burst"
    );
    assert_eq!(
        Quota::per_hour(1)
            .unwrap()
            .with_burst(u32::MAX)
            .unwrap_err()
            .field(),
        "burst"
    );
    assert_eq!(RateLimit::builder().build().unwrap_err().field(), "quota");
    let none = KeyedRateLimit::<u32>::builder().build().unwrap_err();
    assert_eq!(none.field(), "quota");
    let zero = KeyedRateLimit::<u32>::builder()
        .quota(Quota::per_second(1).unwrap())
        .max_keys(0)
        .build()
        .unwrap_err();
    assert_eq!(zero.field(), "max_keys");
}

#[test]
fn keys_are_kept_apart() {
    let clock = VirtualClock::manual();
    let keyed = KeyedRateLimit::<&str>::builder()
        .quota(Quota::per_second(2).unwrap())
        .build_with_clock(clock.clone())
        .unwrap();
    keyed.check(&"a").unwrap();
    keyed.check(&"a").unwrap();
    assert_eq!(keyed.check(&"a").unwrap_err().retry_after, Some(500 * MS));
    keyed.check_n(&"b", 2).unwrap();
    assert_eq!(
        keyed.reserve(&"b", 1, Duration::from_secs(1)).unwrap(),
        500 * MS
    );
}

#[test]
fn the_key_set_stays_within_its_bound() {
    let clock = VirtualClock::manual();
    let keyed = KeyedRateLimit::<u64>::builder()
        .quota(Quota::per_second(1).unwrap())
        .max_keys(64)
        .build_with_clock(clock.clone())
        .unwrap();
    // A flood of distinct keys (a scan, spoofed addresses): bounded.
    for key in 0..100_000 {
        keyed.check(&key).unwrap();
        assert!(keyed.keys() <= 64);
    }
    // Idle again after a second: a key's next call gets its full burst,
    // whether it was dropped or not.
    clock.advance(Duration::from_secs(2));
    keyed.check(&3).unwrap();
}

/// The pure algorithm over several quotas, as the shared limit must answer.
fn model(cells: &[gcra::Cell], tats: &mut [u64], now: u64, cost: u32) -> Result<(), Option<u64>> {
    let mut next = tats.to_vec();
    let mut wait = 0;
    for (i, cell) in cells.iter().enumerate() {
        match cell.step(tats[i], now, cost) {
            Step::Admit(t) => next[i] = t,
            Step::Later { wait: w, .. } => wait = wait.max(w),
            Step::Never => return Err(None),
        }
    }
    if wait > 0 {
        return Err(Some(wait));
    }
    tats.copy_from_slice(&next);
    Ok(())
}

proptest! {
    /// The shared limit, the keyed limit (one key) and the pure algorithm
    /// give the same answers, with the same waits, for the same calls.
    #[test]
    fn the_shared_the_keyed_and_the_pure_limit_agree(
        quotas in proptest::collection::vec((1_u32..50, 1_u64..5_000, 1_u32..10), 1..4),
        calls in proptest::collection::vec((0_u64..400, 1_u32..4), 1..150),
    ) {
        let quotas: Vec<Quota> = quotas
            .iter()
            .map(|&(count, ms, burst)| {
                Quota::per(Duration::from_millis(ms), count).unwrap().with_burst(burst).unwrap()
            })
            .collect();
        let clock = VirtualClock::manual();
        let shared = limit(&clock, &quotas);
        let keyed = quotas
            .iter()
            .fold(KeyedRateLimit::<u8>::builder().name("test"), |b, q| b.quota(*q))
            .build_with_clock(clock.clone())
            .unwrap();
        let cells: Vec<_> = quotas.iter().map(Quota::cell).collect();
        let mut tats = vec![0_u64; cells.len()];
        let mut now = 0_u64;
        for (gap_ms, cost) in calls {
            clock.advance(Duration::from_millis(gap_ms));
            now += gap_ms * 1_000_000;
            let expected = model(&cells, &mut tats, now, cost)
                .map_err(|w| w.map(Duration::from_nanos));
            let got = shared.check_n(cost).map_err(|r| r.retry_after);
            let got_keyed = keyed.check_n(&0, cost).map_err(|r| r.retry_after);
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(&got_keyed, &expected);
        }
    }
}

/// A virtual clock whose ticks, like the coarse system clock's, may trail
/// by `lag`.
#[derive(Debug, Clone)]
struct Lagging(VirtualClock, Duration);

impl Clock for Lagging {
    fn now(&self) -> std::time::Instant {
        self.0.now()
    }
    fn sleep_blocking(&self, duration: Duration) {
        self.0.sleep_blocking(duration);
    }
    fn ticks(&self) -> Option<u64> {
        self.0.ticks()
    }
    fn tick_lag(&self) -> Duration {
        self.1
    }
}

#[test]
fn a_refusals_wait_is_padded_by_how_far_the_clocks_reading_may_trail() {
    let clock = VirtualClock::manual();
    let lag = Duration::from_millis(4);
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    let limit = RateLimit::builder()
        .quota(quota)
        .build_with_clock(Lagging(clock.clone(), lag))
        .unwrap();
    let keyed = KeyedRateLimit::builder()
        .quota(quota)
        .build_with_clock(Lagging(clock.clone(), lag))
        .unwrap();
    limit.check().unwrap();
    keyed.check(&1).unwrap();
    let wait = Some(Duration::from_millis(100) + lag);
    assert_eq!(limit.check().unwrap_err().retry_after, wait);
    assert_eq!(keyed.check(&1).unwrap_err().retry_after, wait);
    // A booked turn is not padded: its holder is not checked again.
    assert_eq!(
        limit.reserve(1, Duration::from_secs(1)).unwrap().wait(),
        Duration::from_millis(100)
    );
}

proptest! {
    /// `next_admission` says what a check would, and changes nothing: a
    /// call it says may go now is admitted; one it says must wait is
    /// refused with that wait; asking twice gives the same answer.
    #[test]
    fn next_admission_predicts_the_check_without_charging(
        steps in proptest::collection::vec((1u32..4, 0u64..400), 1..60),
        keyed in any::<bool>(),
    ) {
        let clock = VirtualClock::manual();
        let quotas = [Quota::per_second(5).unwrap().with_burst(3).unwrap(), Quota::per_second(2).unwrap().with_burst(4).unwrap()];
        let one = limit(&clock, &quotas);
        let by_key = quotas
            .iter()
            .fold(KeyedRateLimit::<String>::builder(), |b, q| b.quota(*q))
            .build_with_clock(clock.clone())
            .unwrap();
        for (cost, gap_ms) in steps {
            clock.advance(Duration::from_millis(gap_ms));
            let (said, again, checked) = if keyed {
                let said = by_key.next_admission("k", cost);
                (said, by_key.next_admission("k", cost), by_key.check_n("k", cost))
            } else {
                let said = one.next_admission(cost);
                (said, one.next_admission(cost), one.check_n(cost))
            };
            prop_assert_eq!(said, again);
            match said {
                Some(wait) if wait.is_zero() => prop_assert!(checked.is_ok()),
                Some(wait) => prop_assert_eq!(checked.unwrap_err().retry_after, Some(wait)),
                None => prop_assert_eq!(checked.unwrap_err().retry_after, None),
            }
        }
    }
}
