//! Running a future under a deadline, and telling a passed deadline apart
//! from a plain cancellation.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::Deadline;
use super::ambient::{WithDeadline, scope_async};
use crate::clock::AsyncClock;

/// The deadline passed before the work was done.
///
/// Distinct from a cancellation: see [`CancelCause`] for the rule that tells
/// the two apart.
///
/// ```
/// use steadfast::deadline::DeadlineExceeded;
/// let err: Box<dyn std::error::Error> = Box::new(DeadlineExceeded::new());
/// assert_eq!(err.to_string(), "deadline exceeded");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DeadlineExceeded {
    _private: (),
}

impl DeadlineExceeded {
    /// The error.
    #[must_use]
    pub const fn new() -> Self {
        Self { _private: () }
    }
}

impl fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline exceeded")
    }
}

impl std::error::Error for DeadlineExceeded {}

/// Why a call that was stopped from outside stopped.
///
/// The rule, for every executor: when a call fails as cancelled (its
/// [`CancelToken`](crate::cancel::CancelToken) fired, or its future was cut short)
/// and its deadline has passed by then, it reports
/// [`DeadlineExceeded`](CancelCause::DeadlineExceeded), not
/// [`Cancelled`](CancelCause::Cancelled): a token fired by a deadline timer,
/// or a parent that gave up because its own deadline passed, is a deadline,
/// and callers retry, log and alert on the two differently.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{Clock, VirtualClock};
/// use steadfast::deadline::CancelCause;
///
/// let clock = VirtualClock::new();
/// let d = Deadline::after(clock.now(), Duration::from_secs(1));
/// assert_eq!(CancelCause::classify(Some(d), clock.now()), CancelCause::Cancelled);
/// clock.sleep_blocking(Duration::from_secs(1));
/// assert_eq!(CancelCause::classify(Some(d), clock.now()), CancelCause::DeadlineExceeded);
/// assert_eq!(CancelCause::classify(None, clock.now()), CancelCause::Cancelled);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CancelCause {
    /// Stopped by someone, before any deadline passed.
    Cancelled,
    /// Stopped when (or after) the deadline passed.
    DeadlineExceeded,
}

impl CancelCause {
    /// The cause of a cancellation observed at `now` for a call whose
    /// effective deadline is `deadline` (pass the earliest of the call's own
    /// deadline and the ambient [`current`](super::current) one).
    #[must_use]
    pub fn classify(deadline: Option<Deadline>, now: Instant) -> Self {
        match deadline {
            Some(d) if d.is_expired(now) => Self::DeadlineExceeded,
            _ => Self::Cancelled,
        }
    }
}

impl Deadline {
    /// [`CancelCause::classify`] for this deadline: `DeadlineExceeded` once
    /// it has passed at `now`, else `Cancelled`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::deadline::CancelCause;
    ///
    /// let clock = VirtualClock::new();
    /// let d = Deadline::after(clock.now(), Duration::ZERO);
    /// assert_eq!(d.classify_cancel(clock.now()), CancelCause::DeadlineExceeded);
    /// ```
    #[must_use]
    pub fn classify_cancel(self, now: Instant) -> CancelCause {
        CancelCause::classify(Some(self), now)
    }
}

/// Runs `future` until `deadline` on `clock`; `Err(DeadlineExceeded)` if the
/// deadline passes first (the future is then dropped, stopping its work).
///
/// While it runs, `future` sees the deadline as its ambient deadline
/// ([`current`](super::current)), so calls it makes inherit it. If the
/// deadline has already passed at the first poll, `future` is not polled at
/// all: work that no one will wait for is not started. Otherwise `future` is
/// polled before the timer, so a result that is ready wins a tie.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{AsyncClock, Clock, VirtualClock};
/// use steadfast::deadline::DeadlineExceeded;
/// use steadfast::deadline;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let clock = VirtualClock::new();
/// let d = Deadline::after(clock.now(), Duration::from_secs(1));
///
/// let fast = deadline::timeout_at(clock.clone(), d, async { 7 });
/// assert_eq!(fast.await, Ok(7));
///
/// let slow = deadline::timeout_at(clock.clone(), d, std::future::pending::<()>());
/// assert_eq!(slow.await, Err(DeadlineExceeded::new()));
/// assert!(d.is_expired(clock.now()));
/// # }
/// ```
pub fn timeout_at<C: AsyncClock, F: Future>(
    clock: C,
    deadline: Deadline,
    future: F,
) -> Timeout<C, F> {
    Timeout {
        inner: scope_async(deadline, future),
        clock,
        deadline,
        sleep: None,
    }
}

/// Runs `future` for at most `timeout` from now on `clock`: [`timeout_at`]
/// with the deadline `now + timeout`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::VirtualClock;
/// use steadfast::deadline::DeadlineExceeded;
/// use steadfast::deadline;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let clock = VirtualClock::new(); // auto-advance: the timer's sleep moves time
/// let never = std::future::pending::<()>();
/// let result = deadline::timeout(clock.clone(), Duration::from_secs(2), never).await;
/// assert_eq!(result, Err(DeadlineExceeded::new()));
/// assert_eq!(clock.elapsed(), Duration::from_secs(2));
/// # }
/// ```
pub fn timeout<C: AsyncClock, F: Future>(clock: C, timeout: Duration, future: F) -> Timeout<C, F> {
    let deadline = Deadline::after(clock.now(), timeout);
    timeout_at(clock, deadline, future)
}

pin_project_lite::pin_project! {
    /// The future of [`timeout_at`] and [`timeout`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Timeout<C: AsyncClock, F> {
        #[pin]
        inner: WithDeadline<F>,
        clock: C,
        deadline: Deadline,
        // Made at the first poll, from the time left then, so time spent
        // between making this future and polling it counts.
        #[pin]
        sleep: Option<C::Sleep>,
    }
}

impl<C: AsyncClock, F> Timeout<C, F> {
    /// The deadline this future enforces.
    #[must_use]
    pub fn deadline(&self) -> Deadline {
        self.deadline
    }
}

impl<C: AsyncClock, F> fmt::Debug for Timeout<C, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("clock", &self.clock)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<C: AsyncClock, F: Future> Future for Timeout<C, F> {
    type Output = Result<F::Output, DeadlineExceeded>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if this.sleep.is_none() {
            let left = this.deadline.remaining(this.clock.now());
            if left.is_zero() {
                return Poll::Ready(Err(DeadlineExceeded::new()));
            }
            this.sleep.set(Some(this.clock.sleep(left)));
        }
        if let Poll::Ready(out) = this.inner.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        match this.sleep.as_pin_mut() {
            Some(sleep) => match sleep.poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(DeadlineExceeded::new())),
                Poll::Pending => Poll::Pending,
            },
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::Waker;

    use super::*;
    use crate::clock::{Clock, VirtualClock};

    #[test]
    fn manual_clock_times_out_exactly_at_the_deadline() {
        let clock = VirtualClock::manual();
        let d = Deadline::after(clock.now(), Duration::from_millis(100));
        let mut fut = Box::pin(timeout_at(clock.clone(), d, std::future::pending::<()>()));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(99));
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(1));
        assert_eq!(
            fut.as_mut().poll(&mut cx),
            Poll::Ready(Err(DeadlineExceeded::new()))
        );
    }

    #[test]
    fn inner_result_before_the_deadline_wins() {
        let clock = VirtualClock::manual();
        let d = Deadline::after(clock.now(), Duration::from_millis(100));
        let work = clock.sleep(Duration::from_millis(60));
        let mut fut = Box::pin(timeout_at(clock.clone(), d, async move {
            work.await;
            "done"
        }));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(60));
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok("done")));
    }

    #[test]
    fn a_ready_result_wins_a_tie() {
        let clock = VirtualClock::manual();
        let d = Deadline::after(clock.now(), Duration::from_millis(100));
        let work = clock.sleep(Duration::from_millis(100));
        let mut fut = Box::pin(timeout_at(clock.clone(), d, work));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(100));
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(())));
    }

    #[test]
    fn expired_deadline_does_not_start_the_work() {
        let clock = VirtualClock::manual();
        let d = Deadline::after(clock.now(), Duration::from_millis(10));
        let started = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&started);
        let mut fut = Box::pin(timeout_at(clock.clone(), d, async move {
            flag.store(true, Ordering::SeqCst);
        }));
        clock.advance(Duration::from_millis(10));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(
            fut.as_mut().poll(&mut cx),
            Poll::Ready(Err(DeadlineExceeded::new()))
        );
        assert!(!started.load(Ordering::SeqCst));
    }

    #[test]
    fn time_before_the_first_poll_counts() {
        let clock = VirtualClock::manual();
        let mut fut = Box::pin(timeout(
            clock.clone(),
            Duration::from_millis(100),
            std::future::pending::<()>(),
        ));
        clock.advance(Duration::from_millis(70));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(30));
        assert!(fut.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn work_sees_the_deadline_as_ambient() {
        let clock = VirtualClock::new();
        let d = Deadline::after(clock.now(), Duration::from_secs(3));
        let mut fut = Box::pin(timeout_at(clock.clone(), d, async {
            super::super::current()
        }));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(Some(d))));
    }

    #[test]
    fn dropping_on_timeout_drops_the_work() {
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let clock = VirtualClock::new();
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = SetOnDrop(Arc::clone(&dropped));
        let mut fut = Box::pin(timeout(clock.clone(), Duration::from_secs(1), async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        }));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_ready());
        drop(fut);
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn classify_on_the_boundary() {
        let clock = VirtualClock::manual();
        let d = Deadline::after(clock.now(), Duration::from_millis(5));
        clock.advance(Duration::from_millis(4));
        assert_eq!(d.classify_cancel(clock.now()), CancelCause::Cancelled);
        clock.advance(Duration::from_millis(1));
        assert_eq!(
            d.classify_cancel(clock.now()),
            CancelCause::DeadlineExceeded
        );
    }
}
