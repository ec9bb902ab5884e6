//! Linear backoff: `initial + step * n`.

/// The unjittered delay at `step`, in nanoseconds (finite: at most
/// `MAX_NS + MAX_NS * u32::MAX`).
#[inline]
pub(super) fn envelope(base: f64, inc: f64, step: u32) -> f64 {
    base + inc * f64::from(step)
}
