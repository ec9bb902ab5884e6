//! The breaker's failure-ratio threshold through its public API, against
//! exact rational arithmetic: it opens when failures / calls >= the ratio
//! as written, at every boundary, with either kind of window; and a count
//! window too small for `min_calls` is refused, never silently inert.

use std::time::Duration;

use proptest::prelude::*;
use steadfast::RetryControl;
use steadfast::clock::VirtualClock;
use steadfast::control::{BreakerState, CircuitBreaker, Outcome, WindowKind};

/// Records `calls - failures` successes, then `failures` failures, into a
/// breaker that may open once it holds all `calls`; says whether it opened.
fn opens(ratio: f64, calls: u32, failures: u32, window: WindowKind) -> bool {
    let breaker = CircuitBreaker::builder()
        .failure_ratio(ratio)
        .window(window)
        .min_calls(calls)
        .break_duration(Duration::from_secs(5))
        .build_with_clock(VirtualClock::manual())
        .expect("valid settings");
    for n in 0..calls {
        let failed = n >= calls - failures;
        breaker.record(if failed {
            Outcome::RetryableFailure
        } else {
            Outcome::Success
        });
    }
    breaker.state() == BreakerState::Open
}

fn count_window(calls: u32) -> WindowKind {
    WindowKind::Count(calls.div_ceil(10) * 10)
}

const TIME_WINDOW: WindowKind = WindowKind::Time(Duration::from_secs(60));

#[test]
fn two_thirds_opens_at_exactly_two_thirds_in_either_window() {
    for window in [count_window(30), TIME_WINDOW] {
        assert!(opens(2.0 / 3.0, 30, 20, window), "{window:?}");
        assert!(!opens(2.0 / 3.0, 30, 19, window), "{window:?}");
    }
}

#[test]
fn below_one_seventh_stays_closed_over_a_million_calls() {
    // 142,858 / 1,000,007 = 0.1428570..., below 1/7 = 0.1428571...
    assert!(!opens(1.0 / 7.0, 1_000_007, 142_858, TIME_WINDOW));
    assert!(opens(1.0 / 7.0, 1_000_007, 142_859, TIME_WINDOW));
}

#[test]
fn a_count_window_smaller_than_min_calls_is_refused_naming_both() {
    let err = CircuitBreaker::builder()
        .window(WindowKind::Count(20))
        .min_calls(100)
        .build()
        .expect_err("a breaker that could never open");
    assert_eq!(err.field(), "min_calls");
    let text = err.to_string();
    assert!(text.contains("100") && text.contains("20"), "{text}");
    // Left at its default, the minimum is the window's size: it can open.
    let breaker = CircuitBreaker::builder()
        .window(WindowKind::Count(20))
        .build_with_clock(VirtualClock::manual())
        .expect("the default minimum fits the window");
    for _ in 0..20 {
        breaker.record(Outcome::RetryableFailure);
    }
    assert_eq!(breaker.state(), BreakerState::Open);
}

proptest! {
    /// Any ratio written as p / q, any count: open exactly when
    /// failures * q >= p * calls.
    #[test]
    fn the_threshold_is_the_written_fraction_exactly(
        q in 1u32..1_000,
        p_frac in 0.0f64..=1.0,
        calls in 1u32..300,
        f_frac in 0.0f64..=1.0,
        by_count in any::<bool>(),
    ) {
        let p = ((p_frac * f64::from(q)) as u32).clamp(1, q);
        let failures = ((f_frac * f64::from(calls)) as u32).min(calls);
        let window = if by_count { count_window(calls) } else { TIME_WINDOW };
        let exact = u64::from(failures) * u64::from(q) >= u64::from(p) * u64::from(calls);
        prop_assert_eq!(opens(f64::from(p) / f64::from(q), calls, failures, window), exact);
    }
}
