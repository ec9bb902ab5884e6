//! What one hedged call did with its copies.

use std::time::Duration;

/// What one hedged call did: copies sent, failed, cancelled, the winner.
///
/// Given to the hedging executor's `on_finish` hook, and carried by the
/// [`Report`](super::Report) and the [`RetryError`](super::RetryError) of a
/// hedged call.
///
/// ```
/// let stats = steadfast::call::HedgeStats::default();
/// assert_eq!(stats.hedges(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HedgeStats {
    /// Copies sent, counting the first.
    pub sent: u32,
    /// Copies that finished with a retryable failure.
    pub failed: u32,
    /// Copies still in flight when the call ended, which were cancelled.
    pub cancelled: u32,
    /// The copy that succeeded, if one did.
    pub winner: Option<u32>,
    /// The control that refused a copy, if one did.
    pub refused_by: Option<&'static str>,
    /// Time from the call's start to its end.
    pub elapsed: Duration,
}

impl HedgeStats {
    /// Extra copies sent beyond the first (the hedges proper).
    ///
    /// ```
    /// let mut stats = steadfast::call::HedgeStats::default();
    /// stats.sent = 3;
    /// assert_eq!(stats.hedges(), 2);
    /// ```
    #[must_use]
    pub fn hedges(&self) -> u32 {
        self.sent.saturating_sub(1)
    }
}
