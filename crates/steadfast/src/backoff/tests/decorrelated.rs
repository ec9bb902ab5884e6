//! Decorrelated jitter (AWS and Polly V2), through [`Backoff`].

use std::time::Duration;

use crate::backoff::decorrelated::{RP_SCALING, v2_term};
use crate::backoff::jitter::Jitter;
use crate::backoff::schedule::{Schedule, ScheduleState};
use crate::backoff::value::Backoff;
use crate::rng::Rng;

#[test]
fn jitter_is_rejected() {
    for b in [Backoff::decorrelated(), Backoff::decorrelated_v2()] {
        let err = b.jitter(Jitter::Full).build().unwrap_err();
        assert_eq!(err.field(), "jitter");
    }
}

#[test]
fn aws_matches_the_formula_draw_by_draw() {
    // sleep = min(cap, U(base, prev * 3)), prev = base before the first.
    let (base, cap) = (50e6, 2e9);
    let b = Backoff::decorrelated()
        .initial(Duration::from_millis(50))
        .max_delay(Duration::from_secs(2))
        .build()
        .unwrap();
    let mut rng = Rng::with_seed(17);
    let mut draws = rng.clone();
    let mut state = ScheduleState::new();
    let mut prev: f64 = base;
    for _ in 0..40 {
        let u = draws.unit_f64();
        let want = (base + (prev * 3.0 - base) * u).min(cap) as u64;
        let got = b.next_delay(&mut state, &mut rng).unwrap();
        assert_eq!(got, Duration::from_nanos(want));
        prev = want as f64;
    }
}

#[test]
fn polly_v2_matches_the_formula_draw_by_draw() {
    // t = n + U; next = 2^t * tanh(sqrt(4 t)); delay = (next - prev) / 1.4 * m.
    let m = 200e6;
    let b = Backoff::decorrelated_v2()
        .initial(Duration::from_millis(200))
        .max_delay(Duration::from_secs(3600))
        .build()
        .unwrap();
    let mut rng = Rng::with_seed(23);
    let mut draws = rng.clone();
    let mut state = ScheduleState::new();
    let mut prev = 0.0;
    for n in 0..20 {
        let t = f64::from(n) + draws.unit_f64();
        let next = 2f64.powf(t) * (4.0 * t).sqrt().tanh();
        let want = ((next - prev) / 1.4 * m).min(3600e9);
        prev = next;
        let got = b.next_delay(&mut state, &mut rng).unwrap().as_nanos() as f64;
        assert!(
            (got - want).abs() <= want * 1e-12 + 1.0,
            "n={n}: {got} vs {want}"
        );
    }
}

#[test]
fn aws_first_delay_is_uniform_between_base_and_three_base() {
    // Mean of U(100, 300) ms is 200 ms; fixed seeds, 20 000 draws.
    let b = Backoff::decorrelated().build().unwrap();
    let mut sum = 0.0;
    for seed in 0..20_000 {
        let mut s = ScheduleState::new();
        let d = b.next_delay(&mut s, &mut Rng::with_seed(seed)).unwrap();
        assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(300));
        sum += d.as_secs_f64();
    }
    let mean = sum / 20_000.0;
    assert!((mean - 0.2).abs() < 0.004, "{mean}");
}

#[test]
fn v2_median_first_delay_is_near_initial() {
    // Polly's scaling puts the median of the first delay near the
    // configured value (about 0.95 of it); a wrong constant moves it far.
    let b = Backoff::decorrelated_v2()
        .initial(Duration::from_secs(1))
        .max_delay(Duration::from_secs(3600))
        .build()
        .unwrap();
    let mut firsts: Vec<f64> = (0..10_001)
        .map(|seed| {
            let mut s = ScheduleState::new();
            b.next_delay(&mut s, &mut Rng::with_seed(seed))
                .unwrap()
                .as_secs_f64()
        })
        .collect();
    firsts.sort_by(f64::total_cmp);
    let median = firsts[5_000];
    assert!((0.8..1.1).contains(&median), "{median}");
    // Upper bound for the first delay: 2 * tanh(2) / 1.4.
    let bound = 2.0 * 2f64.tanh() / 1.4;
    assert!(firsts[10_000] <= bound + 1e-9, "{}", firsts[10_000]);
}

#[test]
fn v2_cumulative_sum_telescopes() {
    // The sum of the first k delays is S * m * term(t_k): between
    // term(k-1) and term(k) scaled (here without a cap).
    let m = 1e6; // 1 ms
    let b = Backoff::decorrelated_v2()
        .initial(Duration::from_millis(1))
        .max_delay(Duration::MAX)
        .seed(9)
        .build()
        .unwrap();
    let total: f64 = b.delays().take(10).map(|d| d.as_nanos() as f64).sum();
    let lo = v2_term(9.0) * RP_SCALING * m;
    let hi = v2_term(10.0) * RP_SCALING * m;
    assert!(
        total >= lo - 20.0 && total <= hi + 20.0,
        "{lo} {total} {hi}"
    );
}

#[test]
fn v2_and_aws_survive_huge_steps() {
    let mut rng = Rng::with_seed(1);
    for b in [Backoff::decorrelated(), Backoff::decorrelated_v2()] {
        let b = b.build().unwrap();
        for step in [1000, 1023, 1024, 1025, u32::MAX - 1] {
            let mut s = ScheduleState::at_step(step);
            for _ in 0..3 {
                let d = b.next_delay(&mut s, &mut rng).unwrap();
                assert!(d <= Duration::from_secs(10));
            }
        }
    }
}
