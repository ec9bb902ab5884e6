use std::time::{Duration, Instant};

use super::Clock;

/// The operating system's monotonic clock; sleeps block the thread.
///
/// [`now`](Clock::now) is `Instant::now`. On Linux, [`ticks`](Clock::ticks)
/// reads the kernel's *coarse* monotonic clock (`CLOCK_MONOTONIC_COARSE`:
/// the same time line, advanced once per kernel tick, so a reading trails
/// `Instant::now` by a few milliseconds; a read of a few nanoseconds where
/// `Instant::now` costs 20 to 50 on a virtual machine). The windowed controls (budgets, throttles, the circuit
/// breaker's time window and its breaks) measure seconds with it; attempt
/// durations and deadlines use `now`. Elsewhere `ticks` is `None` and the
/// controls subtract `Instant`s.
///
/// ```
/// use steadfast::clock::{Clock, SystemClock};
/// let before = SystemClock.now();
/// assert!(SystemClock.now() >= before);
/// if let (Some(a), Some(b)) = (SystemClock.ticks(), SystemClock.ticks()) {
///     assert!(b >= a); // monotonic, in steps of a kernel tick
/// }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }

    #[cfg(target_os = "linux")]
    #[inline]
    fn ticks(&self) -> Option<u64> {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        let secs = u64::try_from(t.tv_sec).unwrap_or(0);
        let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
        Some(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
    }

    /// The coarse clock's resolution, as the kernel reports it (one kernel
    /// tick: 1 to 10 ms); asked once per process.
    #[cfg(target_os = "linux")]
    fn tick_lag(&self) -> Duration {
        static RESOLUTION: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
        *RESOLUTION.get_or_init(|| {
            let t = rustix::time::clock_getres(rustix::time::ClockId::MonotonicCoarse);
            let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
            let secs = u64::try_from(t.tv_sec).unwrap_or(0);
            // A resolution the kernel cannot report is taken as 10 ms (HZ=100).
            let d = Duration::from_secs(secs) + Duration::from_nanos(nanos);
            if d.is_zero() {
                Duration::from_millis(10)
            } else {
                d
            }
        })
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn precise() -> u64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
    }

    /// The coarse ticks are the monotonic time line (the one `Instant`
    /// reads), never ahead of it and behind by a few kernel ticks at most
    /// (a tickless kernel may skip ticks on idle cores; 100 ms is far more
    /// than that and far less than the seconds a control's window spans).
    #[test]
    fn coarse_ticks_trail_the_monotonic_clock_by_a_few_ticks() {
        let resolution = 100_000_000;
        for _ in 0..1000 {
            let before = precise();
            let ticks = SystemClock.ticks().unwrap_or(0);
            let after = precise();
            assert!(ticks <= after, "{ticks} ahead of {after}");
            assert!(
                before.saturating_sub(ticks) <= resolution,
                "{ticks} behind {before}"
            );
        }
    }
}
