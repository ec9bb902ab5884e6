use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::{AsyncClock, Clock};

/// Real time with async sleeps from [`async-io`](https://docs.rs/async-io)
/// (feature `async-io`), the reactor of smol and async-std: it drives
/// itself (its own thread when no `async_io::block_on` does), so it works
/// on any executor.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::{AsyncClock, AsyncIoClock, Clock};
///
/// let clock = AsyncIoClock;
/// let start = clock.now();
/// async_io::block_on(clock.sleep(Duration::from_millis(1)));
/// assert!(clock.now() >= start + Duration::from_millis(1));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AsyncIoClock;

impl Clock for AsyncIoClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

impl AsyncClock for AsyncIoClock {
    type Sleep = AsyncIoSleep;

    fn sleep(&self, duration: Duration) -> AsyncIoSleep {
        AsyncIoSleep(async_io::Timer::after(duration))
    }
}

/// The future returned by [`AsyncIoClock`]'s [`AsyncClock::sleep`]: an
/// `async_io::Timer` whose instant is dropped.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct AsyncIoSleep(async_io::Timer);

impl Future for AsyncIoSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(drop)
    }
}
