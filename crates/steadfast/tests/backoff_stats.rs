//! Statistical and known-answer tests over many fixed seeds: deterministic
//! (never flaky), loose enough for sampling noise, tight enough to catch a
//! wrong formula (each bound is several standard errors wide, and a wrong
//! constant moves the statistic far past it).

use std::time::Duration;

use steadfast::backoff::{GrpcConnectionBackoff, Rng, Schedule, ScheduleState};
use steadfast::{Backoff, Jitter};

const SEEDS: u64 = 20_000;

/// The `n`-th delay (0-based) of `b` for each seed, in seconds, sorted.
fn sample(b: &Backoff, n: usize) -> Vec<f64> {
    let mut v: Vec<f64> = (0..SEEDS)
        .map(|seed| {
            b.delays_seeded(seed)
                .nth(n)
                .expect("unlimited schedule")
                .as_secs_f64()
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}

#[test]
fn full_jitter_is_uniform_below_the_envelope() {
    // Default: exponential 100 ms x 2, full jitter. Delay 3: envelope 0.8 s.
    let v = sample(&Backoff::default(), 3);
    // Standard error of the mean: 0.8 / sqrt(12 * 20000) ~ 0.0016.
    assert!((mean(&v) - 0.4).abs() < 0.01, "{}", mean(&v));
    for q in [0.1, 0.25, 0.5, 0.75, 0.9] {
        let got = quantile(&v, q);
        assert!((got - 0.8 * q).abs() < 0.02, "q{q}: {got}");
    }
    assert!(v[0] >= 0.0 && *v.last().unwrap() <= 0.8);
}

#[test]
fn equal_jitter_is_uniform_in_the_upper_half() {
    let b = Backoff::exponential()
        .jitter(Jitter::Equal)
        .build()
        .unwrap();
    let v = sample(&b, 2); // envelope 0.4 s
    assert!((mean(&v) - 0.3).abs() < 0.005, "{}", mean(&v));
    assert!(v[0] >= 0.2 && *v.last().unwrap() <= 0.4);
    assert!((quantile(&v, 0.5) - 0.3).abs() < 0.01);
}

#[test]
fn proportional_jitter_is_symmetric_around_the_envelope() {
    let b = Backoff::exponential()
        .jitter(Jitter::Proportional(0.2))
        .build()
        .unwrap();
    let v = sample(&b, 4); // envelope 1.6 s, range [1.28, 1.92]
    assert!((mean(&v) - 1.6).abs() < 0.01, "{}", mean(&v));
    assert!((quantile(&v, 0.5) - 1.6).abs() < 0.02);
    // Symmetry: the distances of the 10 % and 90 % quantiles from the centre agree.
    let (lo, hi) = (1.6 - quantile(&v, 0.1), quantile(&v, 0.9) - 1.6);
    assert!((lo - hi).abs() < 0.02, "{lo} vs {hi}");
    assert!(v[0] >= 1.28 - 1e-9 && *v.last().unwrap() <= 1.92 + 1e-9);
}

#[test]
fn additive_jitter_is_uniform_above_the_curve() {
    // Envelope 0.4 s (delay 2 of 100 ms x 2), plus U(0, 100 ms).
    let m = 0.1;
    let b = Backoff::exponential()
        .jitter(Jitter::Additive(Duration::from_millis(100)))
        .build()
        .unwrap();
    let v = sample(&b, 2);
    // Standard error of the mean: m / sqrt(12 n) ~ 0.0002 s; allow 6 of them.
    let se = m / (12.0 * SEEDS as f64).sqrt();
    assert!(
        (mean(&v) - (0.4 + m / 2.0)).abs() < 6.0 * se,
        "{}",
        mean(&v)
    );
    // A quantile's standard error is below m * 0.5 / sqrt(n) ~ 0.00035 s.
    for q in [0.1, 0.25, 0.5, 0.75, 0.9] {
        let got = quantile(&v, q);
        assert!((got - (0.4 + m * q)).abs() < 0.005, "q{q}: {got}");
    }
    // Never below the curve, always below curve + m.
    assert!(v[0] >= 0.4 && *v.last().unwrap() < 0.4 + m);
}

#[test]
fn additive_jitter_is_capped_after_the_addition() {
    // Envelope 0.8 s, cap 1 s, plus U(0, 300 ms): min(0.8 + U, 1). A third
    // of the draws (U >= 0.2) land on the cap; the mean is
    // 0.8 + E[min(U, 0.2)] = 0.8 + (0.2^2 / 2 + 0.2 * 0.1) / 0.3 = 0.9333 s.
    let b = Backoff::exponential()
        .max_delay(Duration::from_secs(1))
        .jitter(Jitter::Additive(Duration::from_millis(300)))
        .build()
        .unwrap();
    let v = sample(&b, 3);
    assert!(v[0] >= 0.8 && *v.last().unwrap() <= 1.0);
    // Every delay is at most 1 s (above), so `>= 1.0` is "on the cap".
    let at_cap = v.iter().filter(|d| **d >= 1.0).count() as f64 / SEEDS as f64;
    // Binomial standard error: sqrt(p (1 - p) / n) ~ 0.0033; allow 6.
    let se = (1.0 / 3.0 * 2.0 / 3.0 / SEEDS as f64).sqrt();
    assert!((at_cap - 1.0 / 3.0).abs() < 6.0 * se, "{at_cap}");
    // Mean standard error below 0.3 / sqrt(12 n) ~ 0.0006 s; allow 6.
    let se = 0.3 / (12.0 * SEEDS as f64).sqrt();
    assert!(
        (mean(&v) - (0.8 + 0.04 / 0.3)).abs() < 6.0 * se,
        "{}",
        mean(&v)
    );
    // On the plateau the cap wins over the jitter.
    let one = Duration::from_secs(1);
    assert!((0..1000).all(|seed| b.delays_seeded(seed).nth(10) == Some(one)));
}

#[test]
fn capped_full_jitter_stays_below_cap_and_is_uniform() {
    // Envelope far beyond the cap: U(0, cap), never above it.
    let b = Backoff::exponential()
        .max_delay(Duration::from_secs(2))
        .build()
        .unwrap();
    let v = sample(&b, 30);
    assert!(*v.last().unwrap() <= 2.0);
    assert!((mean(&v) - 1.0).abs() < 0.02);
}

#[test]
fn a6_current_and_legacy_means() {
    // The gRFC example: envelope 0.8 s at retry 4 (delay index 3).
    let current = sample(&Backoff::grpc_a6().build().unwrap(), 3);
    let legacy = sample(&Backoff::grpc_a6_legacy().build().unwrap(), 3);
    assert!((mean(&current) - 0.8).abs() < 0.005, "{}", mean(&current));
    assert!((mean(&legacy) - 0.4).abs() < 0.01, "{}", mean(&legacy));
    assert!(current[0] >= 0.64 - 1e-9 && *current.last().unwrap() <= 0.96 + 1e-9);
}

#[test]
fn aws_decorrelated_second_delay_mean() {
    // d1 ~ U(b, 3b); d2 ~ U(b, 3 d1): E[d2] = (b + 3 E[d1]) / 2 = (b + 6b) / 2 = 3.5 b.
    let b = Backoff::decorrelated()
        .max_delay(Duration::from_secs(100))
        .build()
        .unwrap();
    let v = sample(&b, 1);
    assert!((mean(&v) - 0.35).abs() < 0.01, "{}", mean(&v));
}

#[test]
fn known_answer_grpc_go_and_connection_unjittered() {
    let expected = [
        1.0,
        1.6,
        2.56,
        4.096,
        6.5536,
        10.48576,
        16.777216,
        26.8435456,
        42.94967296,
        68.719476736,
        109.9511627776,
        120.0,
        120.0,
    ];
    let b = Backoff::grpc_go().jitter(Jitter::None).build().unwrap();
    for (d, want) in b.delays().zip(expected) {
        assert!((d.as_secs_f64() - want).abs() < 1e-6, "{d:?} vs {want}");
    }
    // The connection state: attempt deadlines are max(current_deadline, now + 20 s).
    let mut conn = GrpcConnectionBackoff::default().connection(Rng::with_seed(5));
    let mut now = std::time::Instant::now();
    for (i, want) in expected.into_iter().enumerate() {
        let a = conn.next_attempt(now);
        assert!((conn.current_backoff().as_secs_f64() - want).abs() < 1e-6);
        let wait = (a.retry_at - now).as_secs_f64();
        if i == 0 {
            assert!((wait - 1.0).abs() < 1e-9, "first: no jitter");
        } else {
            assert!(wait >= want * 0.8 - 1e-6 && wait <= want * 1.2 + 1e-6);
        }
        let timeout = (a.connect_deadline - now).as_secs_f64();
        assert!((timeout - wait.max(20.0)).abs() < 1e-9);
        now = a.retry_at;
    }
}

#[test]
fn known_answer_a6_example_envelopes() {
    let ms: Vec<u128> = Backoff::exponential()
        .initial(Duration::from_millis(100))
        .multiplier(2.0)
        .max_delay(Duration::from_secs(1))
        .jitter(Jitter::None)
        .build()
        .unwrap()
        .delays()
        .take(6)
        .map(|d| d.as_millis())
        .collect();
    assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
}

#[test]
fn seeded_delays_follow_the_formula_draw_by_draw() {
    // Each delay of the default schedule (full jitter) is exactly
    // floor(envelope * r / 2^64), with r the next raw 64-bit word of the
    // seeded generator: U(0, envelope) in whole nanoseconds.
    let first: Vec<u128> = Backoff::default()
        .delays_seeded(42)
        .take(4)
        .map(|d| d.as_nanos())
        .collect();
    let again: Vec<u128> = Backoff::default()
        .delays_seeded(42)
        .take(4)
        .map(|d| d.as_nanos())
        .collect();
    assert_eq!(first, again);
    let mut rng = Rng::with_seed(42);
    let mut state = ScheduleState::new();
    let by_hand: Vec<u128> = (0..4)
        .map(|i| {
            let env = 100_000_000u128 << i;
            let r = u128::from(rng.clone().next_u64());
            let d = Backoff::default()
                .next_delay(&mut state, &mut rng)
                .unwrap()
                .as_nanos();
            assert_eq!(d, (env * r) >> 64);
            d
        })
        .collect();
    assert_eq!(first, by_hand);
}
