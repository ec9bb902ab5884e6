//! [`Failure`]: what a fallback is given.

use std::time::Duration;

use crate::call::{Ending, Report, RetryError, StopReason};

/// A call that failed, as its fallback sees it: the final outcome (the
/// last response the classifier judged a failure, or the error) and how
/// the call ended.
///
/// ```
/// use steadfast::fallback::Failure;
/// use steadfast::{RetryError, StopReason};
/// let err = RetryError::new(StopReason::Exhausted, Some("refused"), 3, Default::default());
/// let failure: Failure<u16, &str> = Failure::from_result(Err(err));
/// assert_eq!(failure.reason(), StopReason::Exhausted);
/// assert_eq!(failure.attempts(), 3);
/// assert_eq!(failure.error().and_then(|e| e.last_error()), Some(&"refused"));
/// assert!(failure.response().is_none());
/// ```
#[derive(Debug)]
pub struct Failure<T, E> {
    result: Result<T, RetryError<E>>,
    ending: Ending,
}

impl<T, E> Failure<T, E> {
    /// The failure of a call that ended as `ending` says, with `result` its
    /// final outcome. `ending.stop` should be `Some` (see
    /// [`fires`](super::fires)); a `None` reads as
    /// [`StopReason::Exhausted`].
    #[must_use]
    pub fn new(result: Result<T, RetryError<E>>, ending: Ending) -> Self {
        Self { result, ending }
    }

    /// The failure of a plain result: an error says how the call ended; an
    /// `Ok` is taken as a response that ran out of attempts.
    #[must_use]
    pub fn from_result(result: Result<T, RetryError<E>>) -> Self {
        let ending = match &result {
            Ok(_) => Ending {
                attempts: 1,
                stop: Some(StopReason::Exhausted),
                ..Ending::default()
            },
            Err(e) => Ending {
                attempts: e.attempts(),
                stop: Some(e.reason()),
                hedge: e.hedge_stats().copied(),
                ..Ending::default()
            },
        };
        Self { result, ending }
    }

    /// The failure a report describes.
    #[must_use]
    pub fn from_report(report: Report<T, E>) -> Self {
        let ending = report.ending();
        Self::new(report.result, ending)
    }

    /// Why the executor stopped.
    #[must_use]
    pub fn reason(&self) -> StopReason {
        self.ending.stop.unwrap_or(StopReason::Exhausted)
    }

    /// Attempts made, counting the first (0 when a control refused the call).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.ending.attempts
    }

    /// The sum of the waits between attempts.
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.ending.waited
    }

    /// How the call ended.
    #[must_use]
    pub fn ending(&self) -> &Ending {
        &self.ending
    }

    /// The last response, when the call gave up on one the classifier
    /// judged a failure (an HTTP 503 retried until the attempts ran out).
    #[must_use]
    pub fn response(&self) -> Option<&T> {
        self.result.as_ref().ok()
    }

    /// The call's error, when it ended with one (its last error is
    /// [`RetryError::last_error`]).
    #[must_use]
    pub fn error(&self) -> Option<&RetryError<E>> {
        self.result.as_ref().err()
    }

    /// The final outcome as the call would have returned it without a
    /// fallback: what a fallback returns to decline.
    ///
    /// # Errors
    /// The call's [`RetryError`], when it ended with one.
    pub fn into_result(self) -> Result<T, RetryError<E>> {
        self.result
    }

    /// The final outcome and how the call ended.
    pub fn into_parts(self) -> (Result<T, RetryError<E>>, Ending) {
        (self.result, self.ending)
    }
}
