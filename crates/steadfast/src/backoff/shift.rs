//! Shift-exponential backoff: `initial << (shift * n)`, in integer nanoseconds.

use super::Backoff;
use super::builder::{BackoffBuilder, Kind};

impl Backoff {
    /// A power-of-two exponential schedule computed by shifting integer
    /// nanoseconds: delay `n` (0-based) is `initial << (shift * n)`,
    /// saturating at `u64::MAX` ns and then capped at `max_delay`; it never
    /// overflows or wraps, for any `n` up to `u32::MAX`. Defaults: initial
    /// 100 ms, shift 1 (doubling), max 10 s, no jitter.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::shift_exponential().max_delay(Duration::MAX).build()?;
    /// let ms: Vec<u128> = b.delays().take(4).map(|d| d.as_millis()).collect();
    /// assert_eq!(ms, [100, 200, 400, 800]);
    /// assert_eq!(b.delay_at(u32::MAX, &mut steadfast::Rng::with_seed(0)), Duration::from_nanos(u64::MAX));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn shift_exponential() -> BackoffBuilder {
        BackoffBuilder::new(Kind::ShiftExponential)
    }
}

/// `initial << (shift * step)` saturating at `u64::MAX`, as `f64` nanoseconds.
#[inline]
pub(super) fn envelope(initial: u64, shift: u32, step: u32) -> f64 {
    let bits = u64::from(shift) * u64::from(step);
    let v = if initial == 0 {
        0
    } else if bits > u64::from(initial.leading_zeros()) {
        u64::MAX
    } else {
        initial << bits
    };
    v as f64
}

#[cfg(test)]
// Exact: these values are integers representable in f64.
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_saturating() {
        assert_eq!(envelope(3, 1, 0), 3.0);
        assert_eq!(envelope(3, 1, 4), 48.0);
        assert_eq!(envelope(1, 1, 63), 2f64.powi(63));
        assert_eq!(envelope(1, 1, 64), u64::MAX as f64);
        assert_eq!(envelope(1, u32::MAX, u32::MAX), u64::MAX as f64);
        assert_eq!(envelope(0, 7, u32::MAX), 0.0);
        assert_eq!(envelope(u64::MAX, 1, 1), u64::MAX as f64);
    }
}
