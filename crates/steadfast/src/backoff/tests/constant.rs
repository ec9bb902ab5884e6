//! Constant backoff (the same interval before every retry), through
//! [`Backoff`].

use std::time::Duration;

use crate::backoff::jitter::Jitter;
use crate::backoff::schedule::{Schedule, ScheduleState};
use crate::backoff::value::Backoff;
use crate::rng::Rng;

#[test]
fn named_default_is_one_second() {
    let b = Backoff::named("constant").unwrap().build().unwrap();
    assert!(b.delays().take(10).all(|d| d == Duration::from_secs(1)));
}

#[test]
fn constant_at_any_step() {
    let b = Backoff::constant(Duration::from_secs(3)).build().unwrap();
    let mut rng = Rng::with_seed(0);
    for step in [0, 1, 1000, u32::MAX - 1, u32::MAX] {
        let mut s = ScheduleState::at_step(step);
        assert_eq!(b.next_delay(&mut s, &mut rng), Some(Duration::from_secs(3)));
    }
}

#[test]
fn jittered_constant_stays_within_cap() {
    let b = Backoff::constant(Duration::from_secs(1))
        .jitter(Jitter::Proportional(1.0))
        .max_delay(Duration::from_millis(1200))
        .seed(5)
        .build()
        .unwrap();
    assert!(
        b.delays()
            .take(1000)
            .all(|d| d <= Duration::from_millis(1200))
    );
    assert!(
        b.delays()
            .take(1000)
            .any(|d| d < Duration::from_millis(500))
    );
}
