use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use super::{AsyncClock, Clock, saturating_add};
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
/// Clones share one time line. Time saturates at the latest instant the
/// platform can represent: a sleep or an advance of [`Duration::MAX`] moves
/// time there (and no further) instead of overflowing.
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
    /// The largest offset from `base` the platform's `Instant` can hold.
    horizon: Duration,
    auto_advance: bool,
    state: Mutex<State>,
    /// Wakes threads blocked in a manual-mode sleep (notified only when
    /// `State::blocked` says one is there).
    moved: Condvar,
}

#[derive(Debug, Default)]
struct State {
    offset: Duration,
    next_key: u64,
    sleepers: Vec<Sleeper>,
    /// Threads blocked on `moved` right now.
    blocked: usize,
    /// How many times `moved` was notified (for the tests).
    #[cfg(test)]
    notified: usize,
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
        let base = Instant::now();
        Self {
            inner: Arc::new(Inner {
                base,
                horizon: saturating_add(base, Duration::MAX) - base,
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
    /// Saturates at the latest representable instant (never panics).
    pub fn advance(&self, by: Duration) {
        self.move_to(|offset| offset.saturating_add(by));
    }

    /// Moves time forward to `instant` (never backwards), waking every sleep
    /// that is then due.
    pub fn advance_to(&self, instant: Instant) {
        let target = instant.saturating_duration_since(self.inner.base);
        self.move_to(|_| target);
    }

    /// Moves the offset to `target(offset)` (capped at the horizon, never
    /// backwards) and wakes what is due: the async sleeps whose end has
    /// come, and the threads blocked in a sleep, if there are any.
    fn move_to(&self, target: impl FnOnce(Duration) -> Duration) {
        let mut due = Vec::new();
        let notify = {
            let mut state = self.lock();
            let offset = target(state.offset).min(self.inner.horizon);
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
            #[cfg(test)]
            if state.blocked > 0 {
                state.notified += 1;
            }
            state.blocked > 0
        };
        if notify {
            self.inner.moved.notify_all();
        }
        for waker in due {
            waker.wake();
        }
    }

    /// The end of the earliest sleep still waiting, if any (manual mode).
    #[must_use]
    pub fn next_wake(&self) -> Option<Instant> {
        self.lock().sleepers.iter().map(|s| s.until).min()
    }

    /// The offset `duration` after the current one, capped at the horizon.
    fn offset_after(&self, state: &State, duration: Duration) -> Duration {
        state
            .offset
            .saturating_add(duration)
            .min(self.inner.horizon)
    }

    /// Blocks the thread (manual mode) until time reaches `until` or, with
    /// a token, until it is cancelled; `true` when cancelled.
    fn block_until(&self, until: Duration, cancel: Option<&CancelToken>) -> bool {
        let cancelled = || cancel.is_some_and(CancelToken::is_cancelled);
        let mut state = self.lock();
        state.blocked += 1;
        while state.offset < until && !cancelled() {
            state = self
                .inner
                .moved
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.blocked -= 1;
        cancelled()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Wakes the threads blocked in a manual-mode sleep when a cancel token
/// they wait on fires (registered as the waker of the token's future).
struct Nudge(Arc<Inner>);

impl Wake for Nudge {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Taking the lock orders this after a sleeper's last check of the
        // token (it holds the lock until it waits), so no wake-up is lost.
        drop(self.0.state.lock().unwrap_or_else(PoisonError::into_inner));
        self.0.moved.notify_all();
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
        let until = self.offset_after(&self.lock(), duration);
        if self.inner.auto_advance {
            self.move_to(|_| until);
            return;
        }
        let _ = self.block_until(until, None);
    }

    /// Returns at once when `cancel` fires, in both modes: a manual-mode
    /// sleep does not wait for the clock to be advanced to notice it.
    fn sleep_blocking_cancellable(&self, duration: Duration, cancel: &CancelToken) -> bool {
        if cancel.is_cancelled() {
            return true;
        }
        if self.inner.auto_advance {
            self.sleep_blocking(duration);
            return cancel.is_cancelled();
        }
        let until = self.offset_after(&self.lock(), duration);
        // The token's future, polled once with a waker that nudges this
        // clock's condition variable: a cancel then wakes the blocked thread.
        let waker = Waker::from(Arc::new(Nudge(Arc::clone(&self.inner))));
        let mut fired = pin!(cancel.cancelled());
        if fired
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready()
        {
            return true;
        }
        self.block_until(until, Some(cancel))
    }
}

impl AsyncClock for VirtualClock {
    type Sleep = VirtualSleep;

    fn sleep(&self, duration: Duration) -> VirtualSleep {
        let until = self.offset_after(&self.lock(), duration);
        VirtualSleep {
            until: self.inner.base + until,
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

    #[test]
    fn duration_max_saturates_instead_of_panicking() {
        let auto = VirtualClock::new();
        auto.sleep_blocking(Duration::MAX);
        let end = auto.now();
        assert_eq!(end.checked_add(Duration::from_nanos(1)), None);
        // Time stays at the end of the line; further sleeps and advances
        // return at once.
        auto.sleep_blocking(Duration::MAX);
        auto.advance(Duration::from_secs(1));
        assert_eq!(auto.now(), end);

        let manual = VirtualClock::manual();
        manual.advance(Duration::MAX);
        assert_eq!(manual.now().checked_add(Duration::from_nanos(1)), None);
        // A sleep that would end past the representable range is due at
        // its end, which has come.
        let mut sleep = Box::pin(manual.sleep(Duration::MAX));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
        manual.sleep_blocking(Duration::MAX);
    }

    #[test]
    fn a_sleep_of_duration_max_on_a_manual_clock_waits_for_the_horizon() {
        let clock = VirtualClock::manual();
        let mut sleep = Box::pin(clock.sleep(Duration::MAX));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::from_secs(1_000_000_000));
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        clock.advance(Duration::MAX);
        assert!(sleep.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn cancel_ends_a_manual_blocking_sleep_without_an_advance() {
        let clock = VirtualClock::manual();
        let token = CancelToken::new();
        let (c, t) = (clock.clone(), token.clone());
        let sleeper =
            std::thread::spawn(move || c.sleep_blocking_cancellable(Duration::from_secs(60), &t));
        // Wait (on the clock's own state, not on real time) until it blocks.
        while clock.lock().blocked == 0 {
            std::thread::yield_now();
        }
        token.cancel();
        assert!(sleeper.join().unwrap(), "it reports the cancellation");
        assert_eq!(clock.elapsed(), Duration::ZERO, "time never moved");
        assert_eq!(clock.lock().blocked, 0);
    }

    #[test]
    fn a_manual_blocking_sleep_still_ends_on_advance() {
        let clock = VirtualClock::manual();
        let token = CancelToken::new();
        let (c, t) = (clock.clone(), token.clone());
        let sleeper =
            std::thread::spawn(move || c.sleep_blocking_cancellable(Duration::from_secs(60), &t));
        while clock.lock().blocked == 0 {
            std::thread::yield_now();
        }
        clock.advance(Duration::from_secs(60));
        assert!(!sleeper.join().unwrap());
        // The token's waker slot was given back.
        token.cancel();
    }

    #[test]
    fn advancing_with_no_blocked_thread_notifies_nobody() {
        let clock = VirtualClock::manual();
        for _ in 0..1000 {
            clock.advance(Duration::from_millis(1));
        }
        let auto = VirtualClock::new();
        for _ in 0..1000 {
            auto.sleep_blocking(Duration::from_millis(1));
        }
        assert_eq!(clock.lock().notified, 0);
        assert_eq!(auto.lock().notified, 0);
        // With a thread blocked, an advance does notify it.
        let c = clock.clone();
        let sleeper = std::thread::spawn(move || c.sleep_blocking(Duration::from_secs(1)));
        while clock.lock().blocked == 0 {
            std::thread::yield_now();
        }
        clock.advance(Duration::from_secs(1));
        sleeper.join().unwrap();
        assert!(clock.lock().notified >= 1);
    }
}
