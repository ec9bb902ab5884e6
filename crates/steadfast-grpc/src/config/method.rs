use std::time::Duration;

use steadfast::{Backoff, ConfigError, HedgePolicy, RetryPolicy};

use crate::Code;

/// One `methodConfig` entry: the methods it names and what applies to them.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodConfig {
    pub(crate) names: Vec<MethodName>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) wait_for_ready: Option<bool>,
    pub(crate) policy: Option<MethodPolicy>,
}

impl MethodConfig {
    /// The methods this config applies to.
    #[must_use]
    pub fn names(&self) -> &[MethodName] {
        &self.names
    }

    /// The `timeout`: the longest a call may take, retries included.
    #[must_use]
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// `waitForReady`, if set.
    #[must_use]
    pub fn wait_for_ready(&self) -> Option<bool> {
        self.wait_for_ready
    }

    /// The retry or hedging policy, if any.
    #[must_use]
    pub fn policy(&self) -> Option<&MethodPolicy> {
        self.policy.as_ref()
    }
}

/// A `name` entry: a whole service (no method), one method of it, or, with
/// neither, every method (the default config).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MethodName {
    pub(crate) service: Option<String>,
    pub(crate) method: Option<String>,
}

impl MethodName {
    /// The fully qualified service (`package.Service`), if named.
    #[must_use]
    pub fn service(&self) -> Option<&str> {
        self.service.as_deref()
    }

    /// The method, if named.
    #[must_use]
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }
}

/// A method's policy: retries or hedging (A6 allows one, not both).
#[derive(Debug, Clone, PartialEq)]
pub enum MethodPolicy {
    /// `retryPolicy`.
    Retry(RetryPolicyConfig),
    /// `hedgingPolicy`.
    Hedging(HedgingPolicyConfig),
}

impl MethodPolicy {
    /// The attempts a call may make, counting the first, after the cap.
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        match self {
            Self::Retry(r) => r.max_attempts,
            Self::Hedging(h) => h.max_attempts,
        }
    }
}

/// A `retryPolicy`, validated, with `maxAttempts` clamped to the cap.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicyConfig {
    pub(crate) max_attempts: u32,
    pub(crate) initial_backoff: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) multiplier: f64,
    pub(crate) codes: Vec<Code>,
}

impl RetryPolicyConfig {
    /// Attempts, counting the first (2 to the cap).
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// `initialBackoff`.
    #[must_use]
    pub fn initial_backoff(&self) -> Duration {
        self.initial_backoff
    }

    /// `maxBackoff`.
    #[must_use]
    pub fn max_backoff(&self) -> Duration {
        self.max_backoff
    }

    /// `backoffMultiplier`.
    #[must_use]
    pub fn backoff_multiplier(&self) -> f64 {
        self.multiplier
    }

    /// `retryableStatusCodes`, in the order given, without repeats.
    #[must_use]
    pub fn retryable_codes(&self) -> &[Code] {
        &self.codes
    }

    /// Whether a call that failed with `code` may be retried.
    #[must_use]
    pub fn retries(&self, code: Code) -> bool {
        self.codes.contains(&code)
    }

    /// The A6 backoff: retry `n` waits
    /// `min(initialBackoff * multiplier^(n-1), maxBackoff) * U(0.8, 1.2)`.
    ///
    /// # Errors
    /// A core [`ConfigError`] if the core refuses a setting (a validated
    /// config never has one).
    pub fn backoff(&self) -> Result<Backoff, ConfigError> {
        Backoff::grpc_a6()
            .initial(self.initial_backoff)
            .max(self.max_backoff)
            .multiplier(self.multiplier)
            .build()
    }

    /// The core retry policy: `maxAttempts` and the A6 backoff. The call's
    /// deadline and a throttle are the caller's to add (the method's
    /// `timeout`, [`RetryThrottling::token_bucket`](super::RetryThrottling::token_bucket)).
    ///
    /// # Errors
    /// A core [`ConfigError`] if the core refuses a setting.
    pub fn to_policy(&self) -> Result<RetryPolicy<Backoff>, ConfigError> {
        RetryPolicy::builder()
            .max_attempts(self.max_attempts)
            .backoff(self.backoff()?)
            .build()
    }
}

/// A `hedgingPolicy`, validated, with `maxAttempts` clamped to the cap.
#[derive(Debug, Clone, PartialEq)]
pub struct HedgingPolicyConfig {
    pub(crate) max_attempts: u32,
    pub(crate) delay: Duration,
    pub(crate) non_fatal: Vec<Code>,
}

impl HedgingPolicyConfig {
    /// Copies, counting the first (2 to the cap).
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// `hedgingDelay` (zero: every copy at once).
    #[must_use]
    pub fn hedging_delay(&self) -> Duration {
        self.delay
    }

    /// `nonFatalStatusCodes`: a copy failing with one of these lets the next
    /// copy go at once; any other code ends the call.
    #[must_use]
    pub fn non_fatal_codes(&self) -> &[Code] {
        &self.non_fatal
    }

    /// The core hedge policy: copies every `hedgingDelay`, up to
    /// `maxAttempts`.
    ///
    /// # Errors
    /// A core [`ConfigError`] if the core refuses a setting.
    pub fn to_policy(&self) -> Result<HedgePolicy, ConfigError> {
        HedgePolicy::builder(self.delay)
            .max_attempts(self.max_attempts)
            .build()
    }
}
