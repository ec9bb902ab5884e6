//! The limits every policy shares, and the rules that go with them: the
//! call's effective deadline, the cap on a single wait (server hints
//! included), and what the retry control hears of each attempt.
//!
//! A [`RetryPolicy`](crate::policy::RetryPolicy) and a [`HedgePolicy`](crate::policy::HedgePolicy)
//! each hold one [`Limits`]; both, and every integration that needs one of
//! these rules (telemetry that reports the wait a `Retry-After` will really
//! get), ask it here, so each rule is written once.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::call::Verdict;
use crate::config_error::ConfigError;
use crate::control::{Outcome, RetryControl};
use crate::deadline;
use crate::deadline::Deadline;
use crate::endpoint::Endpoints;
use crate::limit::ConcurrencyLimit;
use crate::rate::RateLimit;

/// The longest any single wait may be unless configured otherwise: five
/// minutes. Caps schedule delays and server hints alike, so a hostile
/// `Retry-After` of a year waits five minutes at most (and never past the
/// call's deadline).
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(300);

/// The limits a policy puts on every call: the cap on a single wait, the
/// overall time limit, and the shared retry control. Read with
/// [`RetryPolicy::limits`](crate::policy::RetryPolicy::limits) or
/// [`HedgePolicy::limits`](crate::policy::HedgePolicy::limits); set on the policy's
/// builder, one at a time or all at once with `.limits(..)`, which takes the
/// same function for either policy:
///
/// ```
/// use std::time::Duration;
/// use steadfast::policy::Limits;
/// use steadfast::{HedgePolicy, RetryPolicy};
///
/// // A method's timeout bounds every call, retried or hedged alike.
/// let bounded = |limits: Limits| limits.with_max_elapsed(Duration::from_secs(2));
/// let retry = RetryPolicy::builder().limits(bounded).build()?;
/// let hedge = HedgePolicy::builder(Duration::from_millis(20)).limits(bounded).build()?;
/// assert_eq!(retry.max_elapsed(), hedge.max_elapsed());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
///
/// ```
/// use std::time::{Duration, Instant};
/// use steadfast::policy::Wait;
/// use steadfast::{Deadline, RetryPolicy};
///
/// let policy = RetryPolicy::builder().max_delay(Duration::from_secs(10)).build()?;
/// let now = Instant::now();
/// let limits = policy.limits();
/// // A server asks for an hour: the call waits the cap.
/// assert_eq!(limits.wait(Duration::from_secs(3600), None, now), Wait::Capped(Duration::from_secs(10)));
/// // With 2 s left, even the cap does not fit: the call stops now instead.
/// let deadline = Deadline::after(now, Duration::from_secs(2));
/// assert_eq!(limits.wait(Duration::from_secs(3600), Some(deadline), now), Wait::PastDeadline);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Limits {
    max_delay: Duration,
    max_elapsed: Option<Duration>,
    control: Option<Arc<dyn RetryControl>>,
    concurrency: Option<ConcurrencyLimit>,
    /// The rate limit every attempt is admitted by, and how long an
    /// attempt may wait for its turn (zero: refused at once).
    rate: Option<(RateLimit, Duration)>,
    /// The endpoints every attempt is sent to one of.
    endpoints: Option<Endpoints>,
}

impl fmt::Debug for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limits")
            .field("max_delay", &self.max_delay)
            .field("max_elapsed", &self.max_elapsed)
            .field("control", &self.control)
            .field("concurrency", &self.concurrency)
            .field("rate", &self.rate)
            .field("endpoints", &self.endpoints)
            .finish()
    }
}

impl Default for Limits {
    /// Waits capped at [`DEFAULT_MAX_DELAY`], no overall limit, no control.
    fn default() -> Self {
        Self {
            max_delay: DEFAULT_MAX_DELAY,
            max_elapsed: None,
            control: None,
            concurrency: None,
            rate: None,
            endpoints: None,
        }
    }
}

/// The wait that will really happen for a wanted one (a schedule's delay
/// or a server's hint), from [`Limits::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wait {
    /// Waited as wanted.
    AsWanted(Duration),
    /// Longer than the cap on a single wait (`max_delay`): the cap is
    /// waited instead.
    Capped(Duration),
    /// The wait (after the cap) would end at or past the call's deadline:
    /// it is not taken, and the call stops now.
    PastDeadline,
}

impl Wait {
    /// The time that will be waited; `None` when the call stops instead.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::policy::Wait;
    /// assert_eq!(Wait::Capped(Duration::from_secs(1)).duration(), Some(Duration::from_secs(1)));
    /// assert_eq!(Wait::PastDeadline.duration(), None);
    /// ```
    #[must_use]
    pub const fn duration(self) -> Option<Duration> {
        match self {
            Self::AsWanted(d) | Self::Capped(d) => Some(d),
            Self::PastDeadline => None,
        }
    }
}

impl Limits {
    /// The longest single wait, whether from a schedule or a server hint.
    #[must_use]
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// The overall time limit of a call, measured from its start.
    #[must_use]
    pub fn max_elapsed(&self) -> Option<Duration> {
        self.max_elapsed
    }

    /// The shared retry control, if any.
    #[must_use]
    pub fn control(&self) -> Option<&Arc<dyn RetryControl>> {
        self.control.as_ref()
    }

    /// Whether the gate has nothing to ask: no rate limit, no
    /// concurrency limit and no endpoint set (every attempt is admitted
    /// with a free ticket).
    /// The async executor's lean first attempt asks this before
    /// [`admit`](Self::admit), so that a call under no limit keeps no
    /// ticket at all (a state without one, and a drop with nothing to
    /// check: 8.6 ns to 6.3 ns awaited, BENCHMARKS.md).
    #[inline]
    #[must_use]
    pub(crate) fn admits_all(&self) -> bool {
        self.rate.is_none() && self.concurrency.is_none() && self.endpoints.is_none()
    }

    /// The endpoint set every attempt is sent to one of, if any.
    #[inline]
    #[must_use]
    pub fn endpoints(&self) -> Option<&Endpoints> {
        self.endpoints.as_ref()
    }

    /// These limits with every attempt (first, retry, hedged copy) sent to
    /// an endpoint of `endpoints`, picked by the gate after the rate and
    /// concurrency limits ([the gate](crate::policy::gate)): the attempt is
    /// told which ([`Attempt::endpoint`](crate::Attempt::endpoint)), a retry
    /// or a hedged copy goes to an endpoint the call has not tried while
    /// one is eligible, and the attempt's outcome, as its classifier
    /// [answers](crate::Classify::answer), reaches the endpoint's load and
    /// outlier detection. The set is shared: every clone of these limits,
    /// and every integration given the same set, sees one load and one
    /// health per endpoint.
    ///
    /// ```
    /// use std::time::Instant;
    /// use steadfast::endpoint::Endpoints;
    /// use steadfast::RetryPolicy;
    /// let replicas = Endpoints::builder().build()?;
    /// replicas.insert("10.0.0.1:8080", Instant::now());
    /// let policy = RetryPolicy::builder()
    ///     .limits(|limits| limits.with_endpoints(replicas.clone()))
    ///     .build()?;
    /// assert_eq!(policy.limits().endpoints().map(Endpoints::len), Some(1));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn with_endpoints(mut self, endpoints: Endpoints) -> Self {
        self.endpoints = Some(endpoints);
        self
    }

    /// The concurrency limit every attempt takes a slot of, if any.
    #[inline]
    #[must_use]
    pub fn concurrency_limit(&self) -> Option<&ConcurrencyLimit> {
        self.concurrency.as_ref()
    }

    /// These limits with every attempt (first, retry, hedged copy) taking
    /// a slot of `limit` while it is in flight.
    #[must_use]
    pub fn with_concurrency_limit(mut self, limit: ConcurrencyLimit) -> Self {
        self.concurrency = Some(limit);
        self
    }

    /// The rate limit every attempt (first, retry, hedged copy) must be
    /// admitted by, if any.
    #[inline]
    #[must_use]
    pub fn rate_limit(&self) -> Option<&RateLimit> {
        self.rate.as_ref().map(|(limit, _)| limit)
    }

    /// How long an attempt may wait for the rate limit's admission (zero:
    /// refused at once); never past the call's deadline.
    #[must_use]
    pub fn rate_limit_max_wait(&self) -> Duration {
        self.rate.as_ref().map_or(Duration::ZERO, |(_, wait)| *wait)
    }

    /// These limits with every attempt admitted by `limit`: one it has no
    /// room for now is refused at once, and the call stops as
    /// [`StopReason::Throttled`](crate::StopReason::Throttled), the limit's
    /// name in [`refused_by`](crate::RetryError::refused_by) and the time
    /// until it would be admitted in
    /// [`retry_after`](crate::RetryError::retry_after).
    #[must_use]
    pub fn with_rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate = Some((limit, Duration::ZERO));
        self
    }

    /// These limits with every attempt admitted by `limit`, waiting for its
    /// turn up to `max_wait` (and never past the call's deadline: a turn
    /// that would come later is refused at once). A hedged copy never
    /// waits: one the limit has no room for now is not sent.
    #[must_use]
    pub fn with_rate_limit_waiting(mut self, limit: RateLimit, max_wait: Duration) -> Self {
        self.rate = Some((limit, max_wait));
        self
    }

    /// These limits with `max` as the longest single wait.
    #[must_use]
    pub fn with_max_delay(mut self, max: Duration) -> Self {
        self.max_delay = max;
        self
    }

    /// These limits with an overall limit of `limit` from a call's start.
    #[must_use]
    pub fn with_max_elapsed(mut self, limit: Duration) -> Self {
        self.max_elapsed = Some(limit);
        self
    }

    /// These limits with `control` deciding whether a call may go (again).
    #[must_use]
    pub fn with_control(mut self, control: Arc<dyn RetryControl>) -> Self {
        self.control = Some(control);
        self
    }

    /// The error for limits no call could run under (`what` names the
    /// policy): a zero `max_elapsed`.
    pub(crate) fn check(&self, what: &'static str) -> Result<(), ConfigError> {
        if self.max_elapsed == Some(Duration::ZERO) {
            return Err(ConfigError::new(
                what,
                "max_elapsed",
                "must be greater than zero",
                Duration::ZERO,
            ));
        }
        Ok(())
    }

    /// A call's effective deadline: the earliest of `given`, the [ambient
    /// deadline](crate::deadline::current) and, with a `max_elapsed`, that
    /// long after the call's start. The start is read from `now` only when
    /// there is a `max_elapsed`, and returned then.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use steadfast::HedgePolicy;
    /// let policy = HedgePolicy::builder(Duration::from_millis(5)).max_elapsed(Duration::from_secs(1)).build()?;
    /// let t0 = Instant::now();
    /// let (deadline, started) = policy.limits().deadline(None, || t0);
    /// assert_eq!((deadline.map(|d| d.instant()), started), (Some(t0 + Duration::from_secs(1)), Some(t0)));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[inline]
    pub fn deadline(
        &self,
        given: Option<Deadline>,
        now: impl FnOnce() -> Instant,
    ) -> (Option<Deadline>, Option<Instant>) {
        let deadline = Deadline::earliest(given, deadline::current());
        match self.max_elapsed {
            None => (deadline, None),
            Some(limit) => {
                let now = now();
                let own = Deadline::after(now, limit);
                (Deadline::earliest(deadline, Some(own)), Some(now))
            }
        }
    }

    /// The wait that will really happen for `wanted` (a schedule's delay or
    /// a server's hint: `Retry-After`, gRPC pushback) at `now`, for a call
    /// whose deadline is `deadline`: capped at `max_delay`, and not taken
    /// at all when it would end at or past the deadline. The one rule both
    /// executors and every integration's telemetry follow.
    #[inline]
    #[must_use]
    pub fn wait(&self, wanted: Duration, deadline: Option<Deadline>, now: Instant) -> Wait {
        let wait = if wanted > self.max_delay {
            Wait::Capped(self.max_delay)
        } else {
            Wait::AsWanted(wanted)
        };
        match (wait.duration(), deadline) {
            (Some(d), Some(deadline)) if d >= deadline.remaining(now) => Wait::PastDeadline,
            _ => wait,
        }
    }

    /// `wanted`, capped at `max_delay` (no deadline considered): the
    /// hedger's rule for a pushback, after which its copies are timed.
    #[inline]
    #[must_use]
    pub(crate) fn cap(&self, wanted: Duration) -> Duration {
        wanted.min(self.max_delay)
    }

    /// Tells the control, if there is one, what it hears of an attempt the
    /// classifier judged `verdict` ([`Outcome::of`]), with its duration when
    /// `took` knows it (asked only when the control hears something).
    #[inline]
    pub(crate) fn hear(&self, verdict: Verdict, took: impl FnOnce() -> Option<Duration>) {
        if let Some(control) = &self.control
            && let Some(outcome) = Outcome::of(verdict)
        {
            match took() {
                None => control.record(outcome),
                Some(took) => control.record_timed(outcome, took),
            }
        }
    }
}
