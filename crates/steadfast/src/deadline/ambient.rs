//! The ambient deadline: the deadline of the work running now, readable from
//! anywhere in the call stack without passing it down as a parameter.
//!
//! It lives in one thread-local slot. [`scope`] sets it for a closure on the
//! current thread; [`scope_async`] (or [`WithDeadlineExt::with_deadline`])
//! sets it for a future, by installing it in the thread-local for the
//! duration of each `poll` and restoring the previous value afterwards, the
//! way task-locals work. No runtime is needed.
//!
//! Scopes nest and can only shrink the deadline: the effective deadline inside
//! a scope is the earlier of the scope's own and the one already in force, so
//! library code can never invent a longer deadline than its caller gave it.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::Deadline;
//! use steadfast::clock::{Clock, VirtualClock};
//! use steadfast::deadline;
//!
//! let clock = VirtualClock::new();
//! let outer = Deadline::after(clock.now(), Duration::from_secs(2));
//! let later = Deadline::after(clock.now(), Duration::from_secs(9));
//! assert_eq!(deadline::current(), None);
//! deadline::scope(outer, || {
//!     assert_eq!(deadline::current(), Some(outer));
//!     // An inner scope cannot extend the deadline.
//!     deadline::scope(later, || assert_eq!(deadline::current(), Some(outer)));
//! });
//! assert_eq!(deadline::current(), None);
//! ```

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Deadline;

thread_local! {
    static CURRENT: Cell<Option<Deadline>> = const { Cell::new(None) };
}

/// The deadline in force for the code running now, if any.
///
/// Cheap enough for every call's hot path: one thread-local read, no clock,
/// no allocation.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{Clock, VirtualClock};
///
/// let clock = VirtualClock::new();
/// let d = Deadline::after(clock.now(), Duration::from_millis(300));
/// let seen = steadfast::deadline::scope(d, steadfast::deadline::current);
/// assert_eq!(seen, Some(d));
/// ```
#[inline]
#[must_use]
pub fn current() -> Option<Deadline> {
    // `try_with`: while the thread's locals are being torn down (a future
    // dropped or polled from a thread-local destructor) there is simply no
    // ambient deadline, rather than a panic.
    CURRENT.try_with(Cell::get).unwrap_or(None)
}

/// Restores the previous ambient deadline when dropped, even on unwind.
struct Restore(Option<Deadline>);

impl Restore {
    /// Installs the earlier of `deadline` and the one in force.
    #[inline]
    fn enter(deadline: Option<Deadline>) -> Self {
        let previous = CURRENT
            .try_with(|slot| {
                let previous = slot.get();
                slot.set(Deadline::earliest(previous, deadline));
                previous
            })
            .unwrap_or(None);
        Self(previous)
    }
}

impl Drop for Restore {
    #[inline]
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|slot| slot.set(self.0));
    }
}

/// Runs `f` on this thread with `deadline` as the ambient deadline (or the
/// one already in force, if that is earlier), and returns its result.
///
/// The previous ambient deadline is restored afterwards, also if `f` panics.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{Clock, VirtualClock};
///
/// let clock = VirtualClock::new();
/// let d = Deadline::after(clock.now(), Duration::from_secs(1));
/// let left = steadfast::deadline::scope(d, || {
///     // Deep in a library, without a parameter:
///     steadfast::deadline::current().map(|d| d.remaining(clock.now()))
/// });
/// assert_eq!(left, Some(Duration::from_secs(1)));
/// ```
pub fn scope<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
    let _restore = Restore::enter(Some(deadline));
    f()
}

/// Wraps `future` so that `deadline` is the ambient deadline while it runs.
///
/// The deadline is installed in the thread-local for the duration of each
/// `poll` of `future` (then the previous value is restored), so it follows
/// the future across threads and is never seen by other tasks sharing the
/// thread. The effective deadline is the earliest of `deadline`, the ambient
/// deadline when this function is called, and the ambient deadline around
/// each `poll` (when the wrapper runs inside another scope).
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{Clock, VirtualClock};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let clock = VirtualClock::new();
/// let d = Deadline::after(clock.now(), Duration::from_secs(5));
/// let seen = steadfast::deadline::scope_async(d, async { steadfast::deadline::current() }).await;
/// assert_eq!(seen, Some(d));
/// assert_eq!(steadfast::deadline::current(), None);
/// # }
/// ```
pub fn scope_async<F: Future>(deadline: Deadline, future: F) -> WithDeadline<F> {
    WithDeadline {
        inner: future,
        deadline: Deadline::earliest(current(), Some(deadline)),
    }
}

/// Wraps `future` so that it keeps the ambient deadline in force now, for
/// example before handing it to `tokio::spawn`, where it would otherwise run
/// with none. Without an ambient deadline the wrapper changes nothing.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{Clock, VirtualClock};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let clock = VirtualClock::new();
/// let d = Deadline::after(clock.now(), Duration::from_secs(5));
/// let task = steadfast::deadline::scope(d, || {
///     tokio::spawn(steadfast::deadline::inherit(async { steadfast::deadline::current() }))
/// });
/// assert_eq!(task.await.unwrap(), Some(d));
/// # }
/// ```
pub fn inherit<F: Future>(future: F) -> WithDeadline<F> {
    WithDeadline {
        inner: future,
        deadline: current(),
    }
}

pin_project_lite::pin_project! {
    /// A future that runs with an ambient deadline; made by [`scope_async`],
    /// [`inherit`] and [`WithDeadlineExt::with_deadline`].
    #[derive(Debug)]
    #[must_use = "futures do nothing unless polled"]
    pub struct WithDeadline<F> {
        #[pin]
        inner: F,
        deadline: Option<Deadline>,
    }
}

impl<F> WithDeadline<F> {
    /// Runs `inner` with exactly `deadline` as its ambient deadline (the
    /// executors use it for each attempt, whose deadline already includes
    /// every enclosing one).
    pub(crate) fn exactly(inner: F, deadline: Option<Deadline>) -> Self {
        Self { inner, deadline }
    }

    /// The deadline this wrapper installs (before narrowing by any scope it
    /// is polled in).
    #[must_use]
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// The wrapped future.
    #[must_use]
    pub fn into_inner(self) -> F {
        self.inner
    }
}

impl<F: Future> Future for WithDeadline<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        match *this.deadline {
            // No deadline of its own: the one in force (if any) stays.
            None => this.inner.poll(cx),
            Some(deadline) => {
                let _restore = Restore::enter(Some(deadline));
                this.inner.poll(cx)
            }
        }
    }
}

/// `.with_deadline(d)` on every future: the same as [`scope_async`].
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{Clock, VirtualClock};
/// use steadfast::deadline::WithDeadlineExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let clock = VirtualClock::new();
/// let d = Deadline::after(clock.now(), Duration::from_secs(5));
/// let seen = async { steadfast::deadline::current() }.with_deadline(d).await;
/// assert_eq!(seen, Some(d));
/// # }
/// ```
pub trait WithDeadlineExt: Future + Sized {
    /// Runs this future with `deadline` as its ambient deadline (or the one
    /// in force, if that is earlier).
    fn with_deadline(self, deadline: Deadline) -> WithDeadline<Self> {
        scope_async(deadline, self)
    }
}

impl<F: Future> WithDeadlineExt for F {}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};
    use std::time::Duration;

    use super::*;
    use crate::clock::{AsyncClock, Clock, VirtualClock};

    fn at(clock: &VirtualClock, ms: u64) -> Deadline {
        Deadline::after(clock.now(), Duration::from_millis(ms))
    }

    #[test]
    fn no_scope_means_no_deadline() {
        assert_eq!(current(), None);
    }

    #[test]
    fn nested_scopes_only_shrink() {
        let clock = VirtualClock::new();
        let (short, long) = (at(&clock, 100), at(&clock, 900));
        scope(long, || {
            assert_eq!(current(), Some(long));
            scope(short, || {
                assert_eq!(current(), Some(short));
                scope(long, || assert_eq!(current(), Some(short)));
                assert_eq!(current(), Some(short));
            });
            assert_eq!(current(), Some(long));
        });
        assert_eq!(current(), None);
    }

    #[test]
    fn scope_restores_after_panic() {
        let clock = VirtualClock::new();
        let d = at(&clock, 100);
        let result = std::panic::catch_unwind(|| scope(d, || panic!("boom")));
        assert!(result.is_err());
        assert_eq!(current(), None);
    }

    #[test]
    fn threads_do_not_share_the_ambient_deadline() {
        let clock = VirtualClock::new();
        let d = at(&clock, 100);
        scope(d, || {
            let other = std::thread::spawn(current).join().unwrap();
            assert_eq!(other, None);
            assert_eq!(current(), Some(d));
        });
    }

    /// A future that records the ambient deadline at each poll and is ready
    /// on its second poll.
    struct Probe {
        seen: Vec<Option<Deadline>>,
    }

    impl Future for Probe {
        type Output = Vec<Option<Deadline>>;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            self.seen.push(current());
            if self.seen.len() == 2 {
                Poll::Ready(std::mem::take(&mut self.seen))
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    #[test]
    fn future_sees_its_deadline_only_while_polled() {
        let clock = VirtualClock::new();
        let d = at(&clock, 250);
        let mut fut = Box::pin(Probe { seen: Vec::new() }.with_deadline(d));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        // Between polls, the thread has no deadline: other tasks on this
        // thread do not see it.
        assert_eq!(current(), None);
        let Poll::Ready(seen) = fut.as_mut().poll(&mut cx) else {
            panic!("probe is ready on its second poll")
        };
        assert_eq!(seen, vec![Some(d), Some(d)]);
        assert_eq!(current(), None);
    }

    #[test]
    fn wrapper_polled_inside_a_shorter_scope_sees_the_shorter_one() {
        let clock = VirtualClock::new();
        let (short, long) = (at(&clock, 100), at(&clock, 900));
        let mut fut = Box::pin(scope_async(long, Probe { seen: Vec::new() }));
        let mut cx = Context::from_waker(Waker::noop());
        scope(short, || assert!(fut.as_mut().poll(&mut cx).is_pending()));
        let Poll::Ready(seen) = fut.as_mut().poll(&mut cx) else {
            panic!("probe is ready on its second poll")
        };
        assert_eq!(seen, vec![Some(short), Some(long)]);
    }

    #[test]
    fn wrapper_made_inside_a_scope_keeps_the_earlier_deadline() {
        let clock = VirtualClock::new();
        let (short, long) = (at(&clock, 100), at(&clock, 900));
        let fut = scope(short, || scope_async(long, Probe { seen: Vec::new() }));
        assert_eq!(fut.deadline(), Some(short));
        let inherited = scope(short, || inherit(async {}));
        assert_eq!(inherited.deadline(), Some(short));
        assert_eq!(inherit(async {}).deadline(), None);
    }

    struct CountWake(AtomicUsize);
    impl Wake for CountWake {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn deadline_follows_the_future_across_threads() {
        let clock = VirtualClock::manual();
        let d = at(&clock, 50);
        let sleep = clock.sleep(Duration::from_millis(10));
        let mut fut = Box::pin(
            async move {
                let before = current();
                sleep.await;
                (before, current())
            }
            .with_deadline(d),
        );
        let counter = Arc::new(CountWake(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counter));
        let mut cx = Context::from_waker(&waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(10));
        assert_eq!(counter.0.load(Ordering::Relaxed), 1);
        let result = std::thread::spawn(move || {
            let waker = Waker::noop();
            let mut cx = Context::from_waker(waker);
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(r) => Some(r),
                Poll::Pending => None,
            }
        })
        .join()
        .unwrap();
        assert_eq!(result, Some((Some(d), Some(d))));
    }
}
