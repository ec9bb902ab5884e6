//! The budget's unit and property tests.

#![allow(clippy::float_cmp)] // the compared values are exact by construction

use super::*;
use crate::clock::{InstantsOnly, VirtualClock};
use proptest::prelude::*;

fn budget(percent: f64, min_per_sec: u32, clock: &VirtualClock) -> RetryBudget<VirtualClock> {
    RetryBudget::builder()
        .percent(percent)
        .min_per_sec(min_per_sec)
        .ttl(Duration::from_secs(10))
        .build_with_clock(clock.clone())
        .expect("valid settings")
}

/// Deposits `calls` calls and counts how many retries are then granted.
fn granted(percent: f64, calls: u32) -> usize {
    let clock = VirtualClock::new();
    let b = budget(percent, 0, &clock);
    for _ in 0..calls {
        b.admit().expect("a budget admits every call");
    }
    (0..calls * 20).filter(|_| b.allow_retry().is_ok()).count()
}

#[test]
fn percentages_are_exact() {
    assert_eq!(granted(10.0, 100), 10);
    assert_eq!(granted(10.0, 99), 9);
    assert_eq!(granted(20.0, 100), 20);
    assert_eq!(granted(20.0, 4), 0);
    assert_eq!(granted(0.5, 1000), 5);
    assert_eq!(granted(0.5, 199), 0);
    assert_eq!(granted(0.5, 200), 1);
    // tower #857: 60 % grants 6 per 10 calls, not 10.
    assert_eq!(granted(60.0, 10), 6);
    assert_eq!(granted(100.0, 7), 7);
    assert_eq!(granted(250.0, 2), 5);
    assert_eq!(granted(0.0, 1000), 0);
}

#[test]
fn minimum_per_second_is_a_reserve_over_the_ttl() {
    let clock = VirtualClock::new();
    let b = budget(0.0, 3, &clock);
    assert_eq!((0..100).filter(|_| b.allow_retry().is_ok()).count(), 30);
    assert!(b.snapshot().refusing);
    // The withdrawals expire after the ttl, and the reserve is whole again.
    clock.sleep_blocking(Duration::from_secs(10));
    assert_eq!(b.snapshot().retries, 0);
    assert_eq!((0..100).filter(|_| b.allow_retry().is_ok()).count(), 30);
}

#[test]
fn deposits_slide_out_in_tenths_of_the_ttl() {
    let clock = VirtualClock::new();
    let b = budget(10.0, 0, &clock);
    for _ in 0..10 {
        b.admit().unwrap();
    }
    clock.sleep_blocking(Duration::from_secs(5));
    for _ in 0..10 {
        b.admit().unwrap();
    }
    assert_eq!(b.snapshot().available, 2.0);
    clock.sleep_blocking(Duration::from_secs(5)); // the first 10 expire
    assert_eq!(b.snapshot().requests, 10);
    assert_eq!(b.snapshot().available, 1.0);
    assert!(b.allow_retry().is_ok());
    assert!(b.allow_retry().is_err());
    assert_eq!(b.snapshot().refusals, 1);
}

#[test]
fn refunds_give_back_deposits_and_withdrawals() {
    let clock = VirtualClock::new();
    let b = budget(50.0, 0, &clock);
    b.admit().unwrap();
    b.admit().unwrap();
    b.allow_retry().unwrap();
    assert!(b.allow_retry().is_err());
    b.refund(Grant::Retry);
    assert!(b.allow_retry().is_ok());
    b.refund(Grant::Admit);
    assert_eq!(b.snapshot().requests, 1);
    assert!(b.snapshot().available < 0.0);
}

#[test]
fn validation() {
    let field = |b: RetryBudgetBuilder| b.build().unwrap_err().field();
    let b = RetryBudget::builder();
    assert_eq!(field(b.ttl(Duration::from_millis(999))), "ttl");
    assert_eq!(field(b.ttl(Duration::from_secs(61))), "ttl");
    for p in [f64::NAN, f64::INFINITY, -1.0, 1000.5, 0.0004] {
        assert_eq!(field(b.percent(p)), "percent", "{p}");
    }
    assert!(b.percent(0.0).build().is_ok());
    assert!(
        b.percent(1000.0)
            .ttl(Duration::from_secs(60))
            .build()
            .is_ok()
    );
    assert!(b.min_per_sec(u32::MAX).build().is_ok());
}

proptest! {
    /// Over any sequence of calls, retries, refunds and clock steps, the
    /// granted retries within the window never exceed what the rule
    /// allows, and every decision is the rule's (the cached past slots
    /// never lag behind a refund or a turn of the slot).
    #[test]
    fn never_grants_more_than_the_rule(
        percent_tenths in 0u32..3000,
        min_per_sec in 0u32..4,
        steps in proptest::collection::vec((0u8..6, 0u64..1500), 1..200),
    ) {
        let clock = VirtualClock::new();
        let percent = f64::from(percent_tenths) / 10.0;
        let b = budget(percent, min_per_sec, &clock);
        // The sequential model: (time, is_retry) of every counted event.
        let mut events: Vec<(Duration, bool)> = Vec::new();
        let slot = Duration::from_secs(1);
        for (kind, millis) in steps {
            let live = |events: &Vec<(Duration, bool)>, retry: bool| {
                let epoch = clock.elapsed().as_nanos() / slot.as_nanos();
                events
                    .iter()
                    .filter(|(t, r)| *r == retry && epoch - t.as_nanos() / slot.as_nanos() < 10)
                    .count() as i128
            };
            let now = clock.elapsed();
            match kind {
                0 => {
                    b.admit().unwrap();
                    events.push((now, false));
                }
                1 => {
                    let balance = i128::from(min_per_sec) * 10 * WITHDRAWAL
                        + i128::from(percent_tenths) * 100 * live(&events, false)
                        - WITHDRAWAL * (live(&events, true) + 1);
                    let ok = b.allow_retry().is_ok();
                    prop_assert_eq!(ok, balance >= 0);
                    if ok {
                        events.push((now, true));
                    }
                }
                // (2 and 5 sleep: 2 kept its meaning for the saved
                // regression seeds.)
                3 | 4 => {
                    // A refund takes back the latest event of its kind
                    // still in the window, if any.
                    let retry = kind == 4;
                    b.refund(if retry { Grant::Retry } else { Grant::Admit });
                    let epoch = now.as_nanos() / slot.as_nanos();
                    if let Some(i) = events.iter().rposition(|(t, r)| {
                        *r == retry && epoch - t.as_nanos() / slot.as_nanos() < 10
                    }) {
                        events.remove(i);
                    }
                }
                _ => clock.sleep_blocking(Duration::from_millis(millis)),
            }
            let snap = b.snapshot();
            prop_assert_eq!(snap.requests as i128, live(&events, false));
            prop_assert_eq!(snap.retries as i128, live(&events, true));
            let balance = i128::from(min_per_sec) * 10 * WITHDRAWAL
                + i128::from(percent_tenths) * 100 * live(&events, false)
                - WITHDRAWAL * live(&events, true);
            prop_assert_eq!(snap.available, balance as f64 / WITHDRAWAL as f64);
        }
    }

    /// A clock without [`Clock::ticks`] (time from `Instant`s) gives the
    /// same decisions as the same time line read through its ticks.
    #[test]
    fn instant_time_and_ticks_agree(
        steps in proptest::collection::vec((0u8..4, 0u64..1500), 1..200),
    ) {
        let clock = VirtualClock::new();
        let ticks = budget(10.0, 1, &clock);
        let instants = RetryBudget::builder()
            .percent(10.0)
            .min_per_sec(1)
            .ttl(Duration::from_secs(10))
            .build_with_clock(InstantsOnly(clock.clone()))
            .unwrap();
        for (kind, millis) in steps {
            match kind {
                0 => {
                    ticks.admit().unwrap();
                    instants.admit().unwrap();
                }
                1 => prop_assert_eq!(
                    ticks.allow_retry().is_ok(),
                    instants.allow_retry().is_ok()
                ),
                2 => {
                    ticks.refund(Grant::Retry);
                    instants.refund(Grant::Retry);
                }
                _ => clock.sleep_blocking(Duration::from_millis(millis)),
            }
            let (a, b) = (ticks.snapshot(), instants.snapshot());
            prop_assert_eq!((a.requests, a.retries), (b.requests, b.retries));
        }
    }
}
