//! What the retry policy decides after one attempt.

use std::time::Duration;

use crate::call::StopReason;

/// What the policy decided after one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The attempt succeeded: return its outcome.
    Succeed,
    /// Wait this long, then make another attempt.
    Retry(Duration),
    /// Give up, for this reason.
    Stop(StopReason),
}
