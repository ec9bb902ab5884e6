//! AIMD: additive increase, multiplicative decrease.

use std::time::Duration;

use super::algorithm::{AimdStep, Algorithm, AlgorithmState, Window};
use super::gradient2::{check_bounds, check_factor};
use crate::config_error::ConfigError;

const NAME: &str = "aimd";

/// Additive increase, multiplicative decrease, as Netflix concurrency-limits
/// publishes it, applied once per window: a window with a drop signal, or
/// whose average latency exceeds `timeout`, multiplies the limit by
/// `backoff_ratio` (truncating); otherwise, when at least half the slots
/// were in use, the limit grows by one.
///
/// | setting | default |
/// |---|---|
/// | initial limit | 20 |
/// | min / max | 20 / 200 |
/// | backoff ratio | 0.9 |
/// | timeout | 5 s |
///
/// ```
/// use steadfast::limit::{Aimd, Algorithm, Window};
/// let mut aimd = Aimd::builder().min_limit(1).build()?;
/// assert_eq!(aimd.update(&Window::new(30, 20)), 21); // busy: +1
/// assert_eq!(aimd.update(&Window::new(30, 5)), 21); // under-used: no growth
/// assert_eq!(aimd.update(&Window::new(30, 21).with_drops(1)), 18); // 21 × 0.9, truncated
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Aimd {
    limit: u32,
    min: u32,
    max: u32,
    backoff_ratio: f64,
    timeout: Duration,
    /// The last window's decision, for `state`.
    last: Option<AimdStep>,
}

impl Default for Aimd {
    /// The published defaults (see the table above).
    fn default() -> Self {
        Self {
            limit: 20,
            min: 20,
            max: 200,
            backoff_ratio: 0.9,
            timeout: Duration::from_secs(5),
            last: None,
        }
    }
}

impl Aimd {
    /// A builder with the published defaults.
    #[must_use]
    pub fn builder() -> AimdBuilder {
        AimdBuilder(Self::default())
    }
}

impl Algorithm for Aimd {
    fn name(&self) -> &'static str {
        NAME
    }

    fn limit(&self) -> u32 {
        self.limit
    }

    fn state(&self) -> AlgorithmState {
        AlgorithmState::Aimd { last: self.last }
    }

    fn bounds(&self) -> (u32, u32) {
        (self.min, self.max)
    }

    fn update(&mut self, window: &Window) -> u32 {
        let too_slow = window.rtt.is_some_and(|rtt| rtt > self.timeout);
        let (next, step) = if window.dropped() || too_slow {
            // Truncated, as published: a limit of 20 backs off to 18.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let shrunk = (f64::from(self.limit) * self.backoff_ratio) as u32;
            (shrunk, AimdStep::Decreased)
        } else if u64::from(window.max_in_flight) * 2 >= u64::from(self.limit) {
            (self.limit.saturating_add(1), AimdStep::Increased)
        } else {
            (self.limit, AimdStep::Held)
        };
        self.last = Some(step);
        self.limit = next.clamp(self.min, self.max);
        self.limit
    }
}

/// Builds an [`Aimd`]; every setting starts at the published default.
#[derive(Debug, Clone)]
pub struct AimdBuilder(Aimd);

impl AimdBuilder {
    /// The limit before the first window (default 20).
    #[must_use]
    pub fn initial_limit(mut self, limit: u32) -> Self {
        self.0.limit = limit;
        self
    }

    /// The least the limit may become (default 20).
    #[must_use]
    pub fn min_limit(mut self, limit: u32) -> Self {
        self.0.min = limit;
        self
    }

    /// The most the limit may become (default 200).
    #[must_use]
    pub fn max_limit(mut self, limit: u32) -> Self {
        self.0.max = limit;
        self
    }

    /// What a drop multiplies the limit by, in [0.5, 1) (default 0.9).
    #[must_use]
    pub fn backoff_ratio(mut self, ratio: f64) -> Self {
        self.0.backoff_ratio = ratio;
        self
    }

    /// An average latency above which a window counts as a drop (default 5 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.0.timeout = timeout;
        self
    }

    /// The algorithm.
    ///
    /// # Errors
    /// A [`ConfigError`] for bounds that cannot hold, a backoff ratio
    /// outside [0.5, 1) or a zero timeout.
    pub fn build(self) -> Result<Aimd, ConfigError> {
        let a = self.0;
        check_bounds(NAME, a.limit, a.min, a.max)?;
        check_factor(NAME, "backoff_ratio", a.backoff_ratio)?;
        if a.timeout.is_zero() {
            return Err(ConfigError::new(
                NAME,
                "timeout",
                "must be greater than zero",
                a.timeout,
            ));
        }
        Ok(a)
    }
}
