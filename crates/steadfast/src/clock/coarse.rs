use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::Clock;

/// The monotonic clock read at a coarse resolution, for hot paths: `now()`
/// is one atomic load (plus adding it to a base `Instant`), not a system
/// call or a `vDSO` read.
///
/// A background thread (one per `CoarseClock::new` call, shared by the
/// clones, ending within one tick after the last clone is dropped) stores
/// the elapsed time every `resolution`. `now()` is therefore monotonic and
/// lags the system clock by up to about one `resolution` (more if the
/// ticker thread is not scheduled in time). Meant for time-windowed
/// controls such as [`RetryBudget`](crate::control::RetryBudget), whose
/// slots are at least 100 ms wide: a call counted up to a millisecond late
/// in its slot changes nothing that matters. Those controls read its
/// [`ticks`](Clock::ticks) (the load alone, no `Instant` arithmetic). Sleeps
/// block on the system clock.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::{Clock, CoarseClock};
/// use steadfast::control::RetryBudget;
///
/// let clock = CoarseClock::new(Duration::from_millis(1))?;
/// let before = clock.now();
/// clock.sleep_blocking(Duration::from_millis(5));
/// assert!(clock.now() >= before); // monotonic; usually about 5 ms later
/// let budget = RetryBudget::builder().build_with_clock(clock)?;
/// # let _ = budget;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct CoarseClock {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    base: Instant,
    resolution: Duration,
    /// Nanoseconds from `base` to the last tick.
    elapsed: AtomicU64,
}

impl CoarseClock {
    /// A clock refreshed every `resolution` (clamped to 50 µs..=1 s) by a
    /// new background thread.
    ///
    /// # Errors
    ///
    /// The operating system's error when it cannot start the ticker thread.
    pub fn new(resolution: Duration) -> std::io::Result<Self> {
        let resolution = resolution.clamp(Duration::from_micros(50), Duration::from_secs(1));
        let shared = Arc::new(Shared {
            base: Instant::now(),
            resolution,
            elapsed: AtomicU64::new(0),
        });
        let weak: Weak<Shared> = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("steadfast-coarse-clock".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(resolution);
                    let Some(shared) = weak.upgrade() else { break };
                    let nanos = u64::try_from(shared.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    // The only writer: a store keeps the value monotonic.
                    shared.elapsed.store(nanos, Ordering::Release);
                }
            })?;
        Ok(Self { shared })
    }

    /// The clock's resolution-limited reading, as time since it was created.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::CoarseClock;
    /// let clock = CoarseClock::new(Duration::from_millis(1))?;
    /// assert!(clock.elapsed() < Duration::from_secs(1));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.shared.elapsed.load(Ordering::Acquire))
    }
}

impl Clock for CoarseClock {
    #[inline]
    fn now(&self) -> Instant {
        self.shared.base + self.elapsed()
    }

    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }

    /// The elapsed time since the clock was created, in nanoseconds: one
    /// atomic load.
    #[inline]
    fn ticks(&self) -> Option<u64> {
        Some(self.shared.elapsed.load(Ordering::Acquire))
    }

    /// The clock's resolution (a reading trails by up to one, more if the
    /// ticker thread is late).
    fn tick_lag(&self) -> Duration {
        self.shared.resolution
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_system_clock_and_never_runs_ahead() {
        let clock = CoarseClock::new(Duration::from_millis(1)).expect("the ticker starts");
        let start = Instant::now();
        let first = clock.now();
        let mut last = first;
        // Polls until it has moved 20 ms (bounded: a loaded machine may
        // delay the ticker, never stop it).
        while last < first + Duration::from_millis(20) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the ticker stalled"
            );
            let ticks = clock.ticks().expect("a coarse clock has ticks");
            let now = clock.now();
            // Same time line: the ticks read just before `now` are the
            // nanoseconds from the base to `now` or, if a tick landed in
            // between, to an earlier reading.
            assert!(clock.shared.base + Duration::from_nanos(ticks) <= now);
            assert!(now >= last, "went backwards");
            assert!(now <= Instant::now(), "ran ahead of the system clock");
            last = now;
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_ticker_ends_with_the_last_clone() {
        let clock = CoarseClock::new(Duration::from_micros(100)).expect("the ticker starts");
        let weak = Arc::downgrade(&clock.shared);
        let copy = clock.clone();
        drop(clock);
        assert!(weak.upgrade().is_some(), "a clone still holds it");
        drop(copy);
        // The ticker holds only a `Weak`, upgraded for one store at a time.
        let start = Instant::now();
        while weak.upgrade().is_some() {
            assert!(start.elapsed() < Duration::from_secs(30));
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
