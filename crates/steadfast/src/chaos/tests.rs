//! Chaos on virtual time with seeds: rates within statistical bounds over
//! 100,000 draws, A33's compounding, off means off, the ceiling, faults
//! asked by a request, and each executor.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::*;
use crate::call::Attempt;
use crate::clock::{Clock, VirtualClock};

const N: u64 = 100_000;
const MS: Duration = Duration::from_millis(1);

/// Whether `count` hits out of `N` draws are within 5 standard deviations
/// of a binomial with probability `p` (a false alarm once in ~3.5 million
/// runs; the draws are seeded, so a run's outcome never changes).
fn within_bounds(count: u64, p: f64) -> bool {
    #[allow(clippy::cast_precision_loss)]
    let (n, c) = (N as f64, count as f64);
    let sd = (n * p * (1.0 - p)).sqrt();
    (c - n * p).abs() <= 5.0 * sd + 1.0
}

fn on<T, E>(b: ChaosBuilder<T, E>) -> Chaos<T, E> {
    b.enabled(true).build().unwrap()
}

#[test]
fn each_rate_holds_over_100_000_draws() {
    for (seed, latency, error, outcome) in [
        (1, 0.3, 0.1, 0.2),
        (2, 0.01, 0.5, 0.99),
        (3, 0.75, 0.0, 1.0),
    ] {
        let chaos: Chaos<u16, &str> = on(Chaos::builder()
            .seed(seed)
            .latency(latency, 10 * MS)
            .error(error, || "injected")
            .outcome(outcome, || 503));
        let (mut l, mut e, mut o) = (0, 0, 0);
        for _ in 0..N {
            if let Some(i) = chaos.draw() {
                l += u64::from(i.delay.is_some());
                match i.fault {
                    Some(FaultKind::Error) => e += 1,
                    Some(FaultKind::Outcome) => o += 1,
                    None => {}
                }
            }
        }
        assert!(
            within_bounds(l, latency),
            "seed {seed}: {l} latencies at {latency}"
        );
        assert!(
            within_bounds(e, error),
            "seed {seed}: {e} errors at {error}"
        );
        // An outcome is substituted when it is drawn and the error is not.
        assert!(
            within_bounds(o, outcome * (1.0 - error)),
            "seed {seed}: {o} outcomes"
        );
        let stats = chaos.stats();
        assert_eq!(
            (stats.drawn, stats.latencies, stats.errors, stats.outcomes),
            (N, l, e, o)
        );
        assert_eq!(stats.active, 0, "every injection was dropped");
    }
}

#[test]
fn faults_compound_as_a33_says_each_rolling_its_own_number() {
    // A33: with a 50 % delay and a 50 % abort, a quarter of the calls get
    // both, a quarter only the delay, a quarter only the abort.
    let chaos: Chaos<(), &str> = on(Chaos::builder()
        .seed(11)
        .latency(0.5, MS)
        .error(0.5, || "abort"));
    let mut both = [0u64; 4];
    for _ in 0..N {
        let (d, a) = chaos
            .draw()
            .map_or((false, false), |i| (i.delay.is_some(), i.fault.is_some()));
        both[usize::from(d) * 2 + usize::from(a)] += 1;
    }
    for (i, count) in both.iter().enumerate() {
        assert!(within_bounds(*count, 0.25), "cell {i}: {count}");
    }
}

#[test]
fn jitter_is_uniform_over_its_range() {
    let chaos: Chaos = on(Chaos::builder()
        .seed(5)
        .latency(1.0, 100 * MS)
        .jitter(20 * MS));
    let (mut below_half, mut min, mut max) = (0u64, Duration::MAX, Duration::ZERO);
    for _ in 0..N {
        let d = chaos.draw().and_then(|i| i.delay).unwrap();
        min = min.min(d);
        max = max.max(d);
        below_half += u64::from(d < 110 * MS);
    }
    assert!(min >= 100 * MS && max < 120 * MS, "{min:?}..{max:?}");
    assert!(
        min < 100 * MS + Duration::from_micros(50) && max > 120 * MS - Duration::from_micros(50)
    );
    assert!(within_bounds(below_half, 0.5), "{below_half}");
}

#[test]
fn rates_of_zero_and_one_are_exact() {
    let chaos: Chaos<(), &str> = on(Chaos::builder()
        .seed(9)
        .latency(1.0, MS)
        .error(0.0, || "never"));
    for _ in 0..N {
        let i = chaos.draw().unwrap();
        assert_eq!((i.delay, i.fault), (Some(MS), None));
    }
}

#[test]
fn off_means_off_and_the_switch_turns_it_on_and_off() {
    let chaos: Chaos<(), &str> = Chaos::builder()
        .seed(1)
        .latency(1.0, MS)
        .error(1.0, || "e")
        .build()
        .unwrap();
    for _ in 0..1000 {
        assert!(chaos.draw().is_none());
        assert!(
            chaos
                .draw_asked(&Asked {
                    abort: Some(None),
                    ..Asked::nothing()
                })
                .is_none()
        );
    }
    assert_eq!(chaos.stats().drawn, 0, "nothing is even drawn while off");
    let switch = chaos.clone().switch();
    switch.turn_on();
    assert!(chaos.draw().is_some());
    switch.turn_off();
    assert!(chaos.draw().is_none());
    assert!(!switch.is_on());
}

#[test]
fn a_seed_gives_the_same_faults_to_the_same_calls() {
    let make = |seed| -> Chaos<(), &str> {
        on(Chaos::builder()
            .seed(seed)
            .latency(0.3, 10 * MS)
            .jitter(5 * MS)
            .error(0.3, || "e"))
    };
    let plan = |c: &Chaos<(), &str>| {
        (0..1000)
            .map(|_| c.draw().map(|i| (i.delay, i.fault)))
            .collect::<Vec<_>>()
    };
    assert_eq!(plan(&make(42)), plan(&make(42)));
    assert_ne!(plan(&make(42)), plan(&make(43)));
}

#[test]
fn the_ceiling_caps_the_faults_active_at_once() {
    let chaos: Chaos<(), &str> = on(Chaos::builder().seed(1).latency(1.0, MS).max_active(2));
    let a = chaos.draw().unwrap();
    let b = chaos.draw().unwrap();
    assert!(chaos.draw().is_none(), "two faults are active");
    assert_eq!(chaos.stats().at_ceiling, 1);
    drop(a);
    let c = chaos.draw().expect("a slot was given back");
    assert_eq!(chaos.stats().active, 2);
    drop((b, c));
    assert_eq!(chaos.stats().active, 0);
}

#[test]
fn asked_faults_are_capped_by_the_configured_rates() {
    let chaos: Chaos<u16, ()> = on(Chaos::builder()
        .seed(3)
        .latency(0.2, MS)
        .outcome(0.5, || 503));
    let asked = Asked {
        delay: Some((Duration::from_secs(1), Some(InjectionRate::ALWAYS))),
        abort: Some(Some(InjectionRate::new(0.1).unwrap())),
    };
    let (mut delays, mut aborts) = (0, 0);
    for _ in 0..N {
        if let Some(i) = chaos.draw_asked(&asked) {
            if let Some(d) = i.delay {
                assert_eq!(d, Duration::from_secs(1), "the asked delay, with no jitter");
                delays += 1;
            }
            aborts += u64::from(i.fault == Some(FaultKind::Outcome));
        }
    }
    assert!(
        within_bounds(delays, 0.2),
        "asked 100 %, capped at 20 %: {delays}"
    );
    assert!(
        within_bounds(aborts, 0.1),
        "asked 10 % under a 50 % cap: {aborts}"
    );
    // A fault not configured cannot be asked for.
    let no_latency: Chaos<u16, ()> = on(Chaos::builder().seed(3).outcome(1.0, || 503));
    let only_delay = Asked {
        delay: Some((MS, None)),
        ..Asked::nothing()
    };
    assert!((0..1000).all(|_| no_latency.draw_asked(&only_delay).is_none()));
}

#[test]
fn bad_settings_are_refused() {
    assert!(Chaos::builder::<(), ()>().latency(1.5, MS).build().is_err());
    assert!(
        Chaos::builder::<(), ()>()
            .latency(-0.1, MS)
            .build()
            .is_err()
    );
    assert!(
        Chaos::builder::<(), ()>()
            .error(f64::NAN, || ())
            .build()
            .is_err()
    );
    assert!(Chaos::builder::<(), ()>().jitter(MS).build().is_err());
    assert!(Chaos::builder::<(), ()>().max_active(0).build().is_err());
    assert!(InjectionRate::fraction(1, 0).is_err());
    assert_eq!(
        InjectionRate::fraction(200, 100).unwrap(),
        InjectionRate::ALWAYS
    );
}

#[tokio::test(start_paused = true)]
async fn inject_sleeps_the_latency_on_the_clock_then_calls() {
    let clock = VirtualClock::new();
    let chaos: Chaos<u32, &str> = on(Chaos::builder().seed(1).latency(1.0, 250 * MS));
    let made = Arc::new(AtomicU32::new(0));
    let m = made.clone();
    let start = clock.now();
    let out = chaos
        .inject(&clock, move || {
            m.fetch_add(1, Ordering::Relaxed);
            async { Ok(7) }
        })
        .await;
    assert_eq!(out, Ok(7));
    assert_eq!(clock.now() - start, 250 * MS);
    assert_eq!(made.load(Ordering::Relaxed), 1);
    assert_eq!(chaos.stats().active, 0);
}

#[tokio::test(start_paused = true)]
async fn an_injected_fault_never_makes_the_call() {
    let clock = VirtualClock::new();
    let chaos: Chaos<u16, &str> = on(Chaos::builder().seed(1).outcome(1.0, || 503));
    let out = chaos
        .inject(&clock, || -> std::future::Ready<Result<u16, &str>> {
            panic!("the call was made")
        })
        .await;
    assert_eq!(out, Ok(503));
}

#[tokio::test(start_paused = true)]
async fn dropping_a_call_in_its_latency_gives_the_slot_back() {
    let clock = VirtualClock::new();
    let chaos: Chaos<u32, &str> = on(Chaos::builder()
        .seed(1)
        .latency(1.0, Duration::from_secs(60))
        .max_active(1));
    let fut = chaos.inject(&clock, || async { Ok(1) });
    assert_eq!(chaos.stats().active, 1);
    drop(fut);
    assert_eq!(chaos.stats().active, 0);
}

#[test]
fn the_blocking_executor_retries_through_injected_errors() {
    use crate::backoff::Backoff;
    use crate::policy::RetryPolicy;
    use crate::retry::BlockingRetryable;
    let clock = VirtualClock::new();
    let chaos: Chaos<u32, &str> = on(Chaos::builder()
        .seed(8)
        .latency(0.5, 100 * MS)
        .error(0.6, || "injected"));
    let policy = RetryPolicy::builder()
        .backoff(Backoff::constant(10 * MS).build().unwrap())
        .max_attempts(30)
        .build()
        .unwrap();
    let start = clock.now();
    let report = chaos
        .wrap_blocking(|a: Attempt| Ok(a.number), clock.clone())
        .retry_blocking(&policy)
        .clock(clock.clone())
        .report()
        .call();
    let stats = chaos.stats();
    assert_eq!(report.result, Ok(report.attempts));
    assert_eq!(stats.errors, u64::from(report.attempts) - 1);
    let latencies = u32::try_from(stats.latencies).unwrap();
    assert_eq!(
        clock.now() - start,
        report.waited + 100 * MS * latencies,
        "latencies on the clock"
    );
}
