//! The time budget of one request being handled: the effective timeout of
//! every outgoing call it makes.

use std::time::{Duration, Instant};

use super::Deadline;
use super::ambient::current;

/// The deadlines that bound the work for one incoming request, and the rule
/// for the calls it makes:
///
/// **effective timeout of an outgoing call = min(link deadline, message
/// deadline, call timeout)**, recomputed from the time left when each call
/// starts.
///
/// - the **link deadline** came with the request from upstream (a header, or
///   the ambient deadline): how long the caller is still willing to wait;
/// - the **message deadline** is this service's own limit for handling one
///   request, set when the request arrived;
/// - the **call timeout** is the outgoing call's own limit.
///
/// Because the first two are absolute instants, time spent on earlier calls
/// is subtracted automatically: if a request arrived with 1 s and its first
/// call took 200 ms, the next call gets at most 800 ms.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Deadline;
/// use steadfast::clock::{Clock, VirtualClock};
/// use steadfast::deadline::TimeBudget;
///
/// let clock = VirtualClock::new();
/// let link = Deadline::after(clock.now(), Duration::from_secs(1));
/// let budget = TimeBudget::start(clock.now(), Some(link), Some(Duration::from_secs(5)));
/// assert_eq!(budget.call_timeout(clock.now(), Some(Duration::from_secs(2))), Some(Duration::from_secs(1)));
/// clock.sleep_blocking(Duration::from_millis(200)); // the first call
/// assert_eq!(budget.call_timeout(clock.now(), None), Some(Duration::from_millis(800)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TimeBudget {
    link: Option<Deadline>,
    message: Option<Deadline>,
}

impl TimeBudget {
    /// No deadline at all.
    pub const UNBOUNDED: Self = Self {
        link: None,
        message: None,
    };

    /// A budget from the two deadlines (`None` for "none").
    ///
    /// ```
    /// use steadfast::deadline::TimeBudget;
    /// assert_eq!(TimeBudget::new(None, None), TimeBudget::UNBOUNDED);
    /// ```
    #[must_use]
    pub const fn new(link: Option<Deadline>, message: Option<Deadline>) -> Self {
        Self { link, message }
    }

    /// The budget of a request that arrived at `now` with `link` from
    /// upstream, handled by a service whose limit per request is
    /// `message_timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::deadline::TimeBudget;
    ///
    /// let clock = VirtualClock::new();
    /// let budget = TimeBudget::start(clock.now(), None, Some(Duration::from_secs(30)));
    /// assert_eq!(budget.remaining(clock.now()), Some(Duration::from_secs(30)));
    /// ```
    #[must_use]
    pub fn start(now: Instant, link: Option<Deadline>, message_timeout: Option<Duration>) -> Self {
        Self {
            link,
            message: message_timeout.map(|t| Deadline::after(now, t)),
        }
    }

    /// [`start`](Self::start) with the ambient deadline
    /// ([`current`](super::current)) as the link deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::deadline::TimeBudget;
    /// use steadfast::deadline;
    ///
    /// let clock = VirtualClock::new();
    /// let d = Deadline::after(clock.now(), Duration::from_secs(3));
    /// let budget = deadline::scope(d, || TimeBudget::from_ambient(clock.now(), None));
    /// assert_eq!(budget.link(), Some(d));
    /// ```
    #[must_use]
    pub fn from_ambient(now: Instant, message_timeout: Option<Duration>) -> Self {
        Self::start(now, current(), message_timeout)
    }

    /// The deadline propagated from upstream.
    #[must_use]
    pub const fn link(&self) -> Option<Deadline> {
        self.link
    }

    /// This service's own deadline for the request.
    #[must_use]
    pub const fn message(&self) -> Option<Deadline> {
        self.message
    }

    /// The deadline of the request: the earlier of link and message.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::deadline::TimeBudget;
    ///
    /// let now = VirtualClock::new().now();
    /// let link = Deadline::after(now, Duration::from_secs(9));
    /// let budget = TimeBudget::start(now, Some(link), Some(Duration::from_secs(4)));
    /// assert_eq!(budget.deadline(), Some(Deadline::after(now, Duration::from_secs(4))));
    /// ```
    #[must_use]
    pub fn deadline(&self) -> Option<Deadline> {
        Deadline::earliest(self.link, self.message)
    }

    /// Time left for the request at `now`; `None` when unbounded.
    #[must_use]
    pub fn remaining(&self, now: Instant) -> Option<Duration> {
        self.deadline().map(|d| d.remaining(now))
    }

    /// Whether the request's deadline has passed at `now`.
    ///
    /// ```
    /// use steadfast::deadline::TimeBudget;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// assert!(!TimeBudget::UNBOUNDED.is_expired(VirtualClock::new().now()));
    /// ```
    #[must_use]
    pub fn is_expired(&self, now: Instant) -> bool {
        self.deadline().is_some_and(|d| d.is_expired(now))
    }

    /// The deadline of an outgoing call starting at `now` with its own
    /// `call_timeout`: the earliest of link, message and `now + call_timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::deadline::TimeBudget;
    ///
    /// let clock = VirtualClock::new();
    /// let budget = TimeBudget::start(clock.now(), None, Some(Duration::from_secs(1)));
    /// let call = budget.call_deadline(clock.now(), Some(Duration::from_millis(100))).unwrap();
    /// assert_eq!(call.remaining(clock.now()), Duration::from_millis(100));
    /// assert_eq!(TimeBudget::UNBOUNDED.call_deadline(clock.now(), None), None);
    /// ```
    #[must_use]
    pub fn call_deadline(&self, now: Instant, call_timeout: Option<Duration>) -> Option<Deadline> {
        let own = call_timeout.map(|t| Deadline::after(now, t));
        Deadline::earliest(self.deadline(), own)
    }

    /// The effective timeout of an outgoing call starting at `now`: the
    /// minimum of the time left to the link deadline, to the message
    /// deadline, and `call_timeout`. `None` when all three are absent;
    /// zero once the request's deadline has passed (do not make the call).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::deadline::TimeBudget;
    ///
    /// let clock = VirtualClock::new();
    /// let budget = TimeBudget::start(clock.now(), None, Some(Duration::from_secs(1)));
    /// clock.sleep_blocking(Duration::from_secs(2));
    /// assert_eq!(budget.call_timeout(clock.now(), Some(Duration::from_secs(5))), Some(Duration::ZERO));
    /// ```
    #[must_use]
    pub fn call_timeout(&self, now: Instant, call_timeout: Option<Duration>) -> Option<Duration> {
        match (self.remaining(now), call_timeout) {
            (Some(left), Some(own)) => Some(left.min(own)),
            (left, None) => left,
            (None, own) => own,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, VirtualClock};
    use crate::deadline::{DeadlineHeader, scope};

    const MS: fn(u64) -> Duration = Duration::from_millis;
    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn each_call_gets_what_is_left() {
        // B received 1 s; its first call to C took 200 ms; the next gets 800 ms.
        let clock = VirtualClock::new();
        let link = Deadline::after(clock.now(), S(1));
        let b = TimeBudget::start(clock.now(), Some(link), None);
        assert_eq!(b.call_timeout(clock.now(), Some(S(2))), Some(S(1)));
        clock.sleep_blocking(MS(200));
        assert_eq!(b.call_timeout(clock.now(), Some(S(2))), Some(MS(800)));
        assert_eq!(b.call_timeout(clock.now(), Some(MS(500))), Some(MS(500)));
        clock.sleep_blocking(MS(800));
        assert_eq!(
            b.call_timeout(clock.now(), Some(S(2))),
            Some(Duration::ZERO)
        );
        assert!(b.is_expired(clock.now()));
    }

    #[test]
    fn minimum_of_the_three() {
        let clock = VirtualClock::new();
        let now = clock.now();
        let cases = [
            // (link, message, call) -> effective
            (Some(3), Some(5), Some(7), Some(3)),
            (Some(5), Some(3), Some(7), Some(3)),
            (Some(7), Some(5), Some(3), Some(3)),
            (None, Some(5), Some(7), Some(5)),
            (Some(5), None, None, Some(5)),
            (None, None, Some(7), Some(7)),
            (None, None, None, None),
        ];
        for (link, message, call, want) in cases {
            let budget = TimeBudget::start(
                now,
                link.map(|l| Deadline::after(now, S(l))),
                message.map(S),
            );
            assert_eq!(
                budget.call_timeout(now, call.map(S)),
                want.map(S),
                "{link:?} {message:?} {call:?}"
            );
            assert_eq!(
                budget
                    .call_deadline(now, call.map(S))
                    .map(|d| d.remaining(now)),
                want.map(S)
            );
        }
    }

    /// The worked example of the module docs: 30 s at A, 7 s spent, 23 s to
    /// B, 4 s spent, 19 s to C; each hop on its own clock, the budget carried
    /// by the header between them.
    #[test]
    fn worked_example_a_b_c() {
        let header = DeadlineHeader::default();
        let (clock_a, clock_b, clock_c) = (
            VirtualClock::new(),
            VirtualClock::new(),
            VirtualClock::new(),
        );

        // A: a 30 s budget of its own, 7 s of work, then the call to B.
        let a = TimeBudget::start(clock_a.now(), None, Some(S(30)));
        clock_a.sleep_blocking(S(7));
        let to_b = a.call_timeout(clock_a.now(), None).unwrap();
        assert_eq!(to_b, S(23));
        let wire = header.encode(to_b);
        assert_eq!(wire.as_str(), "23000000u");

        // B: the link deadline from the header, a generous limit of its own
        // (60 s: it cannot extend the 23 s), 4 s of work, then the call to C.
        let link = header
            .decode_deadline(wire.as_bytes(), clock_b.now())
            .unwrap();
        let b = TimeBudget::start(clock_b.now(), Some(link), Some(S(60)));
        clock_b.sleep_blocking(S(4));
        let to_c = b.call_timeout(clock_b.now(), Some(S(45))).unwrap();
        assert_eq!(to_c, S(19));

        // C: sees 19 s.
        let wire = header.encode(to_c);
        let c = header
            .decode_deadline(wire.as_bytes(), clock_c.now())
            .unwrap();
        assert_eq!(c.remaining(clock_c.now()), S(19));
    }

    #[test]
    fn ambient_link_deadline() {
        let clock = VirtualClock::new();
        let d = Deadline::after(clock.now(), S(2));
        let budget = scope(d, || TimeBudget::from_ambient(clock.now(), Some(S(10))));
        assert_eq!(budget.link(), Some(d));
        assert_eq!(budget.deadline(), Some(d));
        assert_eq!(
            TimeBudget::from_ambient(clock.now(), None),
            TimeBudget::UNBOUNDED
        );
    }
}
