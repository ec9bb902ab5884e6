use std::fmt;
use std::future::{Future, Ready, ready};
use std::time::{Duration, Instant};

use crate::policy::CallState;

/// What a notify hook hears before each wait: which attempt failed, how,
/// how long the executor is about to wait, and how much time the call has
/// left. `#[non_exhaustive]`, so it can grow without breaking hooks.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::VirtualClock;
/// use steadfast::retry::{BlockingRetryable, Notice};
/// use steadfast::{Attempt, Backoff, RetryPolicy};
///
/// let policy = RetryPolicy::builder()
///     .backoff(Backoff::constant(Duration::from_secs(1)).build()?)
///     .max_attempts(3)
///     .max_elapsed(Duration::from_secs(10))
///     .build()?;
/// let mut log = Vec::new();
/// let _ = (|_: Attempt| Err::<(), _>("refused"))
///     .retry_blocking(&policy)
///     .clock(VirtualClock::new())
///     .notify(|n: &Notice<_>| log.push((n.attempt, n.error.copied(), n.wait, n.time_left)))
///     .call();
/// let s = Duration::from_secs;
/// assert_eq!(log, [(1, Some("refused"), s(1), Some(s(10))), (2, Some("refused"), s(1), Some(s(9)))]);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[non_exhaustive]
pub struct Notice<'a, E> {
    /// The number of the attempt that failed (1 for the first).
    pub attempt: u32,
    /// Its error; `None` when an `Ok` value is being retried (an HTTP 503,
    /// say) or the attempt timed out.
    pub error: Option<&'a E>,
    /// The wait about to start before the next attempt.
    pub wait: Duration,
    /// The call's time left as the wait starts (`None`: no deadline). The
    /// executors never start a wait that ends at or past the deadline, so
    /// `wait < time_left` whenever this is `Some`.
    pub time_left: Option<Duration>,
    /// When the wait starts, on the executor's clock.
    pub at: Instant,
}

impl<'a, E> Notice<'a, E> {
    /// The notice for a call about to wait `wait` after an attempt that
    /// failed with `error`, at `now`.
    pub(crate) fn new(
        call: &CallState,
        error: Option<&'a E>,
        wait: Duration,
        now: Instant,
    ) -> Self {
        Self {
            attempt: call.attempts(),
            error,
            wait,
            time_left: call.deadline().map(|d| d.remaining(now)),
            at: now,
        }
    }
}

impl<E> Clone for Notice<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for Notice<'_, E> {}

impl<E: fmt::Debug> fmt::Debug for Notice<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notice")
            .field("attempt", &self.attempt)
            .field("error", &self.error)
            .field("wait", &self.wait)
            .field("time_left", &self.time_left)
            .finish_non_exhaustive()
    }
}

/// A hook called before each wait, with a [`Notice`] of the attempt that
/// failed, its error and the wait about to start.
///
/// `()` is the hook that does nothing; [`NotifyFn`] wraps a closure and
/// [`NotifyAsync`] a closure returning a future, which the async executor
/// awaits before sleeping.
pub trait Notify<E> {
    /// What the hook returns; the async executor awaits it.
    type Future: Future<Output = ()>;

    /// Called once before each wait.
    fn notify(&mut self, notice: &Notice<'_, E>) -> Self::Future;
}

impl<E> Notify<E> for () {
    type Future = Ready<()>;
    #[inline]
    fn notify(&mut self, _: &Notice<'_, E>) -> Ready<()> {
        ready(())
    }
}

/// A synchronous notify hook from a closure; made by `.notify(..)`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::retry::{Notice, NotifyFn};
/// use steadfast::RetryPolicy;
/// let mut seen = Vec::new();
/// let hook = NotifyFn::new(|n: &Notice<i32>| seen.push((n.attempt, n.error.copied(), n.wait)));
/// # let _ = hook;
/// ```
#[derive(Clone, Copy)]
pub struct NotifyFn<F>(F);

impl<F> NotifyFn<F> {
    /// A hook that calls `f`.
    pub const fn new(f: F) -> Self {
        Self(f)
    }
}

impl<F> fmt::Debug for NotifyFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NotifyFn(..)")
    }
}

impl<E, F: FnMut(&Notice<'_, E>)> Notify<E> for NotifyFn<F> {
    type Future = Ready<()>;
    #[inline]
    fn notify(&mut self, notice: &Notice<'_, E>) -> Ready<()> {
        (self.0)(notice);
        ready(())
    }
}

/// An asynchronous notify hook: the closure returns a future that the async
/// executor awaits before it sleeps. Made by `.notify_async(..)`.
///
/// ```
/// use steadfast::retry::{Notice, NotifyAsync};
/// let hook = NotifyAsync::new(|n: &Notice<std::io::Error>| {
///     let (attempt, wait) = (n.attempt, n.wait); // the future cannot borrow the notice
///     async move { tracing::info!(attempt, ?wait, "retrying") }
/// });
/// # let _ = hook;
/// ```
#[derive(Clone, Copy)]
pub struct NotifyAsync<F>(F);

impl<F> NotifyAsync<F> {
    /// A hook that calls `f` and awaits what it returns.
    pub const fn new(f: F) -> Self {
        Self(f)
    }
}

impl<F> fmt::Debug for NotifyAsync<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NotifyAsync(..)")
    }
}

impl<E, F, Fut> Notify<E> for NotifyAsync<F>
where
    F: FnMut(&Notice<'_, E>) -> Fut,
    Fut: Future<Output = ()>,
{
    type Future = Fut;
    #[inline]
    fn notify(&mut self, notice: &Notice<'_, E>) -> Fut {
        (self.0)(notice)
    }
}
