//! What one attempt tells a concurrency limit.

use crate::call::Verdict;

/// What an attempt that held a slot tells the limit when it gives the slot
/// back ([`Permit::finish`](super::Permit::finish)).
///
/// ```
/// use steadfast::Verdict;
/// use steadfast::limit::Signal;
/// assert_eq!(Signal::of(Verdict::Success, false), Signal::Success);
/// // A server's pushback or an overload status is a drop.
/// assert_eq!(Signal::of(Verdict::RetryAfter(std::time::Duration::from_secs(1)), false), Signal::Dropped);
/// assert_eq!(Signal::of(Verdict::Retry, true), Signal::Dropped);
/// // Any other failure says nothing of the dependency's capacity.
/// assert_eq!(Signal::of(Verdict::Retry, false), Signal::Ignored);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// The attempt succeeded: its latency is a sample.
    Success,
    /// The attempt ended in a sign of overload (a timeout, HTTP 429 or 503,
    /// gRPC `RESOURCE_EXHAUSTED` or `UNAVAILABLE`, a server's pushback): an
    /// adaptive limit shrinks.
    Dropped,
    /// The attempt says nothing of the dependency's capacity (a permanent
    /// error, a failure of the caller's own, a cancellation): no sample.
    Ignored,
}

impl Signal {
    /// The signal of an attempt the classifier judged `verdict`, where
    /// `overloaded` is the classifier's word on whether the outcome is a
    /// sign of overload ([`Classify::overloaded`](crate::Classify::overloaded)):
    /// an overload, a [`Verdict::RetryAfter`] or a [`Verdict::StopSending`]
    /// (a server asking to be left alone) is a drop; a success is a
    /// sample; anything else is ignored. The one rule every executor
    /// follows; an attempt cut off by its timeout is a drop too.
    #[inline]
    #[must_use]
    pub const fn of(verdict: Verdict, overloaded: bool) -> Self {
        if overloaded {
            return Self::Dropped;
        }
        match verdict {
            Verdict::Success => Self::Success,
            Verdict::RetryAfter(_) | Verdict::StopSending => Self::Dropped,
            Verdict::Retry | Verdict::Stop | Verdict::Unsent => Self::Ignored,
        }
    }
}
