//! Exponential backoff, through [`Backoff`].

use std::time::Duration;

use crate::backoff::jitter::Jitter;
use crate::backoff::schedule::{Schedule, ScheduleState};
use crate::backoff::value::Backoff;
use crate::rng::Rng;

#[test]
fn incremental_matches_closed_form() {
    let b = Backoff::exponential()
        .multiplier(1.7)
        .jitter(Jitter::None)
        .max_delay(Duration::from_secs(3600))
        .build()
        .unwrap();
    let mut rng = Rng::with_seed(0);
    let mut s = ScheduleState::new();
    for step in 0..40 {
        let inc = b.next_delay(&mut s, &mut rng).unwrap();
        let closed = b.delay_at(step, &mut rng);
        let diff = inc.abs_diff(closed);
        assert!(
            diff <= Duration::from_micros(1),
            "step {step}: {inc:?} vs {closed:?}"
        );
    }
}

#[test]
fn huge_multiplier_saturates_at_cap() {
    let b = Backoff::exponential()
        .multiplier(1e300)
        .max_delay(Duration::MAX)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let d: Vec<_> = b.delays().take(5).collect();
    assert_eq!(d[0], Duration::from_millis(100));
    assert!(d[2..].iter().all(|x| *x == Duration::from_nanos(u64::MAX)));
}

#[test]
fn whole_multipliers_are_exact_and_match_the_float_curve() {
    // A whole multiplier takes the integer curve; 2.000001 the float one.
    // Below 2^53 ns both are exact, so they agree to the nanosecond
    // before jitter (the float one may be below by the rounding of the
    // near-2 multiplier, which we bound).
    for (initial, max) in [(100_000_000u64, 10_000_000_000u64), (7, u64::MAX >> 11)] {
        let int = Backoff::exponential()
            .initial(Duration::from_nanos(initial))
            .max_delay(Duration::from_nanos(max))
            .jitter(Jitter::None)
            .build()
            .unwrap();
        let mut s = ScheduleState::new();
        let mut rng = Rng::with_seed(0);
        for step in 0..80u32 {
            let want = u128::from(initial)
                .saturating_mul(1u128.checked_shl(step).unwrap_or(u128::MAX))
                .min(u128::from(max));
            let got = int.next_delay(&mut s, &mut rng).unwrap();
            assert_eq!(got.as_nanos(), want, "step {step}");
            assert_eq!(
                int.delay_at(step, &mut rng),
                got,
                "closed form, step {step}"
            );
        }
    }
    let float = Backoff::exponential()
        .multiplier(3.5)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let ms: Vec<u128> = float.delays().take(5).map(|d| d.as_millis()).collect();
    assert_eq!(ms, [100, 350, 1225, 4287, 10_000]);
}

#[test]
fn whole_multiplier_saturates_for_any_step() {
    let b = Backoff::exponential()
        .multiplier(3.0)
        .max_delay(Duration::MAX)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    let max = Duration::from_nanos(u64::MAX);
    assert_eq!(b.delay_at(u32::MAX, &mut Rng::with_seed(0)), max);
    let d: Vec<_> = b.delays().take(60).collect();
    assert_eq!(d[1], Duration::from_millis(300));
    assert!(d[40..].iter().all(|x| *x == max));
    let mut s = ScheduleState::at_step(u32::MAX - 1);
    assert_eq!(b.next_delay(&mut s, &mut Rng::with_seed(0)), Some(max));
    assert_eq!(b.next_delay(&mut s, &mut Rng::with_seed(0)), Some(max));
}

#[test]
fn the_default_shape_takes_the_same_path_as_any_other() {
    // The default shape has a straight path in `next_delay`; a total
    // limit no call can reach turns it off without changing a delay.
    for multiplier in [1.0, 2.0, 3.0] {
        let plain = Backoff::exponential()
            .multiplier(multiplier)
            .max_attempts(40)
            .build()
            .unwrap();
        let general = Backoff::exponential()
            .multiplier(multiplier)
            .max_attempts(40)
            .max_total_delay(Duration::MAX)
            .build()
            .unwrap();
        assert!(plain.plain.is_some() && general.plain.is_none());
        for seed in 0..50 {
            let (mut a, mut b) = (ScheduleState::new(), ScheduleState::new());
            let (mut ra, mut rb) = (Rng::with_seed(seed), Rng::with_seed(seed));
            for _ in 0..40 {
                let d = plain.next_delay(&mut a, &mut ra);
                assert_eq!(d, general.next_delay(&mut b, &mut rb));
                assert_eq!(a, b);
            }
            // Far along the curve (retries within the limit): the closed form.
            let mut s = ScheduleState::new();
            s.step = u32::MAX - 1;
            let mut r = Rng::with_seed(seed);
            let d = plain.next_delay(&mut s, &mut r).unwrap();
            assert!(d < Duration::from_secs(10));
            assert_eq!(s.step, u32::MAX);
        }
    }
}

#[test]
fn zero_initial_stays_zero() {
    let b = Backoff::exponential()
        .initial(Duration::ZERO)
        .jitter(Jitter::None)
        .build()
        .unwrap();
    assert_eq!(b.delay_at(u32::MAX, &mut Rng::with_seed(0)), Duration::ZERO);
    assert!(b.delays().take(100).all(|d| d.is_zero()));
}
