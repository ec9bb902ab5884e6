//! The error a hedged call returns when no copy succeeded.

use std::error::Error;
use std::fmt;

use super::HedgeStats;
use crate::{RetryError, StopReason};

/// Why a hedged call failed, what it sent, and the last error as `source()`.
///
/// ```
/// use steadfast::{HedgeError, HedgeStats, StopReason};
/// let mut stats = HedgeStats::default();
/// stats.sent = 3;
/// stats.failed = 3;
/// let err = HedgeError::new(StopReason::Exhausted, Some("unavailable"), stats).with_name("lookup");
/// assert_eq!(
///     err.to_string(),
///     "lookup failed after 3 hedged attempts in 0ms (attempts exhausted): unavailable"
/// );
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct HedgeError<E> {
    reason: StopReason,
    last_error: Option<E>,
    stats: HedgeStats,
    name: Option<&'static str>,
}

impl<E> HedgeError<E> {
    /// A new error.
    ///
    /// ```
    /// use steadfast::{HedgeError, HedgeStats, StopReason};
    /// let err = HedgeError::<()>::new(StopReason::Deadline, None, HedgeStats::default());
    /// assert_eq!(err.reason(), StopReason::Deadline);
    /// ```
    pub fn new(reason: StopReason, last_error: Option<E>, stats: HedgeStats) -> Self {
        Self {
            reason,
            last_error,
            stats,
            name: None,
        }
    }

    /// Names the operation in messages.
    ///
    /// ```
    /// use steadfast::{HedgeError, HedgeStats, StopReason};
    /// let err = HedgeError::<()>::new(StopReason::Deadline, None, HedgeStats::default()).with_name("get");
    /// assert_eq!(err.name(), Some("get"));
    /// ```
    #[must_use]
    pub fn with_name(mut self, name: &'static str) -> Self {
        self.name = Some(name);
        self
    }

    /// The same error with another reason: for an executor that knows more
    /// than the policy did (e.g. [`StopReason::NotReplayable`]).
    ///
    /// ```
    /// use steadfast::{HedgeError, HedgeStats, StopReason};
    /// let err = HedgeError::<()>::new(StopReason::Exhausted, None, HedgeStats::default());
    /// assert_eq!(err.with_reason(StopReason::NotReplayable).reason(), StopReason::NotReplayable);
    /// ```
    #[must_use]
    pub fn with_reason(mut self, reason: StopReason) -> Self {
        self.reason = reason;
        self
    }

    /// Why the call stopped: [`StopReason::Exhausted`] (every copy failed),
    /// [`StopReason::Permanent`] (a fatal error), [`StopReason::Deadline`],
    /// [`StopReason::Cancelled`] or [`StopReason::Throttled`] (a control
    /// refused and nothing else was in flight).
    ///
    /// ```
    /// use steadfast::{HedgeError, HedgeStats, StopReason};
    /// let err = HedgeError::<()>::new(StopReason::Permanent, None, HedgeStats::default());
    /// assert_eq!(err.reason(), StopReason::Permanent);
    /// ```
    #[must_use]
    pub fn reason(&self) -> StopReason {
        self.reason
    }

    /// What the call sent, and how many copies were cancelled.
    ///
    /// ```
    /// use steadfast::{HedgeError, HedgeStats, StopReason};
    /// let mut stats = HedgeStats::default();
    /// stats.sent = 2;
    /// let err = HedgeError::<()>::new(StopReason::Deadline, None, stats);
    /// assert_eq!(err.stats().sent, 2);
    /// ```
    #[must_use]
    pub fn stats(&self) -> &HedgeStats {
        &self.stats
    }

    /// The operation's name, if one was given.
    ///
    /// ```
    /// use steadfast::{HedgeError, HedgeStats, StopReason};
    /// assert_eq!(HedgeError::<()>::new(StopReason::Deadline, None, HedgeStats::default()).name(), None);
    /// ```
    #[must_use]
    pub fn name(&self) -> Option<&'static str> {
        self.name
    }

    /// The error of the copy that finished last (or the fatal one), if any
    /// copy returned an error.
    ///
    /// ```
    /// use steadfast::{HedgeError, HedgeStats, StopReason};
    /// let err = HedgeError::new(StopReason::Permanent, Some("denied"), HedgeStats::default());
    /// assert_eq!(err.last_error(), Some(&"denied"));
    /// ```
    #[must_use]
    pub fn last_error(&self) -> Option<&E> {
        self.last_error.as_ref()
    }

    /// Takes the last error out.
    ///
    /// ```
    /// use steadfast::{HedgeError, HedgeStats, StopReason};
    /// let err = HedgeError::new(StopReason::Permanent, Some(7), HedgeStats::default());
    /// assert_eq!(err.into_last_error(), Some(7));
    /// ```
    #[must_use]
    pub fn into_last_error(self) -> Option<E> {
        self.last_error
    }
}

impl<E> From<HedgeError<E>> for RetryError<E> {
    /// The same failure as a [`RetryError`], for code that handles retried
    /// and hedged calls alike (attempts = copies sent).
    fn from(e: HedgeError<E>) -> Self {
        let err = RetryError::new(e.reason, e.last_error, e.stats.sent, e.stats.elapsed)
            .with_refused_by(e.stats.refused_by);
        match e.name {
            Some(name) => err.with_name(name),
            None => err,
        }
    }
}

impl<E: fmt::Display> fmt::Display for HedgeError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name.unwrap_or("operation");
        let sent = self.stats.sent;
        let plural = if sent == 1 { "" } else { "s" };
        let elapsed = self.stats.elapsed;
        write!(
            f,
            "{name} failed after {sent} hedged attempt{plural} in {} (",
            crate::error::Secs(elapsed)
        )?;
        match (self.reason, self.stats.refused_by) {
            (StopReason::Throttled, Some(by)) => write!(f, "hedge refused by {by}")?,
            (reason, _) => f.write_str(reason.as_str())?,
        }
        f.write_str(")")?;
        if let Some(e) = &self.last_error {
            write!(f, ": {e}")?;
        }
        Ok(())
    }
}

impl<E: fmt::Debug> fmt::Debug for HedgeError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeError")
            .field("reason", &self.reason)
            .field("stats", &self.stats)
            .field("name", &self.name)
            .field("last_error", &self.last_error)
            .finish()
    }
}

impl<E: Error + 'static> Error for HedgeError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.last_error
            .as_ref()
            .map(|e| e as &(dyn Error + 'static))
    }
}
