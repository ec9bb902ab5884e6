//! Fibonacci backoff, through [`Backoff`].

use std::time::Duration;

use crate::backoff::schedule::{Schedule, ScheduleState};
use crate::backoff::value::Backoff;
use crate::rng::Rng;

#[test]
fn closed_form_matches_iteration() {
    let b = Backoff::fibonacci()
        .initial(Duration::from_nanos(1))
        .max_delay(Duration::MAX)
        .build()
        .unwrap();
    let mut rng = Rng::with_seed(0);
    let mut s = ScheduleState::new();
    for step in 0..100 {
        let inc = b.next_delay(&mut s, &mut rng).unwrap();
        assert_eq!(inc, b.delay_at(step, &mut rng), "step {step}");
    }
    assert_eq!(
        b.delay_at(u32::MAX, &mut rng),
        Duration::from_nanos(u64::MAX)
    );
}

#[test]
fn zero_initial_is_zero_at_any_step() {
    let b = Backoff::fibonacci()
        .initial(Duration::ZERO)
        .build()
        .unwrap();
    assert_eq!(b.delay_at(u32::MAX, &mut Rng::with_seed(0)), Duration::ZERO);
}
