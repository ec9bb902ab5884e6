//! Deadlines: one budget of time shared by a whole call chain.

use std::time::{Duration, Instant};

/// An absolute point in time (on the injected clock's time line) by which a
/// call must be done.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{Clock, VirtualClock};
///
/// let clock = VirtualClock::new();
/// let deadline = Deadline::after(clock.now(), Duration::from_secs(1));
/// clock.sleep_blocking(Duration::from_millis(200));
/// assert_eq!(deadline.remaining(clock.now()), Duration::from_millis(800));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    /// The deadline at `instant`.
    #[must_use]
    pub const fn at(instant: Instant) -> Self {
        Self { at: instant }
    }

    /// The deadline `timeout` after `now`; saturates far in the future
    /// instead of overflowing.
    #[must_use]
    pub fn after(now: Instant, timeout: Duration) -> Self {
        let at = now.checked_add(timeout).unwrap_or_else(|| far_future(now));
        Self { at }
    }

    /// The instant of the deadline.
    #[must_use]
    pub const fn instant(self) -> Instant {
        self.at
    }

    /// Time left at `now` (zero once passed).
    #[must_use]
    pub fn remaining(self, now: Instant) -> Duration {
        self.at.saturating_duration_since(now)
    }

    /// Whether the deadline has passed at `now`.
    #[must_use]
    pub fn is_expired(self, now: Instant) -> bool {
        now >= self.at
    }

    /// The earlier of two deadlines.
    #[must_use]
    pub fn min(self, other: Self) -> Self {
        if other.at < self.at { other } else { self }
    }

    /// The earliest of two optional deadlines (`None` means no deadline).
    #[must_use]
    pub fn earliest(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, None) => a,
            (None, b) => b,
        }
    }
}

/// About thirty years after `now`: "no deadline" for arithmetic that needs an
/// instant, without overflowing the platform's `Instant`.
pub(crate) fn far_future(now: Instant) -> Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    now.checked_add(THIRTY_YEARS).unwrap_or(now)
}
