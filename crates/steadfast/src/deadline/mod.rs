//! Deadlines: one budget of time shared by a whole call chain.
//!
//! A call chain A → B → C shares one budget. Each hop must know how much time
//! is left, never invent a longer deadline, and stop work that no one waits
//! for any more. This module gives each of those a piece:
//!
//! | piece | what it does |
//! |---|---|
//! | [`Deadline`] | an absolute instant on the injected clock: time left, expired?, earliest of several, safety margin, bound of an outgoing call |
//! | [`TimeBudget`] | the effective timeout of each outgoing call: min(link, message, call) |
//! | [`current`], [`scope`], [`scope_async`], [`WithDeadlineExt::with_deadline`] | the ambient deadline, readable deep in a call stack |
//! | [`GrpcTimeout`], [`DeadlineHeader`] | the time left on the wire (`grpc-timeout`, or a configurable HTTP header) |
//! | [`DeadlineGuard`], [`cancel_at`] | server side: a [`CancelToken`](crate::cancel::CancelToken) that fires when the deadline passes or the request is dropped |
//! | [`timeout_at`], [`timeout`], [`DeadlineExceeded`], [`CancelCause`] | run a future under a deadline; tell a passed deadline from a cancellation |
//! | [`Connector`](crate::retry::Connector) | connect with a deadline: retry with gRPC connection backoff until connected or out of time (a retry executor, in [`retry`](crate::retry)) |
//!
//! # The rule for every outgoing call
//!
//! The effective timeout of an outgoing call is the **minimum of three**:
//! - the **link deadline**, propagated from upstream: how long the caller
//!   still waits;
//! - the **message deadline**, this service's own limit for handling one
//!   request;
//! - the **call timeout**, this call's own limit.
//!
//! It is recomputed from the time left at every call. Deadlines are absolute
//! instants on each machine's own clock; what travels between machines is the
//! time left (a relative timeout), so the clocks of A, B and C never need to
//! agree.
//!
//! # Worked example
//!
//! A starts with 30 s. It spends 7 s, then calls B: the header says 23 s.
//! B receives it and sets its link deadline to its own now + 23 s; its own
//! limits are longer, so they do not matter. B spends 4 s, then calls C: the
//! header says 19 s. Had B's own message deadline been 10 s, C would have
//! got 6 s; had B's call timeout for C been 5 s, C would have got 5 s. No hop
//! can ever hand on more than it received.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::clock::{Clock, VirtualClock};
//! use steadfast::deadline::{DeadlineHeader, TimeBudget};
//!
//! let header = DeadlineHeader::default();
//! let (a_clock, b_clock, c_clock) = (VirtualClock::new(), VirtualClock::new(), VirtualClock::new());
//!
//! // A: 30 s, 7 s spent, 23 s to B.
//! let a = TimeBudget::start(a_clock.now(), None, Some(Duration::from_secs(30)));
//! a_clock.sleep_blocking(Duration::from_secs(7));
//! let to_b = header.encode(a.call_timeout(a_clock.now(), None).unwrap_or_default());
//! assert_eq!(to_b.as_str(), "23000000u"); // 23 s
//!
//! // B: 23 s received, 4 s spent, 19 s to C.
//! let link = header.decode_deadline(to_b.as_bytes(), b_clock.now()).unwrap();
//! let b = TimeBudget::start(b_clock.now(), Some(link), Some(Duration::from_secs(60)));
//! b_clock.sleep_blocking(Duration::from_secs(4));
//! let to_c = b.call_timeout(b_clock.now(), None).unwrap_or_default();
//! assert_eq!(to_c, Duration::from_secs(19));
//! // ... a tighter own limit or call timeout at B gives C less, never more:
//! let strict = TimeBudget::start(b_clock.now() - Duration::from_secs(4), Some(link), Some(Duration::from_secs(10)));
//! assert_eq!(strict.call_timeout(b_clock.now(), None), Some(Duration::from_secs(6)));
//! assert_eq!(b.call_timeout(b_clock.now(), Some(Duration::from_secs(5))), Some(Duration::from_secs(5)));
//!
//! // C: 19 s.
//! let c = header.decode_deadline(header.encode(to_c).as_bytes(), c_clock.now()).unwrap();
//! assert_eq!(c.remaining(c_clock.now()), Duration::from_secs(19));
//! ```
//!
//! # Cancelled or deadline exceeded?
//!
//! When a call fails as cancelled and its deadline has passed, it reports
//! [`DeadlineExceeded`], not a cancellation: see [`CancelCause::classify`]
//! and [`Deadline::classify_cancel`], the one rule every executor applies.

mod ambient;
mod budget;
mod grpc_timeout;
mod guard;
mod header;
mod parse_error;
mod server;
mod timeout;

use std::time::{Duration, Instant};

use crate::clock::Clock;

pub use ambient::{WithDeadline, WithDeadlineExt, current, inherit, scope, scope_async};
pub use budget::TimeBudget;
pub use grpc_timeout::{GrpcTimeout, MAX_TIMEOUT_VALUE, TimeoutUnit};
pub use guard::DeadlineGuard;
pub use header::{
    DEFAULT_HEADER_NAME, DeadlineHeader, HeaderFormat, HeaderText, MAX_MILLIS_DIGITS,
};
pub use parse_error::{TimeoutParseError, TimeoutParseErrorKind};
pub use server::{CancelAt, cancel_at};
pub use timeout::{CancelCause, DeadlineExceeded, Timeout, timeout, timeout_at};

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

    /// The deadline `timeout` from now on `clock`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, VirtualClock};
    ///
    /// let clock = VirtualClock::new();
    /// let d = Deadline::from_now(&clock, Duration::from_secs(3));
    /// assert_eq!(d.remaining(clock.now()), Duration::from_secs(3));
    /// ```
    #[must_use]
    pub fn from_now<C: Clock>(clock: &C, timeout: Duration) -> Self {
        Self::after(clock.now(), timeout)
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

    /// The earliest of any number of deadlines; `None` when there are none.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, VirtualClock};
    ///
    /// let now = VirtualClock::new().now();
    /// let ds = [3, 1, 2].map(|s| Deadline::after(now, Duration::from_secs(s)));
    /// assert_eq!(Deadline::earliest_of(ds), Some(ds[1]));
    /// assert_eq!(Deadline::earliest_of([]), None);
    /// ```
    #[must_use]
    pub fn earliest_of(deadlines: impl IntoIterator<Item = Self>) -> Option<Self> {
        deadlines.into_iter().min()
    }

    /// This deadline moved `margin` earlier: a safety margin kept back for
    /// the work after a call returns (or for the network on the way back).
    ///
    /// Never later than `self`; when the margin reaches back before the
    /// earliest instant the platform can represent, the result is `now` (or
    /// `self`, if earlier): already expired.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, VirtualClock};
    ///
    /// let clock = VirtualClock::new();
    /// let d = Deadline::after(clock.now(), Duration::from_millis(500));
    /// let shaved = d.shave(Duration::from_millis(50), clock.now());
    /// assert_eq!(shaved.remaining(clock.now()), Duration::from_millis(450));
    /// // A margin larger than the time left leaves an expired deadline.
    /// assert!(d.shave(Duration::from_secs(1), clock.now()).is_expired(clock.now()));
    /// ```
    #[must_use]
    pub fn shave(self, margin: Duration, now: Instant) -> Self {
        match self.at.checked_sub(margin) {
            Some(at) => Self { at },
            None => self.min(Self { at: now }),
        }
    }

    /// The timeout to give an outgoing call at `now`: the time left, capped
    /// by the call's own limit (`None` for no limit of its own).
    ///
    /// Recompute it before every call: a call that starts later gets less.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, VirtualClock};
    ///
    /// let clock = VirtualClock::new();
    /// let d = Deadline::after(clock.now(), Duration::from_secs(1));
    /// assert_eq!(d.call_timeout(clock.now(), Some(Duration::from_secs(5))), Duration::from_secs(1));
    /// clock.sleep_blocking(Duration::from_millis(200));
    /// assert_eq!(d.call_timeout(clock.now(), None), Duration::from_millis(800));
    /// assert_eq!(
    ///     d.call_timeout(clock.now(), Some(Duration::from_millis(300))),
    ///     Duration::from_millis(300)
    /// );
    /// ```
    #[must_use]
    pub fn call_timeout(self, now: Instant, limit: Option<Duration>) -> Duration {
        let left = self.remaining(now);
        match limit {
            Some(limit) => left.min(limit),
            None => left,
        }
    }

    /// The deadline of an outgoing call started at `now` with its own
    /// `limit`: the earlier of this deadline and `now + limit`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, VirtualClock};
    ///
    /// let clock = VirtualClock::new();
    /// let d = Deadline::after(clock.now(), Duration::from_secs(1));
    /// let call = d.for_call(clock.now(), Some(Duration::from_millis(300)));
    /// assert_eq!(call.remaining(clock.now()), Duration::from_millis(300));
    /// assert_eq!(d.for_call(clock.now(), None), d);
    /// ```
    #[must_use]
    pub fn for_call(self, now: Instant, limit: Option<Duration>) -> Self {
        match limit {
            Some(limit) => self.min(Self::after(now, limit)),
            None => self,
        }
    }
}

/// About thirty years after `now`: "no deadline" for arithmetic that needs an
/// instant, without overflowing the platform's `Instant`.
pub(crate) fn far_future(now: Instant) -> Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    crate::clock::saturating_add(now, THIRTY_YEARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::VirtualClock;

    #[test]
    fn remaining_and_expiry_on_the_boundary() {
        let clock = VirtualClock::manual();
        let d = Deadline::from_now(&clock, Duration::from_millis(10));
        clock.advance(Duration::from_millis(9));
        assert_eq!(d.remaining(clock.now()), Duration::from_millis(1));
        assert!(!d.is_expired(clock.now()));
        clock.advance(Duration::from_millis(1));
        assert_eq!(d.remaining(clock.now()), Duration::ZERO);
        assert!(d.is_expired(clock.now()));
        clock.advance(Duration::from_secs(1));
        assert_eq!(d.remaining(clock.now()), Duration::ZERO);
    }

    #[test]
    fn after_saturates_instead_of_overflowing() {
        let now = VirtualClock::new().now();
        let d = Deadline::after(now, Duration::MAX);
        assert!(d.instant() > now);
        assert!(!d.is_expired(now));
    }

    #[test]
    fn earliest_of_many() {
        let now = VirtualClock::new().now();
        let ds: Vec<Deadline> = [5u64, 3, 9, 3]
            .iter()
            .map(|&s| Deadline::after(now, Duration::from_secs(s)))
            .collect();
        assert_eq!(
            Deadline::earliest_of(ds.iter().copied()),
            Some(Deadline::after(now, Duration::from_secs(3)))
        );
        assert_eq!(Deadline::earliest(None, None), None);
        assert_eq!(Deadline::earliest(Some(ds[0]), None), Some(ds[0]));
        assert_eq!(Deadline::earliest(None, Some(ds[1])), Some(ds[1]));
        assert_eq!(ds[0].min(ds[1]), ds[1]);
        assert_eq!(ds[1].min(ds[0]), ds[1]);
    }

    #[test]
    fn shaving_never_lengthens() {
        let clock = VirtualClock::manual();
        let now = clock.now();
        let d = Deadline::after(now, Duration::from_millis(100));
        assert_eq!(d.shave(Duration::ZERO, now), d);
        assert_eq!(
            d.shave(Duration::from_millis(30), now).remaining(now),
            Duration::from_millis(70)
        );
        // A margin reaching back past anything the platform can represent.
        let huge = d.shave(Duration::MAX, now);
        assert!(huge <= d);
        assert!(huge.is_expired(now));
        // An already-expired deadline stays expired and never moves later.
        clock.advance(Duration::from_secs(1));
        let late = clock.now();
        let shaved = d.shave(Duration::MAX, late);
        assert!(shaved <= d && shaved.is_expired(late));
    }

    #[test]
    fn outgoing_call_bounds() {
        let clock = VirtualClock::manual();
        let d = Deadline::from_now(&clock, Duration::from_secs(1));
        clock.advance(Duration::from_millis(200));
        let now = clock.now();
        assert_eq!(d.call_timeout(now, None), Duration::from_millis(800));
        assert_eq!(
            d.call_timeout(now, Some(Duration::from_secs(2))),
            Duration::from_millis(800)
        );
        assert_eq!(
            d.call_timeout(now, Some(Duration::from_millis(50))),
            Duration::from_millis(50)
        );
        assert_eq!(d.for_call(now, Some(Duration::from_secs(2))), d);
        assert_eq!(
            d.for_call(now, Some(Duration::from_millis(50))),
            Deadline::after(now, Duration::from_millis(50))
        );
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            d.call_timeout(clock.now(), Some(Duration::from_secs(2))),
            Duration::ZERO
        );
    }
}
