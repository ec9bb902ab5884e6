//! The executors: run an operation, ask the policy, wait, run it again.
//!
//! Two executors drive the same [`RetryPolicy`] value through
//! [`RetryPolicy::decide`]; neither holds any retry logic of its own:
//!
//! - [`Retryable::retry`]: async, a future that works on any runtime through
//!   an injected [`AsyncClock`](crate::clock::AsyncClock) (tokio's by default);
//! - [`BlockingRetryable::retry_blocking`]: a loop that sleeps the thread.
//!
//! Both read like English and share the options `when`, `classify`,
//! `notify`, `cancel_on`, `deadline`, `clock` and `name`; `report` makes
//! either give a [`Report`](crate::call::Report) (attempts, why retrying stopped, time waited)
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
mod connect;
mod core;
mod future;
mod notify;
mod stage;

use std::time::Instant;

pub use builder::Retry;
pub use connect::{ConnectFailure, Connector, ConnectorBuilder};
pub use future::RetryFuture;
pub use notify::{Notice, Notify, NotifyAsync, NotifyFn};

use crate::backoff::Schedule;
use crate::call::{Attempt, Lend, Operation, Refused, RetryError, StopReason};
use crate::cancel::CancelToken;
use crate::classify::AnyError;
use crate::clock::{DefaultClock, SystemClock};
use crate::deadline::{CancelCause, Deadline};
use crate::policy::{CallState, RetryPolicy};
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
    fn retry<P, S>(self, policy: P) -> Retry<Self, P>
    where
        P: Lend<Policy = RetryPolicy<S>>,
        S: Schedule;
}

/// A blocking retry: the same builder, with the system clock.
pub type BlockingRetry<F, P, K = AnyError, N = ()> = Retry<F, P, K, N, SystemClock>;

impl<F> Retryable<F::Future> for F
where
    F: Operation,
{
    #[inline]
    fn retry<P, S>(self, policy: P) -> Retry<Self, P>
    where
        P: Lend<Policy = RetryPolicy<S>>,
        S: Schedule,
    {
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
    fn retry_blocking<P, S>(self, policy: P) -> BlockingRetry<Self, P>
    where
        P: Lend<Policy = RetryPolicy<S>>,
        S: Schedule;
}

impl<F, T, E> BlockingRetryable<T, E> for F
where
    F: FnMut(Attempt) -> Result<T, E>,
{
    #[inline]
    fn retry_blocking<P, S>(self, policy: P) -> BlockingRetry<Self, P>
    where
        P: Lend<Policy = RetryPolicy<S>>,
        S: Schedule,
    {
        Retry::new(self, policy, SystemClock)
    }
}

/// Options both executors share.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallOptions {
    pub(crate) cancel: Option<CancelToken>,
    pub(crate) name: Option<&'static str>,
    pub(crate) deadline: Option<Deadline>,
}

/// Ends a call that will not go on: the last `Ok` value if the last attempt
/// returned one (a response that was retried, like an HTTP 503), otherwise a
/// [`RetryError`] with the last error. When the last attempt was cut off by
/// its timeout (`timed_out`), `last` is an earlier attempt's outcome: the
/// error then says the attempt timed out and carries no error, so that it
/// describes the last attempt, not one before it.
pub(crate) fn conclude<T, E>(
    last: Option<Result<T, E>>,
    reason: StopReason,
    state: &CallState,
    now: Instant,
    name: Option<&'static str>,
    timed_out: bool,
) -> Result<T, RetryError<E>> {
    let last_error = match last {
        _ if timed_out => None,
        Some(Ok(value)) => return Ok(value),
        None => None,
        Some(Err(e)) => Some(e),
    };
    tracing::debug!(
        attempts = state.attempts(),
        reason = reason.as_str(),
        name = name.unwrap_or("operation"),
        "steadfast: giving up"
    );
    let mut err = RetryError::new(reason, last_error, state.attempts(), state.elapsed(now))
        .with_timed_out(timed_out)
        .with_tried(state.tried())
        .with_requeues(state.requeues());
    if let Some(by) = state.refused_by() {
        // The control refused a retry (the decision's own refusal).
        err = err.with_refusal(Refused::Control {
            by,
            retry_after: None,
        });
    }
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
