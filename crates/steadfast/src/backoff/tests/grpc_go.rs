//! grpc-go's backoff (`internal/backoff`: exponential, ±20 %, first delay
//! unjittered), through [`Backoff`].

use std::time::Duration;

use crate::backoff::jitter::Jitter;
use crate::backoff::schedule::{Schedule, ScheduleState};
use crate::backoff::value::Backoff;
use crate::rng::Rng;

/// grpc-go's loop, written out: multiply while below max and retries
/// remain, cap, then jitter with the given unit draw.
fn reference(retries: u32, u: f64) -> f64 {
    if retries == 0 {
        return 1e9;
    }
    let (mut backoff, max) = (1e9f64, 120e9f64);
    let mut r = retries;
    while backoff < max && r > 0 {
        backoff *= 1.6;
        r -= 1;
    }
    backoff = backoff.min(max);
    (backoff * (1.0 + 0.2 * (u * 2.0 - 1.0))).max(0.0)
}

#[test]
fn matches_the_reference_loop() {
    let b = Backoff::grpc_go().build().unwrap();
    for retries in [0u32, 1, 2, 5, 10, 11, 12, 100, u32::MAX] {
        let mut rng = Rng::with_seed(u64::from(retries));
        let mut copy = rng.clone();
        let got = b.delay_at(retries, &mut rng).as_nanos() as f64;
        // The unit draw behind the jitter: the next raw word, over 2^64.
        let u = if retries == 0 {
            0.5
        } else {
            copy.next_u64() as f64 / 18_446_744_073_709_551_616.0
        };
        let want = reference(retries, u);
        assert!(
            (got - want).abs() <= want * 1e-9 + 1.0,
            "{retries}: {got} vs {want}"
        );
    }
}

#[test]
fn jitter_may_exceed_max_as_in_grpc_go() {
    let b = Backoff::grpc_go().seed(4).build().unwrap();
    let d: Vec<Duration> = b.delays().take(300).collect();
    assert!(d.iter().all(|x| *x <= Duration::from_secs(144)));
    assert!(d.iter().any(|x| *x > Duration::from_secs(120)));
}

#[test]
fn first_delay_of_a_reset_curve_is_unjittered() {
    let b = Backoff::grpc_go().build().unwrap();
    let mut s = ScheduleState::new();
    let mut rng = Rng::with_seed(2);
    for _ in 0..5 {
        b.next_delay(&mut s, &mut rng);
    }
    s.reset_curve();
    assert_eq!(b.next_delay(&mut s, &mut rng), Some(Duration::from_secs(1)));
}

#[test]
fn first_delay_is_the_base_even_above_max() {
    let b = Backoff::grpc_go()
        .initial(Duration::from_secs(200))
        .build()
        .unwrap();
    let d: Vec<Duration> = b.delays_seeded(1).take(3).collect();
    assert_eq!(d[0], Duration::from_secs(200));
    assert!(d[1..].iter().all(|x| *x <= Duration::from_secs(144)));
}

#[test]
fn only_proportional_or_no_jitter() {
    assert!(Backoff::grpc_go().jitter(Jitter::None).build().is_ok());
    for j in [Jitter::Full, Jitter::Equal] {
        assert_eq!(
            Backoff::grpc_go().jitter(j).build().unwrap_err().field(),
            "jitter"
        );
    }
}
