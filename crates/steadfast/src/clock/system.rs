use std::time::{Duration, Instant};

use super::Clock;

/// The operating system's monotonic clock; sleeps block the thread.
///
/// ```
/// use steadfast::clock::{Clock, SystemClock};
/// let before = SystemClock.now();
/// assert!(SystemClock.now() >= before);
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
}
