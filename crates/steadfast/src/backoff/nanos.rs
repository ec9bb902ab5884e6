//! Nanosecond arithmetic shared by the schedules: `Duration`s to float and
//! whole nanoseconds and back, saturating, and the high half of a product.

use std::time::Duration;

/// The largest delay any schedule gives: `u64::MAX` nanoseconds (about 584
/// years). Every delay saturates there.
pub(super) const MAX_NS: f64 = u64::MAX as f64;

/// A duration in (fractional) nanoseconds, saturating at [`MAX_NS`].
pub(super) fn nanos(d: Duration) -> f64 {
    // u128 -> f64 rounds; fine for configuration values.
    (d.as_nanos() as f64).min(MAX_NS)
}

/// A duration in whole nanoseconds, saturating at `u64::MAX`.
pub(super) fn nanos_u64(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Float nanoseconds to whole ones, truncating: saturating, NaN and
/// negatives give zero. Values below 2^63 (every delay under 292 years) take
/// the cheaper signed conversion; the branch is on the schedule's
/// configuration, not on random data.
#[inline(always)]
pub(super) fn ns_u64(ns: f64) -> u64 {
    if ns < I64_LIMIT {
        // `as` saturates and `max` maps negatives to 0 (NaN fails the test
        // above, and `as u64` maps it to 0): never panics.
        (ns as i64).max(0) as u64
    } else {
        ns as u64
    }
}

/// [`ns_u64`] for a value known not to be negative (nor NaN): one test less.
#[inline(always)]
pub(super) fn ns_u64_nonneg(ns: f64) -> u64 {
    if ns < I64_LIMIT {
        ns as i64 as u64
    } else {
        ns as u64
    }
}

/// 2^63 as a float: the values below it convert to `i64` exactly.
const I64_LIMIT: f64 = 9_223_372_036_854_775_808.0;

/// Nanoseconds to a duration: saturating, NaN and negatives give zero.
#[inline]
pub(super) fn duration_from_nanos(ns: f64) -> Duration {
    // `as` saturates (and maps NaN to 0): never panics.
    Duration::from_nanos(ns as u64)
}

/// `floor(x * y / 2^64)`: with `x` a uniform random word, uniform in `[0, y)`.
#[inline(always)]
pub(super) const fn mul_high(x: u64, y: u64) -> u64 {
    ((x as u128 * y as u128) >> 64) as u64
}
