//! The server side: a cancellation signal that fires when an incoming
//! request's deadline passes.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Deadline;
use super::timeout::CancelCause;
use crate::cancel::{CancelToken, Cancelled};
use crate::clock::AsyncClock;

/// A future that cancels `token` when `deadline` passes on `clock`, the timer
/// behind a request's cancellation signal (Go's `ctx.Done()`).
///
/// Drive it next to the handler (spawn it, or select on it). It ends early,
/// with [`CancelCause::Cancelled`], when the token is cancelled by someone
/// else, so a spawned timer never outlives the request; it ends with
/// [`CancelCause::DeadlineExceeded`] after cancelling the token itself. With
/// no deadline (`None`) only the token ends it.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{CancelToken, Deadline};
/// use steadfast::clock::{Clock, VirtualClock};
/// use steadfast::deadline::CancelCause;
/// use steadfast::deadline;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let clock = VirtualClock::new();
/// let token = CancelToken::new();
/// let d = Deadline::after(clock.now(), Duration::from_millis(300));
/// let cause = deadline::cancel_at(clock.clone(), Some(d), token.clone()).await;
/// assert_eq!(cause, CancelCause::DeadlineExceeded);
/// assert!(token.is_cancelled());
/// assert_eq!(clock.elapsed(), Duration::from_millis(300));
/// # }
/// ```
pub fn cancel_at<C: AsyncClock>(
    clock: C,
    deadline: Option<Deadline>,
    token: CancelToken,
) -> CancelAt<C> {
    CancelAt {
        cancelled: token.cancelled(),
        token,
        clock,
        deadline,
        sleep: None,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`cancel_at`].
    #[must_use = "the token is cancelled only while this future is polled"]
    pub struct CancelAt<C: AsyncClock> {
        token: CancelToken,
        cancelled: Cancelled,
        clock: C,
        deadline: Option<Deadline>,
        #[pin]
        sleep: Option<C::Sleep>,
    }
}

impl<C: AsyncClock> CancelAt<C> {
    /// The token this timer cancels.
    #[must_use]
    pub fn token(&self) -> &CancelToken {
        &self.token
    }

    /// The deadline at which it cancels.
    #[must_use]
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }
}

impl<C: AsyncClock> fmt::Debug for CancelAt<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelAt")
            .field("token", &self.token)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<C: AsyncClock> Future for CancelAt<C> {
    type Output = CancelCause;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CancelCause> {
        let mut this = self.project();
        if Pin::new(&mut *this.cancelled).poll(cx).is_ready() {
            return Poll::Ready(CancelCause::classify(*this.deadline, this.clock.now()));
        }
        let Some(deadline) = *this.deadline else {
            return Poll::Pending;
        };
        if this.sleep.is_none() {
            let left = deadline.remaining(this.clock.now());
            if left.is_zero() {
                this.token.cancel();
                return Poll::Ready(CancelCause::DeadlineExceeded);
            }
            this.sleep.set(Some(this.clock.sleep(left)));
        }
        let fired = this
            .sleep
            .as_pin_mut()
            .is_some_and(|sleep| sleep.poll(cx).is_ready());
        if fired {
            this.token.cancel();
            Poll::Ready(CancelCause::DeadlineExceeded)
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;
    use std::time::Duration;

    use super::*;
    use crate::clock::{Clock, VirtualClock};

    #[test]
    fn fires_exactly_at_the_deadline() {
        let clock = VirtualClock::manual();
        let token = CancelToken::new();
        let d = Deadline::after(clock.now(), Duration::from_millis(50));
        let mut timer = Box::pin(cancel_at(clock.clone(), Some(d), token.clone()));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(timer.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(49));
        assert!(timer.as_mut().poll(&mut cx).is_pending());
        assert!(!token.is_cancelled());
        clock.advance(Duration::from_millis(1));
        assert_eq!(
            timer.as_mut().poll(&mut cx),
            Poll::Ready(CancelCause::DeadlineExceeded)
        );
        assert!(token.is_cancelled());
    }

    #[test]
    fn ends_early_when_cancelled_by_someone_else() {
        let clock = VirtualClock::manual();
        let token = CancelToken::new();
        let d = Deadline::after(clock.now(), Duration::from_secs(50));
        let mut timer = Box::pin(cancel_at(clock.clone(), Some(d), token.clone()));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(timer.as_mut().poll(&mut cx).is_pending());
        token.cancel();
        assert_eq!(
            timer.as_mut().poll(&mut cx),
            Poll::Ready(CancelCause::Cancelled)
        );
        drop(timer);
        assert_eq!(clock.next_wake(), None, "the timer's sleep is gone");
    }

    #[test]
    fn already_expired_cancels_at_once() {
        let clock = VirtualClock::manual();
        let token = CancelToken::new();
        let d = Deadline::after(clock.now(), Duration::ZERO);
        let mut timer = Box::pin(cancel_at(clock.clone(), Some(d), token.clone()));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(
            timer.as_mut().poll(&mut cx),
            Poll::Ready(CancelCause::DeadlineExceeded)
        );
        assert!(token.is_cancelled());
    }

    #[test]
    fn no_deadline_waits_for_the_token_only() {
        let clock = VirtualClock::manual();
        let token = CancelToken::new();
        let mut timer = Box::pin(cancel_at(clock.clone(), None, token.clone()));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(timer.as_mut().poll(&mut cx).is_pending());
        assert_eq!(clock.next_wake(), None);
        clock.advance(Duration::from_secs(3600));
        assert!(timer.as_mut().poll(&mut cx).is_pending());
        token.cancel();
        assert_eq!(
            timer.as_mut().poll(&mut cx),
            Poll::Ready(CancelCause::Cancelled)
        );
    }
}
