//! Exponential backoff: `initial * multiplier^n`, capped.

use super::builder::{BackoffBuilder, Kind};
use super::{Backoff, ScheduleState};

impl Backoff {
    /// An exponential schedule: delay `n` (0-based) is
    /// `min(initial * multiplier^n, max_delay)`, then jittered and capped
    /// again. Defaults: initial 100 ms, multiplier 2 (any finite real
    /// `>= 1`), max 10 s, full jitter — the same as [`Backoff::default`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{Backoff, Jitter};
    /// let b = Backoff::exponential().jitter(Jitter::None).build()?;
    /// let ms: Vec<u128> = b.delays().take(9).map(|d| d.as_millis()).collect();
    /// assert_eq!(ms, [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn exponential() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Exponential)
    }
}

/// The uncapped envelope at `state.step`, in nanoseconds, remembered in
/// `state.mem` so the next step is one multiplication (no `powf` on the hot
/// path). May be `+inf` (the caller caps it); never NaN.
#[inline]
pub(super) fn envelope(initial: f64, multiplier: f64, state: &mut ScheduleState) -> f64 {
    let env = if state.step == 0 {
        initial
    } else if state.mem >= 0.0 {
        state.mem * multiplier
    } else {
        closed_form(initial, multiplier, state.step)
    };
    state.mem = env;
    env
}

/// `initial * multiplier^step` without NaN (`0 * inf` is 0 here).
#[cold]
pub(super) fn closed_form(initial: f64, multiplier: f64, step: u32) -> f64 {
    if initial == 0.0 {
        0.0
    } else {
        initial * multiplier.powf(f64::from(step))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Jitter, Rng, Schedule};

    #[test]
    fn incremental_matches_closed_form() {
        let b = Backoff::exponential()
            .multiplier(1.7)
            .jitter(Jitter::None)
            .max_delay(Duration::from_secs(3600))
            .build()
            .unwrap();
        let mut rng = Rng::with_seed(0);
        let mut s = ScheduleState::new();
        for step in 0..40 {
            let inc = b.next_delay(&mut s, &mut rng).unwrap();
            let closed = b.delay_at(step, &mut rng);
            let diff = inc.abs_diff(closed);
            assert!(
                diff <= Duration::from_micros(1),
                "step {step}: {inc:?} vs {closed:?}"
            );
        }
    }

    #[test]
    fn huge_multiplier_saturates_at_cap() {
        let b = Backoff::exponential()
            .multiplier(1e300)
            .max_delay(Duration::MAX)
            .jitter(Jitter::None)
            .build()
            .unwrap();
        let d: Vec<_> = b.delays().take(5).collect();
        assert_eq!(d[0], Duration::from_millis(100));
        assert!(d[2..].iter().all(|x| *x == Duration::from_nanos(u64::MAX)));
    }

    #[test]
    fn zero_initial_stays_zero() {
        let b = Backoff::exponential()
            .initial(Duration::ZERO)
            .jitter(Jitter::None)
            .build()
            .unwrap();
        assert_eq!(b.delay_at(u32::MAX, &mut Rng::with_seed(0)), Duration::ZERO);
        assert!(b.delays().take(100).all(|d| d.is_zero()));
    }
}
