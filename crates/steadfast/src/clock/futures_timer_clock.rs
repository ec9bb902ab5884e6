use std::time::{Duration, Instant};

use super::{AsyncClock, Clock};

/// Real time with async sleeps from [`futures-timer`](https://docs.rs/futures-timer)
/// (feature `futures-timer`): its own timer thread wakes the task, so it
/// needs no runtime at all and works on any executor, including
/// `futures::executor::block_on`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::{AsyncClock, Clock, FuturesTimerClock};
///
/// let clock = FuturesTimerClock;
/// let start = clock.now();
/// futures::executor::block_on(clock.sleep(Duration::from_millis(1)));
/// assert!(clock.now() >= start + Duration::from_millis(1));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FuturesTimerClock;

impl Clock for FuturesTimerClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

impl AsyncClock for FuturesTimerClock {
    type Sleep = futures_timer::Delay;

    fn sleep(&self, duration: Duration) -> Self::Sleep {
        futures_timer::Delay::new(duration)
    }
}
