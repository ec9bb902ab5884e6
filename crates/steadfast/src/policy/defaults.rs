use super::*;
use crate::backoff::Backoff;

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
    fn default() -> Self {
        Self {
            schedule: Backoff::default(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_delay: DEFAULT_MAX_DELAY,
            max_elapsed: None,
            attempt_timeout: None,
            control: None,
        }
    }
}

