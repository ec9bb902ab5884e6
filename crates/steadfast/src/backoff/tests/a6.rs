//! gRFC A6 retry backoff (current and legacy), through [`Backoff`].

use std::time::Duration;

use crate::backoff::jitter::Jitter;
use crate::backoff::schedule::{Schedule, ScheduleState};
use crate::backoff::value::Backoff;
use crate::rng::Rng;

const ENVELOPES: [f64; 8] = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0];

#[test]
fn known_answer_envelopes_within_jitter() {
    for seed in 0..200 {
        let b = Backoff::grpc_a6().seed(seed).build().unwrap();
        let legacy = Backoff::grpc_a6_legacy().seed(seed).build().unwrap();
        for ((d, l), env) in b.delays().zip(legacy.delays()).zip(ENVELOPES) {
            let (d, l) = (d.as_secs_f64(), l.as_secs_f64());
            assert!(
                d >= env * 0.8 - 1e-9 && d <= env * 1.2 + 1e-9,
                "{d} vs {env}"
            );
            assert!((0.0..=env + 1e-9).contains(&l), "{l} vs {env}");
        }
    }
}

#[test]
fn means_are_envelope_and_half_envelope() {
    let (mut sum, mut sum_legacy) = (0.0, 0.0);
    let n = 20_000;
    for seed in 0..n {
        let mut rng = Rng::with_seed(seed);
        let b = Backoff::grpc_a6().build().unwrap();
        let l = Backoff::grpc_a6_legacy().build().unwrap();
        sum += b.delay_at(4, &mut rng).as_secs_f64();
        sum_legacy += l.delay_at(4, &mut rng).as_secs_f64();
    }
    let (m, ml) = (sum / n as f64, sum_legacy / n as f64);
    assert!((m - 1.0).abs() < 0.005, "{m}");
    assert!((ml - 0.5).abs() < 0.01, "{ml}");
}

#[test]
fn multiplier_below_one_is_allowed_but_not_zero() {
    let b = Backoff::grpc_a6()
        .multiplier(0.5)
        .initial(Duration::from_secs(1))
        .max_delay(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut s = ScheduleState::new();
    let mut rng = Rng::with_seed(0);
    let first = b.next_delay(&mut s, &mut rng).unwrap();
    assert!(first >= Duration::from_millis(800));
    let err = Backoff::grpc_a6().multiplier(0.0).build().unwrap_err();
    assert_eq!(err.rule(), "must be a finite number > 0");
    assert_eq!(
        Backoff::grpc_a6()
            .jitter(Jitter::Full)
            .build()
            .unwrap_err()
            .field(),
        "jitter"
    );
}

#[test]
fn max_attempts_counts_the_original_call() {
    let b = Backoff::grpc_a6().max_attempts(5).build().unwrap();
    assert_eq!(b.delays().count(), 4);
}
