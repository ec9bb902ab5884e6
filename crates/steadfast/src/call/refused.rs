//! What a concurrency limit says when it will not let an attempt through.

use std::fmt;
use std::time::Duration;

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
