//! [`Quota`]: a rate and a burst, checked when it is made.

use std::fmt;
use std::time::Duration;

use super::gcra::Cell;
use crate::config_error::ConfigError;

/// The most quotas one limit keeps (every kind: local, keyed, fleet).
pub(crate) const MAX_QUOTAS: usize = 8;

/// The one check of a limit's quotas: `component` must have been given at
/// least one and at most [`MAX_QUOTAS`].
pub(crate) fn check_count(component: &'static str, quotas: &[Quota]) -> Result<(), ConfigError> {
    if quotas.is_empty() || quotas.len() > MAX_QUOTAS {
        return Err(ConfigError::new(
            component,
            "quota",
            "must be given at least once and at most 8 times",
            quotas.len(),
        ));
    }
    Ok(())
}

const NAME: &str = "rate quota";

/// A rate (`count` calls per `period`) and a burst (how many may come at
/// once; by default `count`, as a provider's "100 requests per second"
/// allows 100 in the same instant).
///
/// What a limit of this quota admits, over any stretch of time `t`, is at
/// most `burst + t / interval` calls, and over a long run `count` per
/// `period`. A burst comes on top of the rate after a quiet spell: with the
/// default burst, a window of one period can see up to twice `count`. For
/// "never more than N in any period", give `N / 2` per period with a burst
/// of `N / 2`, or N per period with a burst of 1.
///
/// ```
/// use std::time::Duration;
/// use steadfast::rate::Quota;
///
/// let q = Quota::per_second(100)?;
/// assert_eq!((q.count(), q.period(), q.burst()), (100, Duration::from_secs(1), 100));
/// assert_eq!(q.interval(), Duration::from_millis(10));
/// let smooth = Quota::per_minute(600)?.with_burst(1)?; // one every 100 ms, no bursts
/// assert_eq!(smooth.interval(), Duration::from_millis(100));
/// assert_eq!(Quota::per_second(0).unwrap_err().field(), "count");
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    count: u32,
    period: Duration,
    burst: u32,
}

impl Quota {
    /// `count` calls per `period`, a burst of `count`.
    ///
    /// # Errors
    /// A [`ConfigError`] if `count` is zero, `period` is zero or longer
    /// than a year, or a call's share of the period is under a nanosecond.
    pub fn per(period: Duration, count: u32) -> Result<Self, ConfigError> {
        if count == 0 {
            return Err(ConfigError::new(NAME, "count", "must be at least 1", count));
        }
        if period.is_zero() || period > Duration::from_secs(365 * 24 * 3600) {
            return Err(ConfigError::new(
                NAME,
                "period",
                "must be more than zero and at most a year",
                period,
            ));
        }
        if period.as_nanos() < u128::from(count) {
            return Err(ConfigError::new(
                NAME,
                "count",
                "must leave each call at least a nanosecond of the period",
                count,
            ));
        }
        Ok(Self {
            count,
            period,
            burst: count,
        })
    }

    /// `count` calls per second.
    ///
    /// # Errors
    /// As [`Quota::per`].
    pub fn per_second(count: u32) -> Result<Self, ConfigError> {
        Self::per(Duration::from_secs(1), count)
    }

    /// `count` calls per minute.
    ///
    /// # Errors
    /// As [`Quota::per`].
    pub fn per_minute(count: u32) -> Result<Self, ConfigError> {
        Self::per(Duration::from_secs(60), count)
    }

    /// `count` calls per hour.
    ///
    /// # Errors
    /// As [`Quota::per`].
    pub fn per_hour(count: u32) -> Result<Self, ConfigError> {
        Self::per(Duration::from_secs(3600), count)
    }

    /// At most `burst` calls at once (at least 1); the rate stays.
    ///
    /// # Errors
    /// A [`ConfigError`] if `burst` is zero, or the burst's share of time
    /// (`burst` × the interval) is longer than a hundred years.
    pub fn with_burst(mut self, burst: u32) -> Result<Self, ConfigError> {
        if burst == 0 {
            return Err(ConfigError::new(NAME, "burst", "must be at least 1", burst));
        }
        self.burst = burst;
        if self
            .cell()
            .interval
            .checked_mul(u64::from(burst))
            .is_none_or(|w| w > 100 * 365 * 24 * 3600 * 1_000_000_000)
        {
            return Err(ConfigError::new(
                NAME,
                "burst",
                "times the interval must be at most a hundred years",
                burst,
            ));
        }
        Ok(self)
    }

    /// Calls per period.
    #[must_use]
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The period of the rate.
    #[must_use]
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Calls admitted at once.
    #[must_use]
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// The time one call's share of the quota takes to come back: the
    /// period over the count (rounded down to the nanosecond).
    #[must_use]
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.cell().interval)
    }

    /// The algorithm's constants.
    pub(crate) fn cell(&self) -> Cell {
        let nanos = u64::try_from(self.period.as_nanos()).unwrap_or(u64::MAX);
        let interval = (nanos / u64::from(self.count)).max(1);
        Cell {
            interval,
            window: interval.saturating_mul(u64::from(self.burst)),
        }
    }
}

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quota")
            .field("count", &self.count)
            .field("period", &self.period)
            .field("burst", &self.burst)
            .finish()
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per {:?}", self.count, self.period)?;
        if self.burst != self.count {
            write!(f, " (burst {})", self.burst)?;
        }
        Ok(())
    }
}
