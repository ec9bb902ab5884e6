//! Fibonacci backoff: `initial * F(n+1)` (1, 1, 2, 3, 5, 8, …), capped.

use super::builder::{BackoffBuilder, Kind};
use super::{Backoff, ScheduleState};

impl Backoff {
    /// A Fibonacci schedule: delays `initial × (1, 1, 2, 3, 5, 8, …)`, capped
    /// at `max_delay`. Grows more gently than doubling (by the golden ratio,
    /// about 1.618). Defaults: initial 100 ms, max 10 s, no jitter.
    ///
    /// ```
    /// let b = steadfast::Backoff::fibonacci().build()?;
    /// let ms: Vec<u128> = b.delays().take(12).map(|d| d.as_millis()).collect();
    /// assert_eq!(ms, [100, 100, 200, 300, 500, 800, 1300, 2100, 3400, 5500, 8900, 10_000]);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn fibonacci() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Fibonacci)
    }
}

/// The uncapped term at `state.step`; the two last terms live in
/// `state.mem` (current) and `state.mem2` (previous).
#[inline]
pub(super) fn envelope(initial: f64, cap: f64, state: &mut ScheduleState) -> f64 {
    let (cur, prev) = if state.step == 0 {
        // a(-1) = 0, so a(1) = a(0) + a(-1) = initial.
        (initial, 0.0)
    } else if state.mem >= 0.0 && state.mem2 >= 0.0 {
        (state.mem + state.mem2, state.mem)
    } else {
        closed_form(initial, cap, state.step)
    };
    state.mem = cur;
    state.mem2 = prev;
    cur
}

/// The terms at `step` by iteration, stopping once the term reaches `cap`
/// (beyond it every delay is the cap): at most about 95 rounds, since
/// `initial >= 1 ns` and `cap <= u64::MAX ns`.
#[cold]
fn closed_form(initial: f64, cap: f64, step: u32) -> (f64, f64) {
    if initial <= 0.0 {
        return (0.0, 0.0);
    }
    let (mut cur, mut prev) = (initial, 0.0);
    for _ in 0..step {
        if cur >= cap {
            break;
        }
        (cur, prev) = (cur + prev, cur);
    }
    (cur, prev)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Rng, Schedule};

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
}
