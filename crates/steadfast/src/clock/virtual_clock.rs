use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::{AsyncClock, Clock};
use crate::cancel::CancelToken;

/// A clock whose time moves only when told to.
///
/// Two modes:
/// - **auto-advance** ([`VirtualClock::new`]): a sleep moves time forward to its
///   own end and returns at once. One sequential caller (a retry loop, a blocking
///   executor) then runs through hours of backoff in microseconds, and every
///   instant it observes is exact.
/// - **manual** ([`VirtualClock::manual`]): sleeps wait until [`advance`]
///   (or [`advance_to`]) moves time past their end, so a test controls the
///   interleaving of several waiting tasks.
///
/// Clones share one time line.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::{AsyncClock, Clock, VirtualClock};
///
/// let clock = VirtualClock::manual();
/// let t0 = clock.now();
/// let mut sleep = Box::pin(clock.sleep(Duration::from_millis(500)));
/// let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// assert!(sleep.as_mut().poll(&mut cx).is_pending());
/// clock.advance(Duration::from_millis(500));
/// assert!(sleep.as_mut().poll(&mut cx).is_ready());
/// assert_eq!(clock.elapsed(), Duration::from_millis(500));
/// # let _ = t0;
/// ```
///
/// [`advance`]: VirtualClock::advance
/// [`advance_to`]: VirtualClock::advance_to
#[derive(Debug, Clone)]
pub struct VirtualClock {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    base: Instant,
    auto_advance: bool,
    state: Mutex<State>,
    moved: Condvar,
}

#[derive(Debug, Default)]
struct State {
    offset: Duration,
    next_key: u64,
    sleepers: Vec<Sleeper>,
}

#[derive(Debug)]
struct Sleeper {
    key: u64,
    until: Instant,
    waker: Waker,
}

impl VirtualClock {
    /// A clock in auto-advance mode: every sleep returns at once, moving time
    /// forward to its end.
    #[must_use]
    pub fn new() -> Self {
        Self::with_mode(true)
    }

    /// A clock in manual mode: time moves only through [`advance`](Self::advance)
    /// and [`advance_to`](Self::advance_to).
    #[must_use]
    pub fn manual() -> Self {
        Self::with_mode(false)
    }

    fn with_mode(auto_advance: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                base: Instant::now(),
                auto_advance,
                state: Mutex::new(State::default()),
                moved: Condvar::new(),
            }),
        }
    }

    /// How much virtual time has passed since the clock was made.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.lock().offset
    }

    /// The instant at which the clock was made (its time zero).
    #[must_use]
    pub fn start(&self) -> Instant {
        self.inner.base
    }

    /// Moves time forward by `by`, waking every sleep that is then due.
    pub fn advance(&self, by: Duration) {
        let target = self.now() + by;
        self.advance_to(target);
    }

    /// Moves time forward to `instant` (never backwards), waking every sleep
    /// that is then due.
    pub fn advance_to(&self, instant: Instant) {
        let mut due = Vec::new();
        {
            let mut state = self.lock();
            let offset = instant.saturating_duration_since(self.inner.base);
            if offset > state.offset {
                state.offset = offset;
            }
            let now = self.inner.base + state.offset;
            let mut i = 0;
            while i < state.sleepers.len() {
                if state.sleepers[i].until <= now {
                    due.push(state.sleepers.swap_remove(i).waker);
                } else {
                    i += 1;
                }
            }
        }
        self.inner.moved.notify_all();
        for waker in due {
            waker.wake();
        }
    }

    /// The end of the earliest sleep still waiting, if any (manual mode).
    #[must_use]
    pub fn next_wake(&self) -> Option<Instant> {
        self.lock().sleepers.iter().map(|s| s.until).min()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for VirtualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        self.inner.base + self.lock().offset
    }

    /// The virtual time since the clock was created, in nanoseconds.
    fn ticks(&self) -> Option<u64> {
        Some(u64::try_from(self.lock().offset.as_nanos()).unwrap_or(u64::MAX))
    }

    fn sleep_blocking(&self, duration: Duration) {
        let until = self.now() + duration;
        if self.inner.auto_advance {
            self.advance_to(until);
            return;
        }
        let mut state = self.lock();
        while self.inner.base + state.offset < until {
            state = self
                .inner
                .moved
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn sleep_blocking_cancellable(&self, duration: Duration, cancel: &CancelToken) -> bool {
        if cancel.is_cancelled() {
            return true;
        }
        self.sleep_blocking(duration);
        cancel.is_cancelled()
    }
}

impl AsyncClock for VirtualClock {
    type Sleep = VirtualSleep;

    fn sleep(&self, duration: Duration) -> VirtualSleep {
        VirtualSleep {
            until: self.now() + duration,
            clock: self.clone(),
            key: None,
        }
    }
}

/// The future returned by [`VirtualClock`]'s [`AsyncClock::sleep`].
#[derive(Debug)]
pub struct VirtualSleep {
    clock: VirtualClock,
    until: Instant,
    key: Option<u64>,
}

impl Future for VirtualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let inner = &this.clock.inner;
        if inner.auto_advance {
            this.clock.advance_to(this.until);
            return Poll::Ready(());
        }
        let mut state = this.clock.lock();
        if inner.base + state.offset >= this.until {
            if let Some(key) = this.key.take() {
                state.sleepers.retain(|s| s.key != key);
            }
            return Poll::Ready(());
        }
        match this.key {
            Some(key) => {
                if let Some(s) = state.sleepers.iter_mut().find(|s| s.key == key) {
                    s.waker.clone_from(cx.waker());
                } else {
                    state.sleepers.push(Sleeper {
                        key,
                        until: this.until,
                        waker: cx.waker().clone(),
                    });
                }
            }
            None => {
                let key = state.next_key;
                state.next_key += 1;
                this.key = Some(key);
                state.sleepers.push(Sleeper {
                    key,
                    until: this.until,
                    waker: cx.waker().clone(),
                });
            }
        }
        Poll::Pending
    }
}

impl Drop for VirtualSleep {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.clock.lock().sleepers.retain(|s| s.key != key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_advance_moves_time_by_the_sleep() {
        let clock = VirtualClock::new();
        let t0 = clock.now();
        clock.sleep_blocking(Duration::from_secs(7));
        assert_eq!(clock.now() - t0, Duration::from_secs(7));
    }

    #[test]
    fn manual_sleep_waits_for_advance() {
        let clock = VirtualClock::manual();
        let mut sleep = Box::pin(clock.sleep(Duration::from_millis(10)));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        assert_eq!(
            clock.next_wake(),
            Some(clock.start() + Duration::from_millis(10))
        );
        clock.advance(Duration::from_millis(9));
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_millis(1));
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
        assert_eq!(clock.next_wake(), None);
    }

    #[test]
    fn dropped_sleep_deregisters() {
        let clock = VirtualClock::manual();
        let mut sleep = Box::pin(clock.sleep(Duration::from_millis(10)));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        drop(sleep);
        assert_eq!(clock.next_wake(), None);
    }

    #[test]
    fn time_never_goes_backwards() {
        let clock = VirtualClock::manual();
        clock.advance(Duration::from_secs(5));
        clock.advance_to(clock.start());
        assert_eq!(clock.elapsed(), Duration::from_secs(5));
    }
}
