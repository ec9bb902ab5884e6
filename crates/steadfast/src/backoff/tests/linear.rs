//! Linear backoff, through [`Backoff`].

use std::time::Duration;

use crate::backoff::schedule::{Schedule, ScheduleState};
use crate::backoff::value::Backoff;
use crate::rng::Rng;

#[test]
fn pester_like_defaults() {
    let b = Backoff::linear().build().unwrap();
    let secs: Vec<u64> = b.delays().take(4).map(|d| d.as_secs()).collect();
    assert_eq!(secs, [1, 2, 3, 4]);
}

#[test]
fn saturates_without_cap() {
    let b = Backoff::linear().step(Duration::MAX).build().unwrap();
    let mut s = ScheduleState::at_step(u32::MAX);
    let d = b.next_delay(&mut s, &mut Rng::with_seed(0));
    assert_eq!(d, Some(Duration::from_nanos(u64::MAX)));
}
