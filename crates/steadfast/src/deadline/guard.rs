//! The per-request guard a handler holds: its cancellation signal.

use std::time::Instant;

use super::Deadline;
use super::server::{CancelAt, cancel_at};
use super::timeout::CancelCause;
use crate::cancel::{CancelToken, Cancelled};
use crate::clock::AsyncClock;

/// The cancellation signal of one incoming request, held by its handler.
///
/// Its token is cancelled when the request's deadline passes (by the timer
/// from [`new`](Self::new) or `spawn`, feature `tokio`) **or when the guard is
/// dropped**. The second matters as much as the first: an HTTP server drops a
/// handler's future when the client goes away, and dropping the guard then
/// stops every piece of work that was given a clone of the token (background
/// tasks, downstream calls), because no one waits for it any more. It also
/// fires when the handler returns normally, like Go's `defer cancel()`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{Clock, VirtualClock};
/// use steadfast::deadline::{CancelCause, DeadlineGuard};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let clock = VirtualClock::new();
/// let d = Deadline::after(clock.now(), Duration::from_secs(2));
/// let (guard, timer) = DeadlineGuard::new(clock.clone(), Some(d));
/// let token = guard.token().clone();
/// assert_eq!(timer.await, CancelCause::DeadlineExceeded); // auto-advancing clock
/// assert!(token.is_cancelled());
/// assert_eq!(guard.cause(clock.now()), CancelCause::DeadlineExceeded);
/// # }
/// ```
#[derive(Debug)]
pub struct DeadlineGuard {
    token: CancelToken,
    deadline: Option<Deadline>,
}

impl DeadlineGuard {
    /// A guard for a request with `deadline` (`None`: no deadline, only the
    /// drop cancels), and the timer that fires it, for the caller to drive
    /// on any runtime (spawn it, or select on it next to the handler).
    ///
    /// ```
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::deadline::DeadlineGuard;
    ///
    /// let (guard, _timer) = DeadlineGuard::new(VirtualClock::new(), None);
    /// let token = guard.token().clone();
    /// drop(guard);
    /// assert!(token.is_cancelled());
    /// ```
    pub fn new<C: AsyncClock>(clock: C, deadline: Option<Deadline>) -> (Self, CancelAt<C>) {
        let token = CancelToken::new();
        let timer = cancel_at(clock, deadline, token.clone());
        (Self { token, deadline }, timer)
    }

    /// A guard whose timer runs as a tokio task. The task ends when the
    /// deadline passes or when the guard is dropped, whichever is first; with
    /// no deadline, no task is spawned.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, as `tokio::spawn` does.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, TokioClock};
    /// use steadfast::deadline::DeadlineGuard;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let clock = TokioClock;
    /// let guard = DeadlineGuard::spawn(clock, Some(Deadline::from_now(&clock, Duration::from_secs(1))));
    /// guard.cancelled().await; // fires after one (paused) second
    /// assert!(guard.is_cancelled());
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn spawn<C: AsyncClock>(clock: C, deadline: Option<Deadline>) -> Self {
        let (guard, timer) = Self::new(clock, deadline);
        if deadline.is_some() {
            drop(tokio::spawn(timer));
        }
        guard
    }

    /// A guard around an existing token (for example a child of the
    /// server's shutdown token), cancelled when the guard drops; no timer.
    ///
    /// ```
    /// let token = steadfast::CancelToken::new();
    /// drop(steadfast::deadline::DeadlineGuard::from_token(token.clone(), None));
    /// assert!(token.is_cancelled());
    /// ```
    #[must_use]
    pub fn from_token(token: CancelToken, deadline: Option<Deadline>) -> Self {
        Self { token, deadline }
    }

    /// The request's token: give clones to the work done for the request.
    #[must_use]
    pub fn token(&self) -> &CancelToken {
        &self.token
    }

    /// The request's deadline.
    #[must_use]
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// Whether the request has been cancelled (deadline passed, or guard
    /// dropped somewhere a clone of the token is watched).
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// A future that completes when the request is cancelled.
    #[must_use]
    pub fn cancelled(&self) -> Cancelled {
        self.token.cancelled()
    }

    /// Why the request would stop if cancelled at `now`: see [`CancelCause`].
    #[must_use]
    pub fn cause(&self, now: Instant) -> CancelCause {
        CancelCause::classify(self.deadline, now)
    }
}

impl Drop for DeadlineGuard {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::*;
    use crate::clock::{Clock, VirtualClock};

    #[test]
    fn deadline_fires_the_token_on_virtual_time() {
        let clock = VirtualClock::manual();
        let d = Deadline::after(clock.now(), Duration::from_millis(200));
        let (guard, timer) = DeadlineGuard::new(clock.clone(), Some(d));
        let mut timer = Box::pin(timer);
        let mut cx = Context::from_waker(Waker::noop());
        let mut done = Box::pin(guard.cancelled());
        assert!(timer.as_mut().poll(&mut cx).is_pending());
        assert!(done.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(200));
        assert_eq!(
            timer.as_mut().poll(&mut cx),
            Poll::Ready(CancelCause::DeadlineExceeded)
        );
        assert!(done.as_mut().poll(&mut cx).is_ready());
        assert_eq!(guard.cause(clock.now()), CancelCause::DeadlineExceeded);
    }

    #[test]
    fn dropping_the_guard_cancels_and_ends_the_timer() {
        let clock = VirtualClock::manual();
        let d = Deadline::after(clock.now(), Duration::from_secs(10));
        let (guard, timer) = DeadlineGuard::new(clock.clone(), Some(d));
        let token = guard.token().clone();
        let mut timer = Box::pin(timer);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(timer.as_mut().poll(&mut cx).is_pending());
        drop(guard);
        assert!(token.is_cancelled());
        assert_eq!(
            timer.as_mut().poll(&mut cx),
            Poll::Ready(CancelCause::Cancelled)
        );
        assert_eq!(
            CancelCause::classify(Some(d), clock.now()),
            CancelCause::Cancelled
        );
    }

    #[cfg(feature = "tokio")]
    #[tokio::test(start_paused = true)]
    async fn spawned_timer_fires_on_paused_tokio_time() {
        let clock = crate::clock::TokioClock;
        let d = Deadline::from_now(&clock, Duration::from_millis(750));
        let guard = DeadlineGuard::spawn(clock, Some(d));
        let start = clock.now();
        guard.cancelled().await;
        assert_eq!(clock.now() - start, Duration::from_millis(750));
        assert_eq!(guard.cause(clock.now()), CancelCause::DeadlineExceeded);
    }
}
