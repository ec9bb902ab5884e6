//! What an executor hands back: the result alone (the default), or a
//! [`Report`] that also says how the call ended.

use std::time::Duration;

use super::{EndpointId, HedgeStats, RetryError, StopReason};

/// A call's result together with how it ended: made by `.report()` on
/// either executor ([`Retry::report`](crate::retry::Retry::report),
/// [`Hedge::report`](crate::hedge::Hedge::report)). One type for both: a
/// hedged call's report also has its copies' [`HedgeStats`]
/// ([`hedge`](Self::hedge)).
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
///
/// A hedged call's report says what its copies did:
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
/// let stats = report.hedge.expect("a hedged call's report");
/// assert_eq!((stats.sent, stats.hedges(), stats.cancelled), (2, 1, 1));
/// assert_eq!(report.attempts, 2);
/// assert!(report.succeeded());
/// # Ok(())
/// # }
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
    /// by a cancellation counts in full). Zero for a hedged call, whose
    /// copies overlap rather than wait: see [`hedge`](Self::hedge).
    pub waited: Duration,
    /// What a hedged call did with its copies (sent, failed, cancelled, the
    /// winner, the time taken); `None` for a retried call.
    pub hedge: Option<HedgeStats>,
    /// Whether the call's [fallback](crate::fallback) answered: the call
    /// failed as [`stop`](Self::stop) says, and [`result`](Self::result)
    /// is the fallback's.
    pub fell_back: bool,
    /// The endpoint the last attempt went to, under a policy with an
    /// [endpoint set](crate::endpoint::Endpoints): for a success, the one
    /// that answered. `None` without a set, and for a hedged call (its
    /// copies overlap; each copy's endpoint is in its
    /// [`Attempt::endpoint`](crate::Attempt::endpoint)). A failed call's
    /// error lists every endpoint tried, in order
    /// ([`RetryError::endpoints`]).
    pub endpoint: Option<EndpointId>,
    /// Attempts that never reached a server and were sent again elsewhere
    /// without counting among [`attempts`](Self::attempts) (see
    /// [`Verdict::Unsent`](crate::Verdict::Unsent)).
    pub requeues: u32,
}

impl<T, E> Report<T, E> {
    /// Whether the call succeeded: the classifier called the last outcome a
    /// success (so the result is `Ok`).
    #[must_use]
    pub fn succeeded(&self) -> bool {
        self.stop.is_none()
    }

    /// The report of a call whose request could not be sent again, so it
    /// was sent once ([`RetryError::sent_once`]): a stop for spent attempts
    /// says [`StopReason::NotReplayable`], in the report and its error.
    ///
    /// ```
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::{Attempt, BlockingRetryable, RetryPolicy, StopReason};
    /// let once = RetryPolicy::builder().build()?.single_attempt();
    /// let report = (|_: Attempt| Err::<(), _>("reset"))
    ///     .retry_blocking(&once)
    ///     .clock(VirtualClock::new())
    ///     .report()
    ///     .call();
    /// assert_eq!(report.stop, Some(StopReason::Exhausted));
    /// let report = report.sent_once();
    /// assert_eq!(report.stop, Some(StopReason::NotReplayable));
    /// assert_eq!(report.result.unwrap_err().reason(), StopReason::NotReplayable);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn sent_once(mut self) -> Self {
        if self.stop == Some(StopReason::Exhausted) {
            self.stop = Some(StopReason::NotReplayable);
        }
        self.result = self.result.map_err(RetryError::sent_once);
        self
    }

    /// How the call ended, without its result.
    #[must_use]
    pub fn ending(&self) -> Ending {
        Ending {
            attempts: self.attempts,
            stop: self.stop,
            waited: self.waited,
            hedge: self.hedge,
            fell_back: self.fell_back,
            endpoint: self.endpoint,
            requeues: self.requeues,
        }
    }

    /// The plain result, dropping the rest of the report.
    ///
    /// # Errors
    /// The [`RetryError`] of a call that failed.
    pub fn into_result(self) -> Result<T, RetryError<E>> {
        self.result
    }
}

/// How a call ended, without its result: what a [`Report`] says beside
/// the result ([`Report::ending`]). For an integration that hands back a
/// response type of its own (an HTTP response, a gRPC response) and keeps
/// with it how the call went.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::VirtualClock;
/// use steadfast::{Attempt, Backoff, BlockingRetryable, RetryPolicy};
///
/// let policy = RetryPolicy::builder()
///     .backoff(Backoff::constant(Duration::from_millis(100)).build()?)
///     .build()?;
/// let report = (|a: Attempt| if a.number < 3 { Err("refused") } else { Ok(a.number) })
///     .retry_blocking(&policy)
///     .clock(VirtualClock::new())
///     .report()
///     .call();
/// let ending = report.ending();
/// assert!(ending.succeeded());
/// assert_eq!((ending.attempts, ending.waited, ending.hedges()), (3, Duration::from_millis(200), 0));
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Ending {
    /// Attempts made, counting the first (for a hedged call: copies sent).
    pub attempts: u32,
    /// Why the call stopped: `None` for a success (see [`Report::stop`]).
    pub stop: Option<StopReason>,
    /// The sum of the waits between attempts, as decided (see [`Report::waited`]).
    pub waited: Duration,
    /// What a hedged call did with its copies; `None` for a retried call.
    pub hedge: Option<HedgeStats>,
    /// Whether the call's fallback answered (see [`Report::fell_back`]).
    pub fell_back: bool,
    /// The endpoint the last attempt went to (see [`Report::endpoint`]).
    pub endpoint: Option<EndpointId>,
    /// Attempts requeued (see [`Report::requeues`]).
    pub requeues: u32,
}

impl Ending {
    /// Whether the call succeeded (the classifier called its last outcome
    /// a success).
    #[must_use]
    pub fn succeeded(&self) -> bool {
        self.stop.is_none()
    }

    /// Hedged copies sent beyond the first (0 for a retried call).
    #[must_use]
    pub fn hedges(&self) -> u32 {
        self.hedge.map_or(0, |h| h.hedges())
    }

    /// A call whose first attempt succeeded.
    pub(crate) const FIRST_SUCCESS: Self = Self {
        attempts: 1,
        stop: None,
        waited: Duration::ZERO,
        hedge: None,
        fell_back: false,
        endpoint: None,
        requeues: 0,
    };

    /// A call that ended before it had per-call state: a success at the
    /// first attempt, or the error says the rest.
    pub(crate) fn of<T, E>(result: &Result<T, RetryError<E>>) -> Self {
        match result {
            Ok(_) => Self::FIRST_SUCCESS,
            Err(e) => Self {
                attempts: e.attempts(),
                stop: Some(e.reason()),
                waited: Duration::ZERO,
                hedge: e.hedge_stats().copied(),
                fell_back: false,
                endpoint: e.last_endpoint_id(),
                requeues: 0,
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

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Plain {}
    impl Sealed for super::Reported {}
}

/// What an executor's output is: the plain result ([`Plain`], the default)
/// or a [`Report`] ([`Reported`], from `.report()`). The same two forms for
/// both executors. Sealed: the two implementations are all there is.
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
    /// use steadfast::call::{Finish, Plain, Report};
    /// fn plain<T, E>(report: Report<T, E>) -> Result<T, steadfast::RetryError<E>> {
    ///     <Plain as Finish<T, E>>::from_report(report)
    /// }
    /// ```
    fn from_report(report: Report<T, E>) -> Self::Output;

    /// The output of a call whose request could not be sent again, so it
    /// was sent once: a stop for spent attempts says
    /// [`StopReason::NotReplayable`] ([`RetryError::sent_once`],
    /// [`Report::sent_once`]), in either form.
    ///
    /// ```
    /// use steadfast::call::{Finish, Plain};
    /// use steadfast::{RetryError, StopReason};
    /// let out: Result<(), RetryError<&str>> =
    ///     Err(RetryError::new(StopReason::Exhausted, Some("reset"), 1, Default::default()));
    /// let out = <Plain as Finish<(), &str>>::sent_once(out);
    /// assert_eq!(out.unwrap_err().reason(), StopReason::NotReplayable);
    /// ```
    fn sent_once(output: Self::Output) -> Self::Output;

    /// The output of a call whose first attempt succeeded: the value for
    /// [`Plain`], a report of one attempt for [`Reported`]. For an executor
    /// that makes a lean first attempt itself (see
    /// [`Retry::after_first_attempt`](crate::retry::Retry::after_first_attempt)).
    ///
    /// ```
    /// use steadfast::call::{Finish, Reported};
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

/// The output of `.report()` on either executor: a [`Report`].
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

    #[inline]
    fn sent_once(output: Self::Output) -> Self::Output {
        output.map_err(RetryError::sent_once)
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
            hedge,
            fell_back,
            endpoint,
            requeues,
        } = ending();
        Report {
            result,
            attempts,
            stop,
            waited,
            hedge,
            fell_back,
            endpoint,
            requeues,
        }
    }

    #[inline]
    fn from_report(report: Report<T, E>) -> Report<T, E> {
        report
    }

    #[inline]
    fn sent_once(output: Report<T, E>) -> Report<T, E> {
        output.sent_once()
    }
}
