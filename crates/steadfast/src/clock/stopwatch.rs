//! Elapsed time on a [`Clock`], read the cheapest way the clock allows.

use std::time::Instant;

use super::Clock;

/// Nanoseconds elapsed on `clock` since it was handed over: the time base of
/// the windowed controls. It reads [`Clock::ticks`] when the clock has them,
/// and subtracts `Instant`s otherwise.
#[derive(Debug, Clone)]
pub(crate) struct Stopwatch<C> {
    clock: C,
    start: Instant,
    start_ticks: Option<u64>,
}

impl<C: Clock> Stopwatch<C> {
    /// Starts now, on `clock`.
    pub(crate) fn new(clock: C) -> Self {
        Self {
            start_ticks: clock.ticks(),
            start: clock.now(),
            clock,
        }
    }

    /// How far a reading may trail real time, in nanoseconds: the clock's
    /// [`tick_lag`](Clock::tick_lag) when the stopwatch reads ticks, else 0.
    pub(crate) fn lag_nanos(&self) -> u64 {
        if self.start_ticks.is_some() {
            u64::try_from(self.clock.tick_lag().as_nanos()).unwrap_or(u64::MAX)
        } else {
            0
        }
    }

    /// Nanoseconds since the start (saturating; 0 if the clock reads earlier).
    #[inline]
    pub(crate) fn elapsed_nanos(&self) -> u64 {
        if let Some(start) = self.start_ticks
            && let Some(ticks) = self.clock.ticks()
        {
            return ticks.saturating_sub(start);
        }
        let since = self.clock.now().saturating_duration_since(self.start);
        since
            .as_secs()
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(since.subsec_nanos()))
    }
}

/// A clock seen only through `now()` (no ticks): for tests of the `Instant`
/// path.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct InstantsOnly<C>(pub(crate) C);

#[cfg(test)]
impl<C: Clock> Clock for InstantsOnly<C> {
    fn now(&self) -> Instant {
        self.0.now()
    }
    fn sleep_blocking(&self, duration: std::time::Duration) {
        self.0.sleep_blocking(duration);
    }
}

/// A [`Stopwatch`] behind a pointer, for a shared value that is not
/// generic over its clock (the rate limits).
pub(crate) trait ElapsedNanos: Send + Sync {
    fn elapsed_nanos(&self) -> u64;
}

/// The time base of a value that is not generic over its clock: the
/// system clock's stopwatch inline (its read is inlined into the caller:
/// no indirect call on the hot path of a rate limit), any other behind a
/// pointer.
pub(crate) enum AnyStopwatch {
    System(Stopwatch<super::SystemClock>),
    /// Another clock's stopwatch, and its lag.
    Other(Box<dyn ElapsedNanos>, u64),
}

impl AnyStopwatch {
    /// Starts now, on `clock`.
    pub(crate) fn new<C: Clock>(clock: C) -> Self {
        match (&clock as &dyn std::any::Any).downcast_ref::<super::SystemClock>() {
            Some(&system) => Self::System(Stopwatch::new(system)),
            None => {
                let watch = Stopwatch::new(clock);
                let lag = watch.lag_nanos();
                Self::Other(Box::new(watch), lag)
            }
        }
    }

    /// How far a reading may trail real time, in nanoseconds.
    pub(crate) fn lag_nanos(&self) -> u64 {
        match self {
            Self::System(watch) => watch.lag_nanos(),
            Self::Other(_, lag) => *lag,
        }
    }

    /// Nanoseconds since the start.
    #[inline]
    pub(crate) fn elapsed_nanos(&self) -> u64 {
        match self {
            Self::System(watch) => watch.elapsed_nanos(),
            Self::Other(watch, _) => watch.elapsed_nanos(),
        }
    }
}

impl<C: Clock> ElapsedNanos for Stopwatch<C> {
    #[inline]
    fn elapsed_nanos(&self) -> u64 {
        Stopwatch::elapsed_nanos(self)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::VirtualClock;

    #[test]
    fn ticks_and_instants_measure_the_same_time() {
        let clock = VirtualClock::new();
        clock.advance(Duration::from_secs(7)); // the start is not the clock's origin
        let by_ticks = Stopwatch::new(clock.clone());
        let by_instants = Stopwatch::new(InstantsOnly(clock.clone()));
        assert!(by_ticks.start_ticks.is_some());
        assert!(by_instants.start_ticks.is_none());
        for step in [0, 1, 999_999_999, 3_600_000_000_000] {
            clock.advance(Duration::from_nanos(step));
            assert_eq!(by_ticks.elapsed_nanos(), by_instants.elapsed_nanos());
        }
        assert_eq!(by_ticks.elapsed_nanos(), 3_601_000_000_000);
    }
}
