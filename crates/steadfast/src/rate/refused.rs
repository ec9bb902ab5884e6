//! [`RateRefused`]: a call a rate limit did not admit, and when it would.

use std::fmt;
use std::time::Duration;

/// A call a [`RateLimit`](super::RateLimit) did not admit: which limit, and
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
