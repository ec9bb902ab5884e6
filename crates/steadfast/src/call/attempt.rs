//! One attempt, as the operation sees it.

use std::time::{Duration, Instant};

use super::{AttemptSet, EndpointId};
use crate::deadline::Deadline;

/// What the operation knows about the attempt it is making.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Attempt {
    /// The attempt's number, from 1 for the first.
    pub number: u32,
    /// The instant this attempt must be done by (not a length: see
    /// [`time_left`](Self::time_left)): the earliest of the call's deadline
    /// (itself the earliest of the ambient one, the caller's and
    /// `max_elapsed`) and the per-attempt timeout, if any is set. Pass it on
    /// to the callee (e.g. as a `grpc-timeout`), or stop early yourself. The
    /// executors also make it the ambient deadline
    /// ([`deadline::current`](crate::deadline::current)) while the attempt
    /// runs, so calls made inside it inherit it.
    pub deadline: Option<Deadline>,
    /// The other attempts of the same call still in flight when this one
    /// starts: always empty for a retry (attempts run one after another), the
    /// earlier copies still running for a [hedged](crate::hedge) call. A
    /// caller or load balancer can use it to send this copy elsewhere.
    pub in_flight: AttemptSet,
    /// How long the call waited, with nothing in flight, before this
    /// attempt: the backoff or the server's hint before a retry (as taken,
    /// after every cap); for a hedged copy, the time since the last copy
    /// failed when none was left in flight (a pushback's hold), else zero.
    /// Zero for the first attempt.
    pub waited: Duration,
    /// The endpoint the gate picked for this attempt, when the policy has
    /// an [endpoint set](crate::endpoint::Endpoints)
    /// ([`Limits::with_endpoints`](crate::policy::Limits::with_endpoints)):
    /// send it there. `None` without a set.
    pub endpoint: Option<EndpointId>,
}

impl Attempt {
    /// The attempt `number` with no deadline.
    ///
    /// ```
    /// assert!(steadfast::Attempt::new(1).is_first());
    /// ```
    #[must_use]
    pub const fn new(number: u32) -> Self {
        Self {
            number,
            deadline: None,
            in_flight: AttemptSet::new(),
            waited: Duration::ZERO,
            endpoint: None,
        }
    }

    /// Whether this is the call's first attempt.
    #[must_use]
    pub const fn is_first(&self) -> bool {
        self.number == 1
    }

    /// The time this attempt has left at `now` (read on the executor's
    /// clock), or `None` when it has no deadline. [`deadline`](Self::deadline)
    /// is an instant, not a length: this is the length, ready to send on as a
    /// timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::{Attempt, Deadline};
    ///
    /// let clock = VirtualClock::new();
    /// let mut attempt = Attempt::new(1);
    /// assert_eq!(attempt.time_left(clock.now()), None);
    /// attempt.deadline = Some(Deadline::after(clock.now(), Duration::from_millis(800)));
    /// clock.advance(Duration::from_millis(300));
    /// assert_eq!(attempt.time_left(clock.now()), Some(Duration::from_millis(500)));
    /// ```
    #[must_use]
    pub fn time_left(&self, now: Instant) -> Option<Duration> {
        self.deadline.map(|d| d.remaining(now))
    }
}
