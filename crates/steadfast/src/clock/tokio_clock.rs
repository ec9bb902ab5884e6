use std::time::{Duration, Instant};

use super::{AsyncClock, Clock};

/// The tokio timer: `now()` follows tokio's clock, so a runtime started with
/// `start_paused = true` (or `tokio::time::pause()`) gives virtual time that
/// advances automatically whenever every task is waiting on a timer.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::{AsyncClock, Clock, TokioClock};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let clock = TokioClock;
/// let start = clock.now();
/// clock.sleep(Duration::from_secs(60)).await; // paused time: instant
/// assert_eq!(clock.now() - start, Duration::from_secs(60));
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokioClock;

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

impl AsyncClock for TokioClock {
    type Sleep = tokio::time::Sleep;

    fn sleep(&self, duration: Duration) -> Self::Sleep {
        tokio::time::sleep(duration)
    }

    /// Whether a tokio runtime is running on this thread (tokio's timer
    /// panics without one).
    ///
    /// ```
    /// use steadfast::clock::{AsyncClock, TokioClock};
    /// assert!(!TokioClock.can_sleep());
    /// tokio::runtime::Builder::new_current_thread()
    ///     .enable_time()
    ///     .build()
    ///     .unwrap()
    ///     .block_on(async { assert!(TokioClock.can_sleep()) });
    /// ```
    fn can_sleep(&self) -> bool {
        tokio::runtime::Handle::try_current().is_ok()
    }
}
