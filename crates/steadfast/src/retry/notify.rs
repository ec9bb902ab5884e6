use std::fmt;
use std::future::{Future, Ready, ready};
use std::time::Duration;

/// A hook called before each wait, with the number of the attempt that
/// failed, its error (`None` when an `Ok` value is being retried or the
/// attempt timed out) and the delay about to be slept.
///
/// `()` is the hook that does nothing; [`NotifyFn`] wraps a closure and
/// [`NotifyAsync`] a closure returning a future, which the async executor
/// awaits before sleeping.
pub trait Notify<E> {
    /// What the hook returns; the async executor awaits it.
    type Future: Future<Output = ()>;

    /// Called once before each wait.
    fn notify(&mut self, attempt: u32, error: Option<&E>, delay: Duration) -> Self::Future;
}

impl<E> Notify<E> for () {
    type Future = Ready<()>;
    #[inline]
    fn notify(&mut self, _: u32, _: Option<&E>, _: Duration) -> Ready<()> {
        ready(())
    }
}

/// A synchronous notify hook from a closure; made by `.notify(..)`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::retry::{Notify, NotifyFn};
/// let mut seen = Vec::new();
/// let mut hook = NotifyFn::new(|attempt: u32, err: Option<&i32>, delay: Duration| {
///     seen.push((attempt, err.copied(), delay));
/// });
/// let _ = hook.notify(1, Some(&-111), Duration::from_secs(1));
/// drop(hook);
/// assert_eq!(seen, [(1, Some(-111), Duration::from_secs(1))]);
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

impl<E, F: FnMut(u32, Option<&E>, Duration)> Notify<E> for NotifyFn<F> {
    type Future = Ready<()>;
    #[inline]
    fn notify(&mut self, attempt: u32, error: Option<&E>, delay: Duration) -> Ready<()> {
        (self.0)(attempt, error, delay);
        ready(())
    }
}

/// An asynchronous notify hook: the closure returns a future that the async
/// executor awaits before it sleeps. Made by `.notify_async(..)`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::retry::{Notify, NotifyAsync};
/// let mut hook = NotifyAsync::new(|attempt: u32, _err: Option<&()>, _delay: Duration| async move {
///     assert_eq!(attempt, 1);
/// });
/// # futures::executor::block_on(async {
/// hook.notify(1, None, Duration::ZERO).await;
/// # });
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
    F: FnMut(u32, Option<&E>, Duration) -> Fut,
    Fut: Future<Output = ()>,
{
    type Future = Fut;
    #[inline]
    fn notify(&mut self, attempt: u32, error: Option<&E>, delay: Duration) -> Fut {
        (self.0)(attempt, error, delay)
    }
}
