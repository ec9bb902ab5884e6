//! [`RetryPolicy`] and its builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Limits;
use crate::backoff::{Backoff, Schedule};
use crate::call::Lend;
use crate::config_error::ConfigError;
use crate::control::RetryControl;

#[cfg(doc)]
use super::{CallState, DEFAULT_MAX_DELAY};

/// The default number of attempts, counting the first: 3.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

/// The most times a call is requeued, by default
/// ([`RetryPolicyBuilder::max_requeues`]).
pub const DEFAULT_MAX_REQUEUES: u32 = 3;

/// How a call retries: attempts, backoff, limits and retry control.
///
/// Cheap to clone (a schedule value plus an optional `Arc`); share one
/// between many calls. See the [module docs](super) for the decision engine
/// and [`retry`](crate::retry) for the executors.
#[derive(Clone)]
pub struct RetryPolicy<S = Backoff> {
    pub(super) schedule: S,
    pub(super) max_attempts: u32,
    /// The most times a call is requeued ([`Verdict::Unsent`](crate::Verdict::Unsent)).
    pub(super) max_requeues: u32,
    pub(super) limits: Limits,
    pub(super) attempt_timeout: Option<Duration>,
    /// `is_lean()`, worked out once by `build` (one load on the hot path).
    pub(super) lean: bool,
    /// Whether the control wants attempt durations, asked once by `build`.
    pub(super) timed: bool,
}

impl<S> Lend for RetryPolicy<S> {
    type Policy = Self;
    #[inline]
    fn policy(&self) -> &Self {
        self
    }
}

impl<S: fmt::Debug> fmt::Debug for RetryPolicy<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("schedule", &self.schedule)
            .field("max_attempts", &self.max_attempts)
            .field("max_requeues", &self.max_requeues)
            .field("max_delay", &self.limits.max_delay())
            .field("max_elapsed", &self.limits.max_elapsed())
            .field("attempt_timeout", &self.attempt_timeout)
            .field("control", &self.limits.control())
            .field("concurrency_limit", &self.limits.concurrency_limit())
            .finish()
    }
}

impl RetryPolicy<Backoff> {
    /// A builder with every option at its default: 3 attempts,
    /// [`Backoff::default`], waits capped at [`DEFAULT_MAX_DELAY`], no overall
    /// limit, no per-attempt timeout, no retry control.
    ///
    /// ```
    /// let policy = steadfast::RetryPolicy::builder().max_attempts(5).build()?;
    /// assert_eq!(policy.max_attempts(), 5);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn builder() -> RetryPolicyBuilder<Backoff> {
        RetryPolicyBuilder::new(Backoff::default())
    }
}

impl Default for RetryPolicy<Backoff> {
    /// The builder's defaults (see [`RetryPolicy::builder`]).
    fn default() -> Self {
        RetryPolicyBuilder::new(Backoff::default()).policy
    }
}

impl<S> RetryPolicy<S> {
    /// The backoff schedule.
    pub fn schedule(&self) -> &S {
        &self.schedule
    }

    /// The most attempts a call makes, counting the first.
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The most times a call over an endpoint set is requeued (sent again
    /// elsewhere after a failure that never reached a server, without
    /// using one of its attempts).
    #[must_use]
    pub fn max_requeues(&self) -> u32 {
        self.max_requeues
    }

    /// The longest single wait, whether from the schedule or a server hint.
    #[must_use]
    pub fn max_delay(&self) -> Duration {
        self.limits.max_delay()
    }

    /// The overall time limit of a call, measured from its start.
    #[must_use]
    pub fn max_elapsed(&self) -> Option<Duration> {
        self.limits.max_elapsed()
    }

    /// The time limit of each attempt.
    #[must_use]
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }

    /// The shared retry control, if any.
    #[must_use]
    pub fn control(&self) -> Option<&Arc<dyn RetryControl>> {
        self.limits.control()
    }

    /// The limits this policy shares with every other (the cap on a single
    /// wait, the overall limit, the control), and their rules: the wait a
    /// server's hint will really get ([`Limits::wait`]), the call's
    /// effective deadline.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether a call's first attempt needs no per-call state: no retry
    /// control to consult, no rate limit whose turn it may wait for (one
    /// that refuses at once is asked on the way), no time limit to start,
    /// no endpoint set (whose pick the call's state records, so that a
    /// retry goes elsewhere).
    /// Then
    /// [`decide`](Self::decide) says [`Decision::Succeed`](super::Decision::Succeed) for a
    /// [`Verdict::Success`](crate::call::Verdict::Success) whatever the state, and
    /// the executors run the first attempt before they make a
    /// [`CallState`], so a call that succeeds at once does no more than
    /// the operation and its classification.
    ///
    /// ```
    /// use std::time::Duration;
    /// let lean = steadfast::RetryPolicy::builder().build()?;
    /// assert!(lean.is_lean());
    /// let timed = steadfast::RetryPolicy::builder().max_elapsed(Duration::from_secs(1)).build()?;
    /// assert!(!timed.is_lean());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn is_lean(&self) -> bool {
        self.lean
    }
}

impl<S: Schedule + Clone> RetryPolicy<S> {
    /// A builder that starts from this policy's settings, to derive another
    /// (for example the same policy with a single attempt).
    ///
    /// ```
    /// let policy = steadfast::RetryPolicy::builder().max_attempts(4).build()?;
    /// let once = policy.to_builder().max_attempts(1).build()?;
    /// assert_eq!((policy.max_attempts(), once.max_attempts()), (4, 1));
    /// assert_eq!(once.max_delay(), policy.max_delay());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn to_builder(&self) -> RetryPolicyBuilder<S> {
        RetryPolicyBuilder {
            policy: self.clone(),
            attempts_set: true,
        }
    }

    /// The same policy with one attempt (no retry, no requeue): for a
    /// request that cannot be sent twice, or even sent again after it was
    /// never sent (a streaming body is consumed by the attempt that fails
    /// to send it).
    ///
    /// ```
    /// let policy = steadfast::RetryPolicy::builder().max_attempts(4).build()?;
    /// let single = policy.single_attempt();
    /// assert_eq!((single.max_attempts(), single.max_requeues()), (1, 0));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn single_attempt(&self) -> Self {
        Self {
            max_attempts: 1,
            max_requeues: 0,
            ..self.clone()
        }
    }
}

impl<S: Schedule> RetryPolicy<S> {
    /// A builder around a custom schedule; every other option at its default.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::RetryPolicy;
    /// use steadfast::backoff::Backoff;
    /// let policy = RetryPolicy::with_schedule(Backoff::constant(Duration::from_secs(1)).build()?)
    ///     .max_attempts(2)
    ///     .build()?;
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn with_schedule(schedule: S) -> RetryPolicyBuilder<S> {
        RetryPolicyBuilder::new(schedule)
    }
}

/// Builds a [`RetryPolicy`]; every option has a default, so adding one never
/// breaks a caller.
#[derive(Clone)]
pub struct RetryPolicyBuilder<S> {
    policy: RetryPolicy<S>,
    /// Whether `max_attempts` was set (or came from a built policy), as
    /// opposed to the default, which the schedule's own limit replaces.
    attempts_set: bool,
}

impl<S: fmt::Debug> fmt::Debug for RetryPolicyBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RetryPolicyBuilder")
            .field(&self.policy)
            .finish()
    }
}

impl<S: Schedule> RetryPolicyBuilder<S> {
    fn new(schedule: S) -> Self {
        Self {
            policy: RetryPolicy {
                schedule,
                max_attempts: DEFAULT_MAX_ATTEMPTS,
                max_requeues: DEFAULT_MAX_REQUEUES,
                limits: Limits::default(),
                attempt_timeout: None,
                lean: true,
                timed: false,
            },
            attempts_set: false,
        }
    }

    /// The most attempts a call makes, **counting the first** (1 means no
    /// retry; must be at least 1).
    ///
    /// This is the place for the limit. A schedule may carry one of its own
    /// ([`Backoff`]'s `max_attempts`, for a schedule used alone); then:
    /// - unset here, the policy adopts the schedule's limit (else the
    ///   default, 3);
    /// - set here, it must not exceed the schedule's: attempts the schedule
    ///   has no delay for could never be made, so [`build`](Self::build)
    ///   rejects that with a [`ConfigError`] naming both numbers. A smaller
    ///   limit here is fine (a derived single-attempt policy, say).
    ///
    /// ```
    /// use steadfast::{Backoff, RetryPolicy};
    /// let five = Backoff::exponential().max_attempts(5).build()?;
    /// // Unset on the policy: the schedule's limit holds.
    /// assert_eq!(RetryPolicy::builder().backoff(five.clone()).build()?.max_attempts(), 5);
    /// // Fewer on the policy: the policy's holds.
    /// assert_eq!(RetryPolicy::builder().backoff(five.clone()).max_attempts(2).build()?.max_attempts(), 2);
    /// // More on the policy than the schedule allows: an error, not a silent 5.
    /// let err = RetryPolicy::builder().backoff(five).max_attempts(8).build().unwrap_err();
    /// assert_eq!(err.field(), "max_attempts");
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.policy.max_attempts = attempts;
        self.attempts_set = true;
        self
    }

    /// The most times a call over an [endpoint set](crate::endpoint::Endpoints)
    /// is *requeued* (default [`DEFAULT_MAX_REQUEUES`], 3): after a failure
    /// that certainly never reached a server ([`Verdict::Unsent`](crate::Verdict::Unsent):
    /// a refused connection), the request goes at once to an endpoint the
    /// call has not tried, without using one of `max_attempts` and without
    /// a backoff wait. Each requeue is charged to the retry control as a
    /// retry (a budget pays for it; one with nothing left stops the call),
    /// and only goes where an untried endpoint is eligible; past the
    /// bound, or with nowhere new to go, such a failure is an ordinary
    /// retry. Finagle bounds a request's requeues by a fifth of its retry
    /// budget's balance; a count is the same guard for a policy with any
    /// control, or none. 0 turns requeueing off.
    ///
    /// ```
    /// let policy = steadfast::RetryPolicy::builder().max_requeues(1).build()?;
    /// assert_eq!(policy.max_requeues(), 1);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn max_requeues(mut self, requeues: u32) -> Self {
        self.policy.max_requeues = requeues;
        self
    }

    /// The backoff schedule (default [`Backoff::default`]).
    pub fn backoff<S2: Schedule>(self, schedule: S2) -> RetryPolicyBuilder<S2> {
        let p = self.policy;
        RetryPolicyBuilder {
            policy: RetryPolicy {
                schedule,
                max_attempts: p.max_attempts,
                max_requeues: p.max_requeues,
                limits: p.limits,
                attempt_timeout: p.attempt_timeout,
                lean: p.lean,
                timed: p.timed,
            },
            attempts_set: self.attempts_set,
        }
    }

    /// The longest single wait, from the schedule or a server hint (default
    /// [`DEFAULT_MAX_DELAY`]).
    #[must_use]
    pub fn max_delay(self, max: Duration) -> Self {
        self.limits(|l| l.with_max_delay(max))
    }

    /// The overall limit of a call, from its start: no wait ends past it and
    /// no attempt runs past it (default none).
    #[must_use]
    pub fn max_elapsed(self, limit: Duration) -> Self {
        self.limits(|l| l.with_max_elapsed(limit))
    }

    /// The limit of each attempt (default none). The async executor drops an
    /// attempt that runs past it and counts it as a retryable failure; the
    /// blocking executor hands it to the operation in [`Attempt`](crate::call::Attempt).
    #[must_use]
    pub fn attempt_timeout(mut self, limit: Duration) -> Self {
        self.policy.attempt_timeout = Some(limit);
        self
    }

    /// A shared retry control (budget, token bucket, throttle) that may
    /// refuse retries (default none).
    #[must_use]
    pub fn control(self, control: Arc<dyn RetryControl>) -> Self {
        self.limits(|l| l.with_control(control))
    }

    /// A concurrency limit: every attempt, first or retry, takes one of its
    /// slots while in flight, and gives it back on every path (default
    /// none). A call the limit refuses stops as
    /// [`StopReason::LimitReached`](crate::StopReason::LimitReached).
    #[must_use]
    pub fn concurrency_limit(self, limit: crate::limit::ConcurrencyLimit) -> Self {
        self.limits(|l| l.with_concurrency_limit(limit))
    }

    /// An endpoint set: every attempt goes to one of its endpoints, picked
    /// by load among the healthy ones; a retry goes elsewhere than the
    /// endpoints the call already tried while another is eligible
    /// (default none: see [`Limits::with_endpoints`]). A call with no
    /// endpoint ready stops as [`StopReason::NoEndpoint`](crate::StopReason::NoEndpoint).
    #[must_use]
    pub fn endpoints(self, endpoints: crate::endpoint::Endpoints) -> Self {
        self.limits(|l| l.with_endpoints(endpoints))
    }

    /// A rate limit: every attempt, first or retry, must be admitted by it
    /// (default none). One it has no room for now stops the call as
    /// [`StopReason::Throttled`](crate::StopReason::Throttled), with the
    /// limit's name and the time until it would be admitted
    /// ([`RetryError::retry_after`](crate::RetryError::retry_after)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, SystemClock};
    /// use steadfast::rate::{Quota, RateLimit};
    /// use steadfast::{RetryPolicy, Retryable, StopReason};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let quota = RateLimit::builder().name("maps api").quota(Quota::per_second(1)?).build()?;
    /// let policy = RetryPolicy::builder().rate_limit(quota).build()?;
    /// assert!((|_| async { Ok::<_, std::io::Error>(()) }).retry(&policy).await.is_ok());
    /// let err = (|_| async { Ok::<_, std::io::Error>(()) }).retry(&policy).await.unwrap_err();
    /// assert_eq!((err.reason(), err.refused_by()), (StopReason::Throttled, Some("maps api")));
    /// // A second at most, padded by the clock's tick.
    /// assert!(err.retry_after().is_some_and(|d| d <= Duration::from_secs(1) + SystemClock.tick_lag()));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn rate_limit(self, limit: crate::rate::RateLimit) -> Self {
        self.limits(|l| l.with_rate_limit(limit))
    }

    /// A rate limit whose turn an attempt waits for, up to `max_wait` and
    /// never past the call's deadline (a turn that would come later stops
    /// the call at once, as [`rate_limit`](Self::rate_limit) does).
    #[must_use]
    pub fn rate_limit_waiting(
        self,
        limit: crate::rate::RateLimit,
        max_wait: std::time::Duration,
    ) -> Self {
        self.limits(|l| l.with_rate_limit_waiting(limit, max_wait))
    }

    /// Changes the limits this policy shares with a hedge policy (the cap
    /// on a single wait, the overall limit, the control) with `f`: one
    /// function can bound both kinds of policy alike (see [`Limits`]).
    #[must_use]
    pub fn limits(mut self, f: impl FnOnce(Limits) -> Limits) -> Self {
        self.policy.limits = f(std::mem::take(&mut self.policy.limits));
        self
    }

    /// Checks the settings and builds the policy.
    ///
    /// # Errors
    /// A [`ConfigError`] when `max_attempts` is 0 or more than the
    /// schedule's own limit (see [`max_attempts`](Self::max_attempts)), or
    /// `max_elapsed` or `attempt_timeout` is zero.
    pub fn build(mut self) -> Result<RetryPolicy<S>, ConfigError> {
        const WHAT: &str = "retry policy";
        if let Some(limit) = self.policy.schedule.max_attempts() {
            if !self.attempts_set {
                self.policy.max_attempts = limit;
            } else if self.policy.max_attempts > limit {
                return Err(ConfigError::new(
                    WHAT,
                    "max_attempts",
                    "must not exceed the backoff's own max_attempts, which would silently \
                     win; set the limit in one place (the policy's)",
                    format_args!("{} (the backoff's: {limit})", self.policy.max_attempts),
                ));
            }
        }
        let p = &self.policy;
        if p.max_attempts == 0 {
            return Err(ConfigError::new(
                WHAT,
                "max_attempts",
                "must be at least 1 (it counts the first attempt)",
                p.max_attempts,
            ));
        }
        p.limits.check(WHAT)?;
        if p.attempt_timeout == Some(Duration::ZERO) {
            return Err(ConfigError::new(
                WHAT,
                "attempt_timeout",
                "must be greater than zero",
                Duration::ZERO,
            ));
        }
        let mut policy = self.policy;
        let limits = &policy.limits;
        // A rate limit that refuses at once is asked on the lean path too;
        // one whose turn may be waited for needs the running stage.
        // An endpoint set makes every attempt's ticket hold a pick, which
        // the running stage keeps: the lean first attempt holds a slot alone.
        policy.lean = limits.control().is_none()
            && limits.rate_limit_max_wait().is_zero()
            && limits.max_elapsed().is_none()
            && policy.attempt_timeout.is_none()
            && limits.endpoints().is_none();
        policy.timed = limits.control().is_some_and(RetryControl::wants_durations);
        Ok(policy)
    }
}
