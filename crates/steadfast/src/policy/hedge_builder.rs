//! [`HedgePolicyBuilder`]: how a [`HedgePolicy`] is configured and checked.

use std::sync::Arc;
use std::time::Duration;

use super::retry::DEFAULT_MAX_REQUEUES;
use super::{HedgeDelay, HedgePolicy, Limits};
use crate::call::MAX_HEDGE_ATTEMPTS;
use crate::config_error::ConfigError;
use crate::control::RetryControl;

#[cfg(doc)]
use super::DEFAULT_MAX_DELAY;
#[cfg(doc)]
use crate::Verdict;

impl HedgePolicy {
    /// A builder with `delay` between copies (a `Duration`, or an
    /// `Arc<AdaptiveDelay>`), 2 attempts, pushback capped at
    /// [`DEFAULT_MAX_DELAY`], no overall limit and no retry control.
    ///
    /// ```
    /// use std::time::Duration;
    /// let policy = steadfast::HedgePolicy::builder(Duration::from_millis(20)).max_attempts(3).build()?;
    /// assert_eq!(policy.max_attempts(), 3);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn builder(delay: impl Into<HedgeDelay>) -> HedgePolicyBuilder {
        HedgePolicyBuilder {
            policy: HedgePolicy {
                max_attempts: 2,
                max_requeues: DEFAULT_MAX_REQUEUES,
                delay: delay.into(),
                limits: Limits::default(),
            },
        }
    }

    /// A builder that starts from this policy's settings, to derive another
    /// (for example the same policy with a single copy).
    ///
    /// ```
    /// use std::time::Duration;
    /// let policy = steadfast::HedgePolicy::builder(Duration::from_millis(5)).max_attempts(3).build()?;
    /// let single = policy.to_builder().max_attempts(1).build()?;
    /// assert_eq!((policy.max_attempts(), single.max_attempts()), (3, 1));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn to_builder(&self) -> HedgePolicyBuilder {
        HedgePolicyBuilder {
            policy: self.clone(),
        }
    }
}

/// Builds a [`HedgePolicy`]; made by [`HedgePolicy::builder`].
#[derive(Debug, Clone)]
pub struct HedgePolicyBuilder {
    pub(super) policy: HedgePolicy,
}

impl HedgePolicyBuilder {
    /// The most copies a call sends, **counting the first** (default 2;
    /// 1 means no hedging; `1..=`[`MAX_HEDGE_ATTEMPTS`]).
    #[must_use]
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.policy.max_attempts = attempts;
        self
    }

    /// The most copies of a call *requeued* under an endpoint set (default
    /// [`DEFAULT_MAX_REQUEUES`], 3): a copy no server processed
    /// ([`Verdict::Unsent`](crate::Verdict::Unsent)) stops counting among
    /// `max_attempts` while an endpoint no copy went to is eligible, as a
    /// retry's attempt does ([`RetryPolicyBuilder::max_requeues`](super::RetryPolicyBuilder::max_requeues)).
    ///
    /// ```
    /// use std::time::Duration;
    /// let policy = steadfast::HedgePolicy::builder(Duration::from_millis(20)).max_requeues(1).build()?;
    /// assert_eq!(policy.max_requeues(), 1);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_requeues(mut self, requeues: u32) -> Self {
        self.policy.max_requeues = requeues;
        self
    }

    /// The delay between copies: a `Duration` or an `Arc<AdaptiveDelay>`.
    #[must_use]
    pub fn delay(mut self, delay: impl Into<HedgeDelay>) -> Self {
        self.policy.delay = delay.into();
        self
    }

    /// The longest single wait: how long a server's pushback
    /// ([`Verdict::RetryAfter`]) can hold the next copy (default
    /// [`DEFAULT_MAX_DELAY`]).
    #[must_use]
    pub fn max_delay(self, max: Duration) -> Self {
        self.limits(|l| l.with_max_delay(max))
    }

    /// The overall limit of a call, from its start (default none): no copy
    /// is sent that would start at or past it, and when it passes the call
    /// fails, whatever is still in flight.
    #[must_use]
    pub fn max_elapsed(self, limit: Duration) -> Self {
        self.limits(|l| l.with_max_elapsed(limit))
    }

    /// A shared retry control (token bucket, budget, throttle): it admits
    /// the first copy, allows every later one, and hears the outcomes
    /// (default none).
    #[must_use]
    pub fn control(self, control: Arc<dyn RetryControl>) -> Self {
        self.limits(|l| l.with_control(control))
    }

    /// Changes the limits this policy shares with a retry policy (the cap
    /// on a single wait, the overall limit, the control) with `f`: one
    /// function can bound both kinds of policy alike (see [`Limits`]).
    #[must_use]
    pub fn limits(mut self, f: impl FnOnce(Limits) -> Limits) -> Self {
        self.policy.limits = f(std::mem::take(&mut self.policy.limits));
        self
    }

    /// A concurrency limit: every copy takes one of its slots while in
    /// flight (default none). A first copy the limit refuses stops the call
    /// as [`StopReason::LimitReached`](crate::StopReason::LimitReached); a
    /// later one is not sent.
    #[must_use]
    pub fn concurrency_limit(self, limit: crate::limit::ConcurrencyLimit) -> Self {
        self.limits(|l| l.with_concurrency_limit(limit))
    }

    /// An endpoint set: every copy goes to one of its endpoints, each to
    /// one no other copy of the call went to while there are enough
    /// eligible (default none: see [`Limits::with_endpoints`]).
    #[must_use]
    pub fn endpoints(self, endpoints: crate::endpoint::Endpoints) -> Self {
        self.limits(|l| l.with_endpoints(endpoints))
    }

    /// A rate limit every copy must be admitted by (default none). A first
    /// copy it refuses stops the call as
    /// [`StopReason::Throttled`](crate::StopReason::Throttled); a later one
    /// is not sent. Copies never wait for their turn.
    #[must_use]
    pub fn rate_limit(self, limit: crate::rate::RateLimit) -> Self {
        self.limits(|l| l.with_rate_limit(limit))
    }

    /// Checks the settings and builds the policy.
    ///
    /// # Errors
    /// A [`ConfigError`] when `max_attempts` is 0 or above
    /// [`MAX_HEDGE_ATTEMPTS`], or `max_elapsed` is zero.
    ///
    /// ```
    /// use std::time::Duration;
    /// let err = steadfast::HedgePolicy::builder(Duration::ZERO).max_attempts(0).build().unwrap_err();
    /// assert_eq!(err.field(), "max_attempts");
    /// ```
    pub fn build(self) -> Result<HedgePolicy, ConfigError> {
        const WHAT: &str = "hedge policy";
        let p = &self.policy;
        if p.max_attempts == 0 || p.max_attempts > MAX_HEDGE_ATTEMPTS {
            return Err(ConfigError::new(
                WHAT,
                "max_attempts",
                "must be in 1..=32 (it counts the first attempt)",
                p.max_attempts,
            ));
        }
        p.limits.check(WHAT)?;
        Ok(self.policy)
    }
}
