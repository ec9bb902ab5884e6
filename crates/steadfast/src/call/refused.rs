//! What the gate says when it will not let an attempt through: [`Refused`],
//! the one refusal (a retry control's, a rate limit's or a concurrency
//! limit's), and the accounts of the two limits, [`RateRefused`] and
//! [`LimitRefused`].

use std::fmt;
use std::time::Duration;

use super::StopReason;

/// What [`Refused::by`] names for an endpoint set with no endpoint ready.
pub const NO_ENDPOINT: &str = "endpoint set";

/// What [`Refused::by`] names for an endpoint set's retry cap.
pub const RETRY_CAP: &str = "retry cap";

/// The name of a concurrency limit that was not given one.
pub const DEFAULT_LIMIT_NAME: &str = "concurrency limit";

/// A concurrency limit refused an attempt: every slot was taken (and its
/// queue was full, or the attempt waited in it as long as it may).
///
/// ```
/// use std::time::Duration;
/// use steadfast::limit::LimitRefused;
/// let refused = LimitRefused { by: "payments", in_flight: 20, limit: 20, waited: Duration::ZERO };
/// assert_eq!(refused.to_string(), "concurrency limit payments full: 20 in flight, limit 20");
/// let queued = LimitRefused { waited: Duration::from_millis(50), ..refused };
/// assert_eq!(queued.to_string(), "concurrency limit payments full: 20 in flight, limit 20, after 50ms in its queue");
/// let unnamed = LimitRefused { by: steadfast::limit::DEFAULT_NAME, ..refused };
/// assert_eq!(unnamed.to_string(), "concurrency limit full: 20 in flight, limit 20");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LimitRefused {
    /// The limit's name ([`ConcurrencyLimitBuilder::name`](crate::limit::ConcurrencyLimitBuilder::name)).
    pub by: &'static str,
    /// Attempts in flight under the limit when it refused.
    pub in_flight: u32,
    /// The limit then.
    pub limit: u32,
    /// How long the attempt waited in the limit's queue first (zero when
    /// it was refused at once).
    pub waited: Duration,
}

impl fmt::Display for LimitRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.by == DEFAULT_LIMIT_NAME {
            f.write_str("concurrency limit")?;
        } else {
            write!(f, "concurrency limit {}", self.by)?;
        }
        write!(
            f,
            " full: {} in flight, limit {}",
            self.in_flight, self.limit
        )?;
        if !self.waited.is_zero() {
            write!(
                f,
                ", after {} in its queue",
                super::error::Secs(self.waited)
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for LimitRefused {}

/// A call a [`RateLimit`](crate::rate::RateLimit) did not admit: which limit, and
/// how long until the same call would be admitted (`None`: never, its cost
/// is above a quota's burst).
///
/// ```
/// use std::time::Duration;
/// use steadfast::rate::RateRefused;
/// let r = RateRefused { by: "maps api", retry_after: Some(Duration::from_millis(250)) };
/// assert_eq!(r.to_string(), "rate limit maps api: admitted again in 250ms");
/// let never = RateRefused { by: "maps api", retry_after: None };
/// assert_eq!(never.to_string(), "rate limit maps api: the call's cost is above its burst");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateRefused {
    /// The limit's name.
    pub by: &'static str,
    /// The time until the call would be admitted, if it ever would.
    pub retry_after: Option<Duration>,
}

impl fmt::Display for RateRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.retry_after {
            Some(d) => write!(f, "rate limit {}: admitted again in {d:?}", self.by),
            None => write!(
                f,
                "rate limit {}: the call's cost is above its burst",
                self.by
            ),
        }
    }
}

impl std::error::Error for RateRefused {}

/// The one refusal: who would not let an attempt (or a whole call) go,
/// and how long until it would ([`retry_after`](Self::retry_after), the
/// one name for that time everywhere: the call's error, the HTTP and gRPC
/// errors, a server's `Retry-After` and pushback). Every executor ends a
/// call it refuses the same way: [`Refused::reason`] says why it stopped,
/// [`RetryError::with_refusal`](crate::RetryError::with_refusal) records
/// the refusal, [`RetryError::refusal`](crate::RetryError::refusal) gives
/// it back.
///
/// ```
/// use std::time::Duration;
/// use steadfast::StopReason;
/// use steadfast::call::{LimitRefused, RateRefused, Refused};
/// let rate = Refused::from(RateRefused { by: "maps api", retry_after: Some(Duration::from_millis(40)) });
/// assert_eq!((rate.by(), rate.retry_after()), ("maps api", Some(Duration::from_millis(40))));
/// assert_eq!(rate.reason(false), StopReason::Throttled);
/// let full = Refused::from(LimitRefused { by: "db", in_flight: 4, limit: 4, waited: Duration::ZERO });
/// assert_eq!((full.by(), full.retry_after()), ("db", None));
/// assert_eq!(full.reason(false), StopReason::LimitReached);
/// // A wait in the queue that ran into the call's deadline: the deadline stopped it.
/// assert_eq!(full.reason(true), StopReason::Deadline);
/// // What a throttled call names, and a full limit's own account.
/// assert_eq!((rate.throttled_by(), full.throttled_by()), (Some("maps api"), None));
/// assert_eq!(full.limit_refused().map(|l| l.limit), Some(4));
/// let open = Refused::Control { by: "circuit breaker", retry_after: Some(Duration::from_secs(5)) };
/// assert_eq!(open.to_string(), "refused by circuit breaker, for 5.0s more");
/// let none = Refused::NoEndpoint { endpoints: 3, retry_after: None };
/// assert_eq!((none.to_string(), none.reason(false)), ("no endpoint ready (of 3)".to_owned(), StopReason::NoEndpoint));
/// // Every endpoint held on its connection backoff: the first comes back in 1.2 s.
/// let held = Refused::NoEndpoint { endpoints: 3, retry_after: Some(Duration::from_millis(1200)) };
/// assert_eq!(held.to_string(), "no endpoint ready (of 3), the first back in 1.2s");
/// let capped = Refused::RetryCap { in_flight: 3, cap: 3 };
/// assert_eq!(capped.to_string(), "retry cap reached: 3 retries in flight over the endpoint set, cap 3");
/// assert_eq!(capped.reason(false), StopReason::RetryCapped);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// A retry control refused (a circuit breaker that is open, a budget
    /// or throttle with nothing to spend).
    Control {
        /// The control's name (for example `"token bucket"`).
        by: &'static str,
        /// How long the control said it would go on refusing, when it
        /// knows ([`RetryControl::retry_after`](crate::RetryControl::retry_after)).
        retry_after: Option<Duration>,
    },
    /// The rate limit had no turn for the attempt within its wait.
    Rate(RateRefused),
    /// The concurrency limit had no slot for the attempt within its wait.
    Limit(LimitRefused),
    /// The policy's [endpoint set](crate::endpoint::Endpoints) had no
    /// endpoint ready for the attempt (none at all, or none connected).
    NoEndpoint {
        /// How many endpoints the set had, none of them ready.
        endpoints: u32,
        /// How long until the first endpoint held out of the picking for a
        /// known time (on its connection backoff, after a request that
        /// never got through) comes back; `None` when none will by itself
        /// (an empty set, endpoints marked not ready).
        retry_after: Option<Duration>,
    },
    /// The policy's [endpoint set](crate::endpoint::Endpoints) had as many
    /// retries and hedged copies in flight as its
    /// [retry cap](crate::endpoint::RetryCap) allows: the retry (or copy)
    /// was not sent.
    RetryCap {
        /// Retries and hedged copies in flight over the set then.
        in_flight: u32,
        /// The cap then (its share of the attempts in flight, or its floor).
        cap: u32,
    },
}

impl Refused {
    /// The name of what refused.
    #[must_use]
    pub const fn by(&self) -> &'static str {
        match self {
            Self::Control { by, .. } => by,
            Self::Rate(r) => r.by,
            Self::Limit(l) => l.by,
            Self::NoEndpoint { .. } => NO_ENDPOINT,
            Self::RetryCap { .. } => RETRY_CAP,
        }
    }

    /// The name of the control or rate limit that refused: what a call
    /// stopped as [`StopReason::Throttled`] names (a concurrency limit's
    /// refusal is [`limit_refused`](Self::limit_refused) instead).
    #[must_use]
    pub const fn throttled_by(&self) -> Option<&'static str> {
        match self {
            Self::Control { by, .. } => Some(by),
            Self::Rate(r) => Some(r.by),
            Self::Limit(_) | Self::NoEndpoint { .. } | Self::RetryCap { .. } => None,
        }
    }

    /// A concurrency limit's account of its refusal, if it was one.
    #[must_use]
    pub const fn limit_refused(&self) -> Option<LimitRefused> {
        match self {
            Self::Limit(l) => Some(*l),
            Self::Control { .. }
            | Self::Rate(_)
            | Self::NoEndpoint { .. }
            | Self::RetryCap { .. } => None,
        }
    }

    /// How long until the same attempt would be admitted, where the
    /// refuser knows (a rate limit does, a circuit breaker does while
    /// open, an endpoint set whose endpoints are held on their connection
    /// backoff does; a concurrency limit cannot tell when a slot frees).
    #[must_use]
    pub const fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Control { retry_after, .. } | Self::NoEndpoint { retry_after, .. } => {
                *retry_after
            }
            Self::Rate(r) => r.retry_after,
            Self::Limit(_) | Self::RetryCap { .. } => None,
        }
    }

    /// Why a call this refusal ended stopped, `expired` saying whether the
    /// call's deadline had passed by then: a control's or a rate limit's
    /// refusal is [`StopReason::Throttled`]; a concurrency limit's is
    /// [`StopReason::LimitReached`], or [`StopReason::Deadline`] when the
    /// wait in its queue ran into the deadline; an endpoint set with none
    /// ready is [`StopReason::NoEndpoint`], its retry cap
    /// [`StopReason::RetryCapped`].
    #[must_use]
    pub const fn reason(&self, expired: bool) -> StopReason {
        match self {
            Self::NoEndpoint { .. } => StopReason::NoEndpoint,
            Self::RetryCap { .. } => StopReason::RetryCapped,
            Self::Control { .. } | Self::Rate(_) => StopReason::Throttled,
            Self::Limit(_) if expired => StopReason::Deadline,
            Self::Limit(_) => StopReason::LimitReached,
        }
    }
}

impl From<RateRefused> for Refused {
    fn from(refused: RateRefused) -> Self {
        Self::Rate(refused)
    }
}

impl From<LimitRefused> for Refused {
    fn from(refused: LimitRefused) -> Self {
        Self::Limit(refused)
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Control {
                by,
                retry_after: None,
            } => write!(f, "refused by {by}"),
            Self::Control {
                by,
                retry_after: Some(d),
            } => write!(f, "refused by {by}, for {} more", super::error::Secs(*d)),
            Self::Rate(r) => r.fmt(f),
            Self::Limit(l) => l.fmt(f),
            Self::NoEndpoint {
                endpoints,
                retry_after: None,
            } => write!(f, "no endpoint ready (of {endpoints})"),
            Self::NoEndpoint {
                endpoints,
                retry_after: Some(d),
            } => write!(
                f,
                "no endpoint ready (of {endpoints}), the first back in {}",
                super::error::Secs(*d)
            ),
            Self::RetryCap { in_flight, cap } => write!(
                f,
                "retry cap reached: {in_flight} retries in flight over the endpoint set, cap {cap}"
            ),
        }
    }
}

impl std::error::Error for Refused {}
