//! [`PreciseClock`]: sleeps that end when they are due, not on the next
//! millisecond tick.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use steadfast::clock::{AsyncClock, Clock};

/// A clock whose sleeps end within tens of microseconds of when they are due.
///
/// tokio's timer wheel has a resolution of one millisecond and ends a sleep
/// on the first tick at or after its deadline, so a 1.3 ms hedging delay
/// fires after 2 ms or more: for hedges of a service whose replies take a
/// millisecond or two, that is the difference between cutting the tail and
/// not. `PreciseClock`'s sleeps are kept by one timer thread for the whole
/// process, parked on a condition variable until the earliest one is due
/// (the kernel's high-resolution timer behind `futex`, a slack of about
/// 50 µs on Linux), which then wakes the sleeping task. It never spins: the
/// thread costs one wake-up per due sleep, measured in `BENCHMARKS.md`.
///
/// It runs on any executor (no runtime is needed), and reads time with
/// `Instant::now()`: it does not follow tokio's paused test clock, so use it
/// where real time matters (production, benchmarks) and
/// [`TokioClock`](steadfast::clock::TokioClock) or
/// [`VirtualClock`](steadfast::clock::VirtualClock) in tests.
///
/// ```
/// use std::time::{Duration, Instant};
/// use steadfast::clock::AsyncClock;
/// use steadfast_tower::PreciseClock;
///
/// # futures::executor::block_on(async {
/// let clock = PreciseClock::new()?;
/// let start = Instant::now();
/// clock.sleep(Duration::from_micros(1_300)).await;
/// assert!(start.elapsed() >= Duration::from_micros(1_300));
/// # Ok::<(), std::io::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy)]
pub struct PreciseClock {
    timer: &'static Timer,
}

impl PreciseClock {
    /// The clock, served by the process's timer thread (started by the
    /// first call).
    ///
    /// # Errors
    /// The OS error when the timer thread cannot be started.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            timer: Timer::get()?,
        })
    }
}

impl Clock for PreciseClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

impl AsyncClock for PreciseClock {
    type Sleep = PreciseSleep;

    fn sleep(&self, duration: Duration) -> PreciseSleep {
        PreciseSleep {
            // A sleep too long to reach is a sleep that never ends.
            due: Instant::now().checked_add(duration),
            key: None,
            timer: self.timer,
        }
    }
}

/// The future of [`PreciseClock`]'s `sleep`.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct PreciseSleep {
    due: Option<Instant>,
    /// Its entry in the timer, while it has one.
    key: Option<Key>,
    timer: &'static Timer,
}

impl Future for PreciseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Some(due) = this.due else {
            return Poll::Pending;
        };
        if Instant::now() >= due {
            if let Some(key) = this.key.take() {
                this.timer.entries().remove(&key);
            }
            return Poll::Ready(());
        }
        let mut entries = this.timer.entries();
        match this.key.and_then(|key| entries.get_mut(&key)) {
            Some(waker) => {
                if !waker.will_wake(cx.waker()) {
                    waker.clone_from(cx.waker());
                }
            }
            // Not registered yet, or the timer fired it and the task was
            // polled early (another of its futures woke it): register again.
            None => {
                let key = (due, this.timer.next_id.fetch_add(1, Ordering::Relaxed));
                let earliest = entries
                    .first_key_value()
                    .is_none_or(|(first, _)| key < *first);
                entries.insert(key, cx.waker().clone());
                this.key = Some(key);
                drop(entries);
                if earliest {
                    this.timer.changed.notify_one();
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for PreciseSleep {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.timer.entries().remove(&key);
        }
    }
}

/// A sleep's place in the timer: when it is due, then a unique number.
type Key = (Instant, u64);

/// The process's timer: due sleeps' wakers, in order, and the thread that
/// wakes them.
#[derive(Debug)]
struct Timer {
    entries: Mutex<BTreeMap<Key, Waker>>,
    /// Signalled when an entry earlier than every other is added.
    changed: Condvar,
    next_id: AtomicU64,
}

static TIMER: OnceLock<Timer> = OnceLock::new();
static STARTED: Mutex<bool> = Mutex::new(false);

impl Timer {
    /// The timer, its thread started on first use.
    fn get() -> std::io::Result<&'static Self> {
        let timer = TIMER.get_or_init(|| Self {
            entries: Mutex::new(BTreeMap::new()),
            changed: Condvar::new(),
            next_id: AtomicU64::new(0),
        });
        let mut started = STARTED.lock().unwrap_or_else(PoisonError::into_inner);
        if !*started {
            std::thread::Builder::new()
                .name("steadfast-timer".into())
                .spawn(move || timer.run())?;
            *started = true;
        }
        Ok(timer)
    }

    /// The entries; a panic elsewhere while they were locked leaves them
    /// consistent (every change is a single map operation), so a poisoned
    /// lock is taken as it is.
    fn entries(&self) -> MutexGuard<'_, BTreeMap<Key, Waker>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The timer thread: wakes each sleep when it is due, and parks until
    /// the next one.
    fn run(&self) {
        let mut due = Vec::new();
        let mut entries = self.entries();
        loop {
            let now = Instant::now();
            while let Some(entry) = entries.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
            if !due.is_empty() {
                drop(entries);
                for waker in due.drain(..) {
                    waker.wake();
                }
                entries = self.entries();
                continue;
            }
            entries = match entries.first_key_value().map(|(key, _)| key.0 - now) {
                Some(wait) => {
                    self.changed
                        .wait_timeout(entries, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .changed
                    .wait(entries)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;

    fn poll(sleep: &mut PreciseSleep) -> Poll<()> {
        Pin::new(sleep).poll(&mut Context::from_waker(Waker::noop()))
    }

    fn registered(sleep: &PreciseSleep) -> bool {
        sleep
            .key
            .is_some_and(|key| sleep.timer.entries().contains_key(&key))
    }

    #[test]
    fn a_pending_sleep_is_registered_until_dropped() {
        let clock = PreciseClock::new().expect("timer thread");
        let mut sleep = clock.sleep(Duration::from_secs(3600));
        assert_eq!(poll(&mut sleep), Poll::Pending);
        assert!(registered(&sleep));
        let key = sleep.key.expect("registered");
        // Polled again with the same waker: still one entry, the same one.
        assert_eq!(poll(&mut sleep), Poll::Pending);
        assert_eq!(sleep.key, Some(key));
        drop(sleep);
        assert!(!clock.timer.entries().contains_key(&key));
    }

    #[test]
    fn a_due_sleep_is_ready_without_registering() {
        let clock = PreciseClock::new().expect("timer thread");
        let mut sleep = clock.sleep(Duration::ZERO);
        assert_eq!(poll(&mut sleep), Poll::Ready(()));
        assert!(sleep.key.is_none());
    }

    #[test]
    fn a_sleep_past_the_end_of_time_never_ends_and_never_registers() {
        let clock = PreciseClock::new().expect("timer thread");
        let mut sleep = clock.sleep(Duration::MAX);
        assert_eq!(poll(&mut sleep), Poll::Pending);
        assert!(sleep.key.is_none());
    }

    #[test]
    fn every_clock_shares_the_one_timer() {
        let a = PreciseClock::new().expect("timer thread");
        let b = PreciseClock::new().expect("timer thread");
        assert!(std::ptr::eq(a.timer, b.timer));
    }
}
