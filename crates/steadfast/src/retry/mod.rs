//! The executors: run an operation, ask the policy, wait, run it again.
//!
//! Two executors drive the same [`RetryPolicy`] value through
//! [`RetryPolicy::decide`]; neither holds any retry logic of its own:
//!
//! - [`Retryable::retry`]: async, a future that works on any runtime through
//!   an injected [`AsyncClock`](crate::AsyncClock) (tokio's by default);
//! - [`BlockingRetryable::retry_blocking`]: a loop that sleeps the thread.
//!
//! Both read like English and share the options `when`, `classify`,
//! `notify`, `cancel_on`, `deadline`, `clock` and `name`; `report` makes
//! either give a [`Report`] (attempts, why retrying stopped, time waited)
//! beside the result:
//!
//! ```
//! use std::time::Duration;
//! use steadfast::retry::BlockingRetryable;
//! use steadfast::{Attempt, RetryPolicy};
//! use steadfast::clock::VirtualClock;
//!
//! let policy = RetryPolicy::builder().max_attempts(4).build()?;
//! let mut calls = 0;
//! let value = (|attempt: Attempt| {
//!     calls += 1;
//!     if attempt.number < 3 { Err("connection refused") } else { Ok(attempt.number) }
//! })
//! .retry_blocking(&policy)
//! .clock(VirtualClock::new()) // virtual time: the waits take no real time
//! .call();
//! assert_eq!(value, Ok(3));
//! assert_eq!(calls, 3);
//! # Ok::<(), steadfast::ConfigError>(())
//! ```
//!
//! # The success path costs nothing
//! When the first attempt of a *lean* call succeeds (a policy with no retry
//! control and no time limit, and no deadline set; see
//! [`RetryPolicy::is_lean`]), neither executor allocates, reads a clock or
//! draws a random number: the call costs the operation, one check of the
//! policy and one classification. A time limit needs the clock read once at
//! the start; in the async executor a call that is not lean also makes its
//! running stage, one allocation (the blocking executor keeps it on the
//! stack).

mod blocking;
mod builder;
mod future;
mod notify;
mod operation;
pub(crate) mod report;

use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(not(any(feature = "tokio", feature = "futures-timer", feature = "async-io")))]
pub use builder::NoClock;
pub use builder::{DefaultClock, Retry};
pub use future::RetryFuture;
pub use notify::{Notice, Notify, NotifyAsync, NotifyFn};
pub use operation::Operation;
pub use report::{Finish, Plain, Report, Reported};

use crate::deadline::CancelCause;
use crate::hedge::AttemptSet;
use crate::{CallState, Deadline, RetryError, RetryPolicy, Schedule, StopReason};

/// What the operation knows about the attempt it is making.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The attempt's number, from 1 for the first.
    pub number: u32,
    /// The instant this attempt must be done by (not a length: see
    /// [`time_left`](Self::time_left)): the earliest of the call's deadline
    /// (itself the earliest of the ambient one, the caller's and
    /// `max_elapsed`) and the per-attempt timeout, if any is set. Pass it on
    /// to the callee (e.g. as a `grpc-timeout`), or stop early yourself. The
    /// executors also make it the ambient deadline
    /// ([`deadline::current`](crate::deadline::current)) while the attempt
    /// runs, so calls made inside it inherit it.
    pub deadline: Option<Deadline>,
    /// The other attempts of the same call still in flight when this one
    /// starts: always empty for a retry (attempts run one after another), the
    /// earlier copies still running for a [hedged](crate::hedge) call. A
    /// caller or load balancer can use it to send this copy elsewhere.
    pub in_flight: AttemptSet,
}

impl Attempt {
    /// The attempt `number` with no deadline.
    ///
    /// ```
    /// assert!(steadfast::Attempt::new(1).is_first());
    /// ```
    #[must_use]
    pub const fn new(number: u32) -> Self {
        Self {
            number,
            deadline: None,
            in_flight: AttemptSet::new(),
        }
    }

    /// Whether this is the call's first attempt.
    #[must_use]
    pub const fn is_first(&self) -> bool {
        self.number == 1
    }

    /// The time this attempt has left at `now` (read on the executor's
    /// clock), or `None` when it has no deadline. [`deadline`](Self::deadline)
    /// is an instant, not a length: this is the length, ready to send on as a
    /// timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::{Attempt, Deadline};
    ///
    /// let clock = VirtualClock::new();
    /// let mut attempt = Attempt::new(1);
    /// assert_eq!(attempt.time_left(clock.now()), None);
    /// attempt.deadline = Some(Deadline::after(clock.now(), Duration::from_millis(800)));
    /// clock.advance(Duration::from_millis(300));
    /// assert_eq!(attempt.time_left(clock.now()), Some(Duration::from_millis(500)));
    /// ```
    #[must_use]
    pub fn time_left(&self, now: Instant) -> Option<Duration> {
        self.deadline.map(|d| d.remaining(now))
    }
}

/// Anything that lends a [`RetryPolicy`]: the policy itself, a reference, or
/// an `Arc` (for `'static` futures).
pub trait AsPolicy {
    /// The policy's schedule type.
    type Schedule: Schedule;
    /// The policy.
    fn as_policy(&self) -> &RetryPolicy<Self::Schedule>;
}

impl<S: Schedule> AsPolicy for RetryPolicy<S> {
    type Schedule = S;
    #[inline]
    fn as_policy(&self) -> &RetryPolicy<S> {
        self
    }
}

impl<S: Schedule> AsPolicy for &RetryPolicy<S> {
    type Schedule = S;
    #[inline]
    fn as_policy(&self) -> &RetryPolicy<S> {
        self
    }
}

impl<S: Schedule> AsPolicy for Arc<RetryPolicy<S>> {
    type Schedule = S;
    #[inline]
    fn as_policy(&self) -> &RetryPolicy<S> {
        self
    }
}

/// Adds [`retry`](Retryable::retry) to closures that return futures, and to
/// every other [`Operation`].
///
/// ```
/// use steadfast::retry::Retryable;
/// use steadfast::{Attempt, RetryPolicy};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::builder().max_attempts(3).build()?;
/// let n = (|attempt: Attempt| async move {
///     if attempt.is_first() { Err(std::io::Error::other("reset")) } else { Ok(attempt.number) }
/// })
/// .retry(&policy)
/// .name("fetch")
/// .await?;
/// assert_eq!(n, 2);
/// # Ok(())
/// # }
/// ```
pub trait Retryable<Fut>: Sized {
    /// Retries this operation under `policy`; configure, then `.await`.
    fn retry<P: AsPolicy>(self, policy: P) -> Retry<Self, P>;
}

/// A blocking retry: the same builder, with the system clock.
pub type BlockingRetry<F, P, K = crate::AnyError, N = ()> =
    Retry<F, P, K, N, crate::clock::SystemClock>;

impl<F> Retryable<F::Future> for F
where
    F: Operation,
{
    #[inline]
    fn retry<P: AsPolicy>(self, policy: P) -> Retry<Self, P> {
        Retry::new(self, policy, DefaultClock::default())
    }
}

/// Adds [`retry_blocking`](BlockingRetryable::retry_blocking) to closures
/// that return a `Result`.
///
/// ```
/// use steadfast::retry::BlockingRetryable;
/// use steadfast::{Attempt, RetryPolicy, StopReason};
/// use steadfast::clock::VirtualClock;
///
/// let policy = RetryPolicy::builder().max_attempts(2).build()?;
/// let err = (|_: Attempt| Err::<(), _>("boom"))
///     .retry_blocking(&policy)
///     .clock(VirtualClock::new())
///     .name("flaky")
///     .call()
///     .unwrap_err();
/// assert_eq!(err.reason(), StopReason::Exhausted);
/// assert_eq!(err.attempts(), 2);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub trait BlockingRetryable<T, E>: Sized {
    /// Retries this operation under `policy`; configure, then `.call()`.
    fn retry_blocking<P: AsPolicy>(self, policy: P) -> BlockingRetry<Self, P>;
}

impl<F, T, E> BlockingRetryable<T, E> for F
where
    F: FnMut(Attempt) -> Result<T, E>,
{
    #[inline]
    fn retry_blocking<P: AsPolicy>(self, policy: P) -> BlockingRetry<Self, P> {
        Retry::new(self, policy, crate::clock::SystemClock)
    }
}

/// Options both executors share.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallOptions {
    pub(crate) cancel: Option<crate::CancelToken>,
    pub(crate) name: Option<&'static str>,
    pub(crate) deadline: Option<Deadline>,
}

/// Ends a call that will not go on: the last `Ok` value if the last attempt
/// returned one (a response that was retried, like an HTTP 503), otherwise a
/// [`RetryError`] with the last error.
pub(crate) fn conclude<T, E>(
    last: Option<Result<T, E>>,
    reason: StopReason,
    state: &CallState,
    now: Instant,
    name: Option<&'static str>,
    timed_out: bool,
) -> Result<T, RetryError<E>> {
    let (last_error, timed_out) = match last {
        Some(Ok(value)) if !timed_out => return Ok(value),
        Some(Ok(_)) | None => (None, timed_out),
        Some(Err(e)) => (Some(e), timed_out),
    };
    tracing::debug!(
        attempts = state.attempts(),
        reason = reason.as_str(),
        name = name.unwrap_or("operation"),
        "steadfast: giving up"
    );
    let mut err = RetryError::new(reason, last_error, state.attempts(), state.elapsed(now))
        .with_refused_by(state.refused_by())
        .with_timed_out(timed_out);
    if let Some(name) = name {
        err = err.with_name(name);
    }
    Err(err)
}

/// The reason for a stop caused by cancellation: `Deadline` when the
/// deadline has passed too (the cancellation was the deadline's doing),
/// `Cancelled` otherwise.
pub(crate) fn cancel_reason(state: &CallState, now: Instant) -> StopReason {
    match CancelCause::classify(state.deadline(), now) {
        CancelCause::DeadlineExceeded => StopReason::Deadline,
        CancelCause::Cancelled => StopReason::Cancelled,
    }
}

#[cfg(test)]
mod tests;
