//! Explicit cancellation of a call, for async and blocking callers alike.
//!
//! Dropping a retry future already cancels it. A [`CancelToken`] is for the
//! other case: a call that someone else wants to stop (a shutdown, a client
//! that went away, a parent request whose deadline passed). Cancelling wakes
//! every waiter at once, whether it waits in a future or on a thread.
//!
//! ```
//! use steadfast::CancelToken;
//!
//! let token = CancelToken::new();
//! let child = token.clone();
//! assert!(!child.is_cancelled());
//! token.cancel();
//! assert!(child.is_cancelled());
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A cloneable handle that cancels every call it was given to.
///
/// Clones share one state; once cancelled, a token stays cancelled.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    cancelled: AtomicBool,
    waiters: Mutex<Waiters>,
    fired: Condvar,
}

#[derive(Debug, Default)]
struct Waiters {
    /// Slots for registered wakers; a freed slot is reused, so a long-lived
    /// token does not grow with the number of calls that used it.
    slots: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl CancelToken {
    /// A token that has not been cancelled.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels: every current and future waiter sees the cancellation.
    pub fn cancel(&self) {
        if self.inner.cancelled.swap(true, Ordering::AcqRel) {
            return;
        }
        let wakers: Vec<Waker> = {
            let mut waiters = self.lock();
            waiters.free.clear();
            waiters.slots.drain(..).flatten().collect()
        };
        self.inner.fired.notify_all();
        for waker in wakers {
            waker.wake();
        }
    }

    /// Whether [`cancel`](Self::cancel) has been called on this token or a clone.
    #[inline]
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// A future that completes when the token is cancelled.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let token = steadfast::CancelToken::new();
    /// let waiter = token.cancelled();
    /// token.cancel();
    /// waiter.await;
    /// # }
    /// ```
    #[must_use]
    pub fn cancelled(&self) -> Cancelled {
        self.clone().into_cancelled()
    }

    /// [`cancelled`](Self::cancelled), keeping this handle instead of a clone.
    pub(crate) const fn into_cancelled(self) -> Cancelled {
        Cancelled {
            token: self,
            slot: None,
        }
    }

    /// Blocks the thread for up to `timeout` (real time) or until the token
    /// is cancelled. Returns `true` if it was cancelled.
    ///
    /// ```
    /// use std::time::Duration;
    /// let token = steadfast::CancelToken::new();
    /// token.cancel();
    /// assert!(token.wait_timeout(Duration::from_secs(3600))); // returns at once
    /// ```
    #[must_use = "the return value says whether the wait was cut short"]
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let Some(end) = Instant::now().checked_add(timeout) else {
            // Longer than the clock can represent: wait until cancelled.
            let mut guard = self.lock();
            while !self.is_cancelled() {
                guard = self
                    .inner
                    .fired
                    .wait(guard)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            return true;
        };
        let mut guard = self.lock();
        loop {
            if self.is_cancelled() {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            guard = self
                .inner
                .fired
                .wait_timeout(guard, end - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiters> {
        self.inner
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The future returned by [`CancelToken::cancelled`].
#[derive(Debug)]
pub struct Cancelled {
    token: CancelToken,
    slot: Option<usize>,
}

impl Cancelled {
    /// The token this future waits on.
    #[must_use]
    pub fn token(&self) -> &CancelToken {
        &self.token
    }
}

impl Future for Cancelled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.token.is_cancelled() {
            return Poll::Ready(());
        }
        let mut waiters = this.token.lock();
        // Checked again under the lock: `cancel` sets the flag before it
        // takes the lock, so no wake-up can be missed between the two.
        if this.token.is_cancelled() {
            return Poll::Ready(());
        }
        match this.slot {
            Some(i) => match &mut waiters.slots[i] {
                Some(w) => w.clone_from(cx.waker()),
                slot @ None => *slot = Some(cx.waker().clone()),
            },
            None => {
                let i = if let Some(i) = waiters.free.pop() {
                    waiters.slots[i] = Some(cx.waker().clone());
                    i
                } else {
                    waiters.slots.push(Some(cx.waker().clone()));
                    waiters.slots.len() - 1
                };
                this.slot = Some(i);
            }
        }
        Poll::Pending
    }
}

impl Drop for Cancelled {
    #[inline]
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            self.deregister(i);
        }
    }
}

impl Cancelled {
    /// Frees this future's waker slot (it registered while pending).
    #[cold]
    fn deregister(&self, i: usize) {
        if self.token.is_cancelled() {
            return;
        }
        let mut waiters = self.token.lock();
        if let Some(slot) = waiters.slots.get_mut(i) {
            *slot = None;
            waiters.free.push(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_wakes_a_blocked_thread() {
        let token = CancelToken::new();
        let t = token.clone();
        let h = std::thread::spawn(move || t.wait_timeout(Duration::from_secs(3600)));
        token.cancel();
        assert!(h.join().unwrap());
    }

    #[test]
    fn wait_without_cancel_times_out() {
        assert!(!CancelToken::new().wait_timeout(Duration::ZERO));
    }

    #[test]
    fn slots_are_reused() {
        let token = CancelToken::new();
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..100 {
            let mut f = Box::pin(token.cancelled());
            assert!(f.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(token.lock().slots.len(), 1);
    }

    #[test]
    fn future_completes_after_cancel() {
        let token = CancelToken::new();
        let mut f = Box::pin(token.cancelled());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(f.as_mut().poll(&mut cx).is_pending());
        token.cancel();
        assert!(f.as_mut().poll(&mut cx).is_ready());
    }
}
