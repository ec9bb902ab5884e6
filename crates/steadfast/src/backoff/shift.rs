//! Shift-exponential backoff: `initial << (shift * n)`, in integer nanoseconds.

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
