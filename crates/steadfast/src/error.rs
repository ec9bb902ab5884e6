//! The error a retried call returns when it gives up.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use crate::StopReason;

/// Why and how a retried call failed: the stop reason, the attempts made,
/// the time spent, the operation's name, and the last error as `source()`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{RetryError, StopReason};
///
/// let err = RetryError::new(StopReason::Exhausted, Some("connection refused"), 5, Duration::from_millis(3200))
///     .with_name("fetch_user");
/// assert_eq!(
///     err.to_string(),
///     "fetch_user failed after 5 attempts in 3.2s (attempts exhausted): connection refused"
/// );
/// ```
///
/// The details live behind one box, so a `Result<T, RetryError<E>>` is
/// barely larger than `T`: the success path moves no more than it must, and
/// the box is made only when a call gives up.
#[derive(Clone, PartialEq, Eq)]
pub struct RetryError<E>(Box<Details<E>>);

#[derive(Clone, PartialEq, Eq)]
struct Details<E> {
    reason: StopReason,
    last_error: Option<E>,
    attempts: u32,
    elapsed: Duration,
    name: Option<&'static str>,
    refused_by: Option<&'static str>,
    refused_for: Option<Duration>,
    timed_out: bool,
}

impl<E> RetryError<E> {
    /// A new error.
    pub fn new(
        reason: StopReason,
        last_error: Option<E>,
        attempts: u32,
        elapsed: Duration,
    ) -> Self {
        Self(Box::new(Details {
            reason,
            last_error,
            attempts,
            elapsed,
            name: None,
            refused_by: None,
            refused_for: None,
            timed_out: false,
        }))
    }

    /// Names the operation in messages.
    #[must_use]
    pub fn with_name(mut self, name: &'static str) -> Self {
        self.0.name = Some(name);
        self
    }

    /// The same error with another reason: for an executor that knows more
    /// than the policy did (e.g. that the request could not be sent again,
    /// [`StopReason::NotReplayable`]).
    ///
    /// ```
    /// use steadfast::{RetryError, StopReason};
    /// let err = RetryError::new(StopReason::Exhausted, Some("reset"), 1, Default::default());
    /// assert_eq!(err.with_reason(StopReason::NotReplayable).reason(), StopReason::NotReplayable);
    /// ```
    #[must_use]
    pub fn with_reason(mut self, reason: StopReason) -> Self {
        self.0.reason = reason;
        self
    }

    /// Records which retry control refused (for [`StopReason::Throttled`]).
    #[must_use]
    pub fn with_refused_by(mut self, by: Option<&'static str>) -> Self {
        self.0.refused_by = by;
        self
    }

    /// Records how long the refusing control said it would go on refusing
    /// (a circuit breaker: the rest of its break).
    #[must_use]
    pub fn with_refused_for(mut self, refused_for: Option<Duration>) -> Self {
        self.0.refused_for = refused_for;
        self
    }

    /// Records that the last attempt ran out of time rather than failing.
    #[must_use]
    pub fn with_timed_out(mut self, timed_out: bool) -> Self {
        self.0.timed_out = timed_out;
        self
    }

    /// Why the call stopped.
    #[must_use]
    pub fn reason(&self) -> StopReason {
        self.0.reason
    }

    /// Attempts made, counting the first.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.0.attempts
    }

    /// Time spent, from the call's start when a time limit made the executor
    /// read the clock then, otherwise from the end of the first attempt.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.0.elapsed
    }

    /// The operation's name, if one was given.
    #[must_use]
    pub fn name(&self) -> Option<&'static str> {
        self.0.name
    }

    /// The control that refused a retry, for [`StopReason::Throttled`].
    #[must_use]
    pub fn refused_by(&self) -> Option<&'static str> {
        self.0.refused_by
    }

    /// For [`StopReason::Throttled`]: how long the control that refused
    /// said it would go on refusing, when it knows (a circuit breaker that
    /// is open: the rest of its break, after which it lets a probe through).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{RetryError, StopReason};
    /// let err = RetryError::<std::io::Error>::new(StopReason::Throttled, None, 0, Duration::ZERO)
    ///     .with_refused_by(Some("payments"))
    ///     .with_refused_for(Some(Duration::from_millis(4200)));
    /// assert_eq!(err.refused_for(), Some(Duration::from_millis(4200)));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "operation failed after 0 attempts in 0ms (refused by payments, for 4.2s more)"
    /// );
    /// ```
    #[must_use]
    pub fn refused_for(&self) -> Option<Duration> {
        self.0.refused_for
    }

    /// Whether the last attempt was cut off by its timeout.
    #[must_use]
    pub fn timed_out(&self) -> bool {
        self.0.timed_out
    }

    /// The last error the operation returned, if any attempt returned one.
    #[must_use]
    pub fn last_error(&self) -> Option<&E> {
        self.0.last_error.as_ref()
    }

    /// Takes the last error out.
    #[must_use]
    pub fn into_last_error(self) -> Option<E> {
        self.0.last_error
    }
}

/// A duration as error messages print it: `3.2s`, or `250ms` below a second.
pub(crate) struct Secs(pub(crate) Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d >= Duration::from_secs(1) {
            write!(f, "{:.1}s", d.as_secs_f64())
        } else {
            write!(f, "{}ms", d.as_millis())
        }
    }
}

impl<E: fmt::Display> fmt::Display for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.0.name.unwrap_or("operation");
        let plural = if self.0.attempts == 1 { "" } else { "s" };
        write!(
            f,
            "{name} failed after {} attempt{plural} in {} (",
            self.0.attempts,
            Secs(self.0.elapsed)
        )?;
        match (self.0.reason, self.0.refused_by) {
            // No attempt made: the call itself was refused.
            (StopReason::Throttled, Some(by)) if self.0.attempts == 0 => {
                write!(f, "refused by {by}")?;
            }
            (StopReason::Throttled, Some(by)) => write!(f, "retry refused by {by}")?,
            (reason, _) => f.write_str(reason.as_str())?,
        }
        if let (StopReason::Throttled, Some(d)) = (self.0.reason, self.0.refused_for) {
            write!(f, ", for {} more", Secs(d))?;
        }
        f.write_str(")")?;
        if self.0.timed_out {
            f.write_str(": attempt timed out")
        } else if let Some(e) = &self.0.last_error {
            write!(f, ": {e}")
        } else {
            Ok(())
        }
    }
}

impl<E: fmt::Debug> fmt::Debug for RetryError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryError")
            .field("reason", &self.0.reason)
            .field("attempts", &self.0.attempts)
            .field("elapsed", &self.0.elapsed)
            .field("name", &self.0.name)
            .field("refused_by", &self.0.refused_by)
            .field("refused_for", &self.0.refused_for)
            .field("timed_out", &self.0.timed_out)
            .field("last_error", &self.0.last_error)
            .finish()
    }
}

impl<E: Error + 'static> Error for RetryError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0
            .last_error
            .as_ref()
            .map(|e| e as &(dyn Error + 'static))
    }
}
