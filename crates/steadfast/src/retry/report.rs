//! What an executor hands back: the result alone (the default), or a
//! [`Report`] that also says how the call ended.

use std::time::Duration;

use crate::{CallState, RetryError, StopReason};

/// A retried call's result together with how it ended: made by
/// [`Retry::report`](super::Retry::report).
///
/// The plain result cannot tell a success from a retried `Ok` value that
/// ran out of attempts (an HTTP 503 retried until the attempts were spent
/// comes back as `Ok(503)`); [`stop`](Self::stop) can: it is `None` only
/// when the classifier judged the last outcome a success.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::VirtualClock;
/// use steadfast::{Attempt, Backoff, BlockingRetryable, RetryPolicy, StopReason, Verdict};
///
/// let policy = RetryPolicy::builder()
///     .backoff(Backoff::constant(Duration::from_millis(200)).build()?)
///     .max_attempts(3)
///     .build()?;
/// let report = (|_: Attempt| Ok::<u16, std::io::Error>(503))
///     .retry_blocking(&policy)
///     .classify(|r: &Result<u16, std::io::Error>| match r {
///         Ok(503) | Err(_) => Verdict::Retry,
///         Ok(_) => Verdict::Success,
///     })
///     .clock(VirtualClock::new())
///     .report()
///     .call();
/// assert_eq!(report.result.as_ref().ok(), Some(&503)); // the last response, as before
/// assert_eq!(report.stop, Some(StopReason::Exhausted)); // but retries ran out
/// assert_eq!(report.attempts, 3);
/// assert_eq!(report.waited, Duration::from_millis(400));
/// assert!(!report.succeeded());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Report<T, E> {
    /// What the plain executor returns: the value, or why the call failed.
    pub result: Result<T, RetryError<E>>,
    /// Attempts made, counting the first (and one cut off by the deadline
    /// or a cancellation); 0 when a control refused the call.
    pub attempts: u32,
    /// Why the executor stopped retrying: `None` when the classifier judged
    /// the last outcome a success. `Some` with an `Ok` result means the call
    /// gave up on a retried value, which is returned as the last response.
    pub stop: Option<StopReason>,
    /// The sum of the waits between attempts, as decided (a wait cut short
    /// by a cancellation counts in full).
    pub waited: Duration,
}

impl<T, E> Report<T, E> {
    /// Whether the call succeeded: the classifier called the last outcome a
    /// success (so the result is `Ok`).
    #[must_use]
    pub fn succeeded(&self) -> bool {
        self.stop.is_none()
    }

    /// The plain result, dropping the rest of the report.
    ///
    /// # Errors
    /// The [`RetryError`] of a call that failed.
    pub fn into_result(self) -> Result<T, RetryError<E>> {
        self.result
    }
}

/// How a call ended, as the executors see it; what a [`Report`] is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ending {
    pub(crate) attempts: u32,
    pub(crate) stop: Option<StopReason>,
    pub(crate) waited: Duration,
}

impl Ending {
    /// A call whose first attempt succeeded.
    pub(crate) const FIRST_SUCCESS: Self = Self {
        attempts: 1,
        stop: None,
        waited: Duration::ZERO,
    };

    /// A call that ended after `call`'s attempts and waits, stopping for
    /// `stop` (`None`: a success).
    pub(crate) fn of_call(call: &CallState, stop: Option<StopReason>) -> Self {
        Self {
            attempts: call.attempts(),
            stop,
            waited: call.waited(),
        }
    }

    /// A call that ended before it had per-call state: a success at the
    /// first attempt, or the error says the rest.
    pub(crate) fn of<T, E>(result: &Result<T, RetryError<E>>) -> Self {
        match result {
            Ok(_) => Self::FIRST_SUCCESS,
            Err(e) => Self {
                attempts: e.attempts(),
                stop: Some(e.reason()),
                waited: Duration::ZERO,
            },
        }
    }
}

/// A call's result and how it ended, as the executors pass them up.
pub(crate) type Ended<T, E> = (Result<T, RetryError<E>>, Ending);

/// A call that ended before it had per-call state, with its ending.
pub(crate) fn ended_early<T, E>(result: Result<T, RetryError<E>>) -> Ended<T, E> {
    let ending = Ending::of(&result);
    (result, ending)
}

pub(crate) mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Plain {}
    impl Sealed for super::Reported {}
}

/// What an executor's output is: the plain result ([`Plain`], the default)
/// or a [`Report`] ([`Reported`], from [`Retry::report`](super::Retry::report)).
/// Sealed: the two implementations are all there is.
pub trait Finish<T, E>: sealed::Sealed {
    /// The executor's output.
    type Output;

    /// The output for `result`; `ending` is asked only when needed, so the
    /// plain form costs nothing on any path.
    #[doc(hidden)]
    #[allow(private_bounds)]
    fn finish(result: Result<T, RetryError<E>>, ending: impl FnOnce() -> Ending) -> Self::Output;

    /// This output from a full report: its result for [`Plain`], itself
    /// for [`Reported`]. For an executor built on the core's that runs
    /// reported and hands its caller the form the caller chose.
    ///
    /// ```
    /// use steadfast::retry::{Finish, Plain, Report};
    /// fn plain<T, E>(report: Report<T, E>) -> Result<T, steadfast::RetryError<E>> {
    ///     <Plain as Finish<T, E>>::from_report(report)
    /// }
    /// ```
    fn from_report(report: Report<T, E>) -> Self::Output;

    /// The output of a call whose first attempt succeeded: the value for
    /// [`Plain`], a report of one attempt for [`Reported`]. For an executor
    /// that makes a lean first attempt itself (see
    /// [`Retry::after_first_attempt`](super::Retry::after_first_attempt)).
    ///
    /// ```
    /// use steadfast::retry::{Finish, Reported};
    /// let report = <Reported as Finish<u32, ()>>::first_success(7);
    /// assert_eq!((report.attempts, report.stop, report.result.ok()), (1, None, Some(7)));
    /// ```
    #[inline]
    fn first_success(value: T) -> Self::Output
    where
        Self: Sized,
    {
        Self::finish(Ok(value), || Ending::FIRST_SUCCESS)
    }
}

/// The default output: the call's `Result` alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Plain;

/// The output of [`Retry::report`](super::Retry::report): a [`Report`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reported;

impl<T, E> Finish<T, E> for Plain {
    type Output = Result<T, RetryError<E>>;
    #[inline(always)]
    #[allow(private_bounds)]
    fn finish(result: Result<T, RetryError<E>>, _: impl FnOnce() -> Ending) -> Self::Output {
        result
    }

    #[inline]
    fn from_report(report: Report<T, E>) -> Self::Output {
        report.result
    }
}

impl<T, E> Finish<T, E> for Reported {
    type Output = Report<T, E>;
    #[inline]
    #[allow(private_bounds)]
    fn finish(result: Result<T, RetryError<E>>, ending: impl FnOnce() -> Ending) -> Report<T, E> {
        let Ending {
            attempts,
            stop,
            waited,
        } = ending();
        Report {
            result,
            attempts,
            stop,
            waited,
        }
    }

    #[inline]
    fn from_report(report: Report<T, E>) -> Report<T, E> {
        report
    }
}
