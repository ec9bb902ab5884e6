//! Linear backoff: `initial + step * n`.

use super::Backoff;
use super::builder::{BackoffBuilder, Kind};

impl Backoff {
    /// A linear schedule: delay `n` (0-based) is `initial + step * n`, capped
    /// at `max_delay`. Defaults: initial 1 s, step 1 s (1 s, 2 s, 3 s, … as
    /// pester's `LinearBackoff`), no cap, no jitter.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::linear().max_delay(Duration::from_secs(3)).build()?;
    /// let secs: Vec<u64> = b.delays().take(5).map(|d| d.as_secs()).collect();
    /// assert_eq!(secs, [1, 2, 3, 3, 3]);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn linear() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Linear)
    }
}

/// The unjittered delay at `step`, in nanoseconds (finite: at most
/// `MAX_NS + MAX_NS * u32::MAX`).
#[inline]
pub(super) fn envelope(base: f64, inc: f64, step: u32) -> f64 {
    base + inc * f64::from(step)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Rng, Schedule, ScheduleState};

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
}
