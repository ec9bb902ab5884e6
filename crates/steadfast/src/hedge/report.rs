//! What a hedged call hands back: the result alone (the default), or a
//! [`HedgeReport`] that also says how the call ended.

use crate::retry::{Plain, Reported};
use crate::{HedgeError, HedgeStats, StopReason};

/// A hedged call's result together with how it ended: made by
/// [`Hedge::report`](super::Hedge::report).
///
/// A success says nothing of the copies it took; the report does
/// ([`stats`](Self::stats): copies sent, failed, cancelled, the winner).
/// And as for retries, a retried `Ok` value that ran out of copies (an HTTP
/// 503 from every copy) comes back as `Ok`, which [`stop`](Self::stop)
/// tells apart from a success.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{Attempt, HedgePolicy, Hedgeable};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), steadfast::ConfigError> {
/// let policy = HedgePolicy::builder(Duration::from_millis(50)).max_attempts(3).build()?;
/// let report = (|attempt: Attempt| async move {
///     if attempt.is_first() {
///         tokio::time::sleep(Duration::from_secs(10)).await; // stuck
///     }
///     Ok::<_, std::io::Error>(attempt.number)
/// })
/// .hedge(&policy)
/// .report()
/// .await;
/// assert_eq!(report.result.as_ref().ok(), Some(&2));
/// assert_eq!((report.stats.sent, report.stats.hedges(), report.stats.cancelled), (2, 1, 1));
/// assert!(report.succeeded());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct HedgeReport<T, E> {
    /// What the plain executor returns: the value, or why the call failed.
    pub result: Result<T, HedgeError<E>>,
    /// The call's copies: sent, failed, cancelled, the winner, time taken.
    pub stats: HedgeStats,
    /// Why the call stopped without a winner: `None` when a copy succeeded.
    /// `Some` with an `Ok` result means the call gave up on a retried value,
    /// which is returned as the last response.
    pub stop: Option<StopReason>,
}

impl<T, E> HedgeReport<T, E> {
    /// Whether a copy succeeded (so the result is `Ok`).
    #[must_use]
    pub fn succeeded(&self) -> bool {
        self.stop.is_none()
    }

    /// The plain result, dropping the rest of the report.
    ///
    /// # Errors
    /// The [`HedgeError`] of a call that failed.
    pub fn into_result(self) -> Result<T, HedgeError<E>> {
        self.result
    }
}

/// What a hedged call's output is: the plain result ([`Plain`], the
/// default) or a [`HedgeReport`] ([`Reported`], from
/// [`Hedge::report`](super::Hedge::report)). Sealed.
pub trait HedgeFinish<T, E>: crate::retry::report::sealed::Sealed {
    /// The executor's output.
    type Output;

    /// This output from a full report: its result for [`Plain`], itself
    /// for [`Reported`].
    ///
    /// ```
    /// use steadfast::hedge::{HedgeFinish, HedgeReport};
    /// use steadfast::retry::Plain;
    /// fn plain<T, E>(report: HedgeReport<T, E>) -> Result<T, steadfast::HedgeError<E>> {
    ///     <Plain as HedgeFinish<T, E>>::from_report(report)
    /// }
    /// ```
    fn from_report(report: HedgeReport<T, E>) -> Self::Output;
}

impl<T, E> HedgeFinish<T, E> for Plain {
    type Output = Result<T, HedgeError<E>>;
    #[inline]
    fn from_report(report: HedgeReport<T, E>) -> Self::Output {
        report.result
    }
}

impl<T, E> HedgeFinish<T, E> for Reported {
    type Output = HedgeReport<T, E>;
    #[inline]
    fn from_report(report: HedgeReport<T, E>) -> Self::Output {
        report
    }
}
