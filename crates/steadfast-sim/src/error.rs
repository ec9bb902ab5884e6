//! The simulator's one error type.

use std::fmt;
use std::path::PathBuf;

/// Why a simulation or a report could not be made.
///
/// Bad input never panics: every configuration is checked before anything
/// runs, and the first broken rule comes back as [`SimError::Config`].
///
/// ```
/// use steadfast_sim::herd::HerdConfig;
/// use steadfast_sim::SimError;
///
/// let config = HerdConfig { clients: 0, ..HerdConfig::default() };
/// let err = steadfast_sim::herd::run(&config).unwrap_err();
/// assert!(matches!(err, SimError::Config { field: "clients", .. }));
/// assert_eq!(err.to_string(), "invalid herd config: `clients` must be at least 1 (got 0)");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SimError {
    /// A configuration value broke a rule.
    Config {
        /// Which configuration (for example `"herd config"`).
        scope: &'static str,
        /// The offending field.
        field: &'static str,
        /// The rule it broke.
        rule: &'static str,
        /// The value given, as text.
        got: String,
    },
    /// A core builder (policy, schedule, control) refused the settings the
    /// simulator derived from the configuration.
    Core(steadfast::ConfigError),
    /// A latency distribution could not be parsed from text.
    Parse {
        /// The text given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Writing a report file failed.
    Io {
        /// The file or folder being written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Drawing a plot failed.
    Plot {
        /// The file being drawn.
        path: PathBuf,
        /// The drawing backend's message.
        message: String,
    },
    /// A run grew past the simulator's bound on work (for example a
    /// schedule with zero delays retrying through a long outage); it was
    /// stopped instead of running on for hours.
    TooMuchWork {
        /// The scenario.
        scenario: &'static str,
        /// The bound on simulated attempts that was reached.
        limit: u64,
    },
}

impl SimError {
    /// A [`SimError::Config`] for `field` of `scope` breaking `rule`.
    ///
    /// ```
    /// let err = steadfast_sim::SimError::config("storm config", "call_rate", "must be a finite number > 0", f64::NAN);
    /// assert_eq!(err.to_string(), "invalid storm config: `call_rate` must be a finite number > 0 (got NaN)");
    /// ```
    #[must_use]
    pub fn config(
        scope: &'static str,
        field: &'static str,
        rule: &'static str,
        got: impl fmt::Debug,
    ) -> Self {
        Self::Config {
            scope,
            field,
            rule,
            got: format!("{got:?}"),
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config {
                scope,
                field,
                rule,
                got,
            } => write!(f, "invalid {scope}: `{field}` {rule} (got {got})"),
            Self::Core(err) => write!(f, "the core refused a setting: {err}"),
            Self::Parse { input, reason } => {
                write!(f, "cannot parse latency distribution {input:?}: {reason}")
            }
            Self::Io { path, source } => write!(f, "cannot write {}: {source}", path.display()),
            Self::Plot { path, message } => write!(f, "cannot draw {}: {message}", path.display()),
            Self::TooMuchWork { scenario, limit } => write!(
                f,
                "the {scenario} run passed {limit} simulated attempts and was stopped; \
                 use fewer clients or calls, a shorter run, or longer delays"
            ),
        }
    }
}

impl std::error::Error for SimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Core(err) => Some(err),
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<steadfast::ConfigError> for SimError {
    fn from(err: steadfast::ConfigError) -> Self {
        Self::Core(err)
    }
}

/// Checks shared by every scenario's `validate`.
pub(crate) mod check {
    use std::time::Duration;

    use super::SimError;

    pub(crate) fn at_least(
        scope: &'static str,
        field: &'static str,
        value: u64,
        min: u64,
        rule: &'static str,
    ) -> Result<(), SimError> {
        if value < min {
            return Err(SimError::config(scope, field, rule, value));
        }
        Ok(())
    }

    pub(crate) fn positive_duration(
        scope: &'static str,
        field: &'static str,
        value: Duration,
    ) -> Result<(), SimError> {
        if value.is_zero() {
            return Err(SimError::config(
                scope,
                field,
                "must be longer than zero",
                value,
            ));
        }
        Ok(())
    }

    /// The most attempts one scenario run may simulate (a few minutes of
    /// work at the simulator's speed).
    pub(crate) const MAX_ATTEMPTS: u64 = 200_000_000;

    /// The most clients a scenario takes: each keeps its own state (schedule,
    /// policy, control) for the whole run, so this bounds the memory, and a
    /// herd of this many finishes in about a minute.
    pub(crate) const MAX_CLIENTS: u64 = 1_000_000;

    /// The most calls one strategy of a scenario may make (a minute or so of
    /// simulation per strategy). Memory does not grow with them: latencies go
    /// into a fixed-size histogram and counts into per-bucket series.
    pub(crate) const MAX_CALLS: u64 = 20_000_000;

    /// The most buckets a time series may have (8 MB per series).
    pub(crate) const MAX_BUCKETS: u64 = 1_000_000;

    /// The most requests a server may hold at once (in service and queued).
    pub(crate) const MAX_SERVER_REQUESTS: u64 = 10_000_000;

    /// A client count: at least 1, at most [`MAX_CLIENTS`].
    pub(crate) fn clients(scope: &'static str, clients: u32) -> Result<(), SimError> {
        at_least(scope, "clients", clients.into(), 1, "must be at least 1")?;
        at_most(
            scope,
            "clients",
            clients.into(),
            MAX_CLIENTS,
            "must be at most 1,000,000",
        )
    }

    /// Calls made at `rate` per second for `duration`: at most [`MAX_CALLS`].
    pub(crate) fn calls(
        scope: &'static str,
        field: &'static str,
        rate: f64,
        duration: Duration,
    ) -> Result<(), SimError> {
        let calls = rate * duration.as_secs_f64();
        if calls > MAX_CALLS as f64 {
            return Err(SimError::config(
                scope,
                field,
                "times `duration` must stay at most 20,000,000 calls",
                calls.round(),
            ));
        }
        Ok(())
    }

    /// A time series over `span` in buckets of `bucket`: at most
    /// [`MAX_BUCKETS`] buckets. The error names `field` (the span).
    pub(crate) fn buckets(
        scope: &'static str,
        field: &'static str,
        span: Duration,
        bucket: Duration,
    ) -> Result<(), SimError> {
        let n = span.as_nanos() / bucket.as_nanos().max(1);
        if n > u128::from(MAX_BUCKETS) {
            let most = Duration::from_nanos(
                u64::try_from(bucket.as_nanos().saturating_mul(u128::from(MAX_BUCKETS)))
                    .unwrap_or(u64::MAX),
            );
            return Err(SimError::Config {
                scope,
                field,
                rule: "must be at most 1,000,000 buckets of the time series",
                got: format!("{span:?}; the most is {most:?}"),
            });
        }
        Ok(())
    }

    /// A scenario's strategies: at least one, each with `max_attempts`
    /// (counting the first) from 1 to 100.
    pub(crate) fn strategies<S>(
        scope: &'static str,
        strategies: &[S],
        max_attempts: impl Fn(&S) -> u32,
    ) -> Result<(), SimError> {
        if strategies.is_empty() {
            return Err(SimError::config(
                scope,
                "strategies",
                "must name at least one",
                0,
            ));
        }
        for s in strategies {
            let attempts = u64::from(max_attempts(s));
            at_least(
                scope,
                "strategies.max_attempts",
                attempts,
                1,
                "must be at least 1",
            )?;
            at_most(
                scope,
                "strategies.max_attempts",
                attempts,
                100,
                "must be at most 100",
            )?;
        }
        Ok(())
    }

    pub(crate) fn at_most(
        scope: &'static str,
        field: &'static str,
        value: u64,
        max: u64,
        rule: &'static str,
    ) -> Result<(), SimError> {
        if value > max {
            return Err(SimError::config(scope, field, rule, value));
        }
        Ok(())
    }

    pub(crate) fn finite_positive(
        scope: &'static str,
        field: &'static str,
        value: f64,
    ) -> Result<(), SimError> {
        if !(value.is_finite() && value > 0.0) {
            return Err(SimError::config(
                scope,
                field,
                "must be a finite number > 0",
                value,
            ));
        }
        Ok(())
    }

    pub(crate) fn fraction(
        scope: &'static str,
        field: &'static str,
        value: f64,
    ) -> Result<(), SimError> {
        if !(value.is_finite() && (0.0..=1.0).contains(&value)) {
            return Err(SimError::config(
                scope,
                field,
                "must be a number in [0, 1]",
                value,
            ));
        }
        Ok(())
    }
}
