//! Time, injected.
//!
//! Every executor in steadfast reads time and sleeps through a [`Clock`], never
//! through `std::time` or a runtime directly. Production code uses
//! [`SystemClock`] (blocking) or `TokioClock` (async, behind the default
//! `tokio` feature: the [`DefaultClock`] then), or [`CoarseClock`] (an atomic load, refreshed by a
//! background thread) where a clock read sits on a hot path; tests and the simulator use [`VirtualClock`], whose time
//! moves only when something sleeps on it or when it is advanced by hand.
//! Outside tokio, `FuturesTimerClock` (feature `futures-timer`) and
//! `AsyncIoClock` (feature `async-io`) sleep on any executor.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::clock::{Clock, VirtualClock};
//!
//! let clock = VirtualClock::new();
//! let start = clock.now();
//! clock.sleep_blocking(Duration::from_secs(3600)); // returns at once
//! assert_eq!(clock.now() - start, Duration::from_secs(3600));
//! ```

#[cfg(feature = "async-io")]
mod async_io_clock;
mod coarse;
mod default_clock;
#[cfg(feature = "futures-timer")]
mod futures_timer_clock;
mod stopwatch;
mod system;
#[cfg(feature = "tokio")]
mod tokio_clock;
mod virtual_clock;

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::cancel::CancelToken;

#[cfg(feature = "async-io")]
pub use async_io_clock::{AsyncIoClock, AsyncIoSleep};
pub use coarse::CoarseClock;
pub use default_clock::DefaultClock;
#[cfg(not(any(feature = "tokio", feature = "futures-timer", feature = "async-io")))]
pub use default_clock::NoClock;
#[cfg(feature = "futures-timer")]
pub use futures_timer_clock::FuturesTimerClock;
#[cfg(all(test, not(loom)))]
pub(crate) use stopwatch::InstantsOnly;
pub(crate) use stopwatch::{AnyStopwatch, Stopwatch};
pub use system::SystemClock;
#[cfg(feature = "tokio")]
pub use tokio_clock::TokioClock;
pub use virtual_clock::{VirtualClock, VirtualSleep};

/// A source of the current time that can also block the calling thread.
///
/// Implementations must be cheap to clone (clones share one time line) and
/// monotonic: `now()` never goes backwards.
pub trait Clock: Clone + fmt::Debug + Send + Sync + 'static {
    /// The current instant on this clock's time line.
    fn now(&self) -> Instant;

    /// Blocks the calling thread for `duration` of this clock's time.
    fn sleep_blocking(&self, duration: Duration);

    /// Blocks for `duration` or until `cancel` fires, whichever is first.
    /// Returns `true` when it returned because of the cancellation.
    ///
    /// The default waits on the token's condition variable in real time; a
    /// virtual clock advances instead.
    fn sleep_blocking_cancellable(&self, duration: Duration, cancel: &CancelToken) -> bool {
        cancel.wait_timeout(duration)
    }

    /// A cheaper reading of the same time line, for hot paths that only need
    /// how much time passed between two readings: nanoseconds since an origin
    /// of the clock's own choosing, or `None` when the clock has nothing
    /// cheaper than [`now`](Clock::now) (the default).
    ///
    /// A clock that returns `Some` returns it on every call, from every
    /// clone, with the same origin, and the difference of two readings is
    /// the time `now()` would say passed between them, to within the
    /// clock's resolution (a few milliseconds at most). Time-windowed
    /// controls ([`RetryBudget`](crate::control::RetryBudget),
    /// [`AdaptiveThrottle`](crate::control::AdaptiveThrottle), the
    /// [`CircuitBreaker`](crate::control::CircuitBreaker)) use it to find
    /// their slot without `Instant` arithmetic; [`CoarseClock`],
    /// [`VirtualClock`] and, on Linux, [`SystemClock`] provide it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, SystemClock, VirtualClock};
    ///
    /// let clock = VirtualClock::new();
    /// let before = clock.ticks().unwrap();
    /// clock.advance(Duration::from_millis(3));
    /// assert_eq!(clock.ticks().unwrap() - before, 3_000_000);
    /// // On Linux: the kernel's coarse monotonic clock.
    /// assert_eq!(SystemClock.ticks().is_some(), cfg!(target_os = "linux"));
    /// ```
    #[inline]
    fn ticks(&self) -> Option<u64> {
        None
    }

    /// How far a [`ticks`](Clock::ticks) reading may trail the time it is
    /// read at: the clock's resolution (zero, the default, for a clock
    /// without ticks or whose ticks are exact). A wait computed from ticks
    /// and given to someone who will come back and be checked on ticks
    /// again (a rate limit's `retry_after`) adds it, so that a caller who
    /// waits exactly that long is not refused by a reading that lags.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// assert_eq!(VirtualClock::new().tick_lag(), Duration::ZERO);
    /// ```
    fn tick_lag(&self) -> Duration {
        Duration::ZERO
    }
}

/// `now + d`, or the latest instant the platform can represent on the way
/// to it: a wait too long to represent means "never", not "now".
///
/// The common case is one `checked_add`; the halving loop runs only on
/// overflow (at most 64 rounds).
#[inline]
pub(crate) fn saturating_add(now: Instant, d: Duration) -> Instant {
    match now.checked_add(d) {
        Some(t) => t,
        None => saturating_add_slow(now, d),
    }
}

#[cold]
fn saturating_add_slow(now: Instant, d: Duration) -> Instant {
    // Find the largest representable `now + x` with `x <= d`, bit by bit.
    let mut at = now;
    let mut step = d;
    while !step.is_zero() {
        match at.checked_add(step) {
            Some(t) => at = t,
            None => step /= 2,
        }
    }
    at
}

/// A [`Clock`] that can also sleep asynchronously.
///
/// Which one an async executor uses: `TokioClock` by default (feature
/// `tokio`, on by default), or any other passed with `.clock(..)`:
/// `FuturesTimerClock` (feature `futures-timer`) and `AsyncIoClock`
/// (feature `async-io`) need no tokio runtime; [`VirtualClock`] is for tests.
/// Without the `tokio` feature the default is the first of those two that
/// is enabled (see [`DefaultClock`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot sleep asynchronously",
    label = "not an async clock",
    note = "an async retry needs an `AsyncClock`: enable steadfast's `tokio`, `futures-timer` or `async-io` feature, or pass a clock with `.clock(..)`"
)]
pub trait AsyncClock: Clock {
    /// The future returned by [`sleep`](AsyncClock::sleep).
    type Sleep: Future<Output = ()> + Send + 'static;

    /// A future that completes once `duration` of this clock's time has passed.
    fn sleep(&self, duration: Duration) -> Self::Sleep;

    /// Whether [`sleep`](AsyncClock::sleep) can be called here and now
    /// (default: always). `TokioClock` says `false` outside a tokio
    /// runtime, where tokio would panic; the async retry asks before each
    /// timer it makes and ends the call with
    /// [`StopReason::NoTimer`](crate::call::StopReason::NoTimer) instead.
    ///
    /// ```
    /// use steadfast::clock::{AsyncClock, VirtualClock};
    /// assert!(VirtualClock::new().can_sleep());
    /// ```
    #[inline]
    fn can_sleep(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturating_add_never_wraps_to_now() {
        let now = Instant::now();
        assert_eq!(
            saturating_add(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        let far = saturating_add(now, Duration::MAX);
        assert!(far > now + Duration::from_secs(100 * 365 * 24 * 3600));
        // The latest representable instant: not even a nanosecond more fits.
        assert_eq!(far.checked_add(Duration::from_nanos(1)), None);
        assert_eq!(saturating_add(far, Duration::MAX), far);
    }
}
