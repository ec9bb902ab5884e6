//! Why a call stopped without success.

use std::fmt;

/// Why a call stopped without success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// Every allowed attempt was made (or the schedule ran out).
    Exhausted,
    /// The classifier said the failure is permanent.
    Permanent,
    /// The overall deadline passed, or the next wait would have ended past it.
    Deadline,
    /// The call was cancelled through its [`CancelToken`](crate::cancel::CancelToken).
    Cancelled,
    /// A retry control (budget, token bucket, throttle) refused the attempt.
    Throttled,
    /// The attempt failed in a way worth retrying, but the request cannot be
    /// sent again (a streaming body, or one larger than the replay limit of
    /// an integration), so it was sent once.
    NotReplayable,
    /// The async executor's clock cannot sleep here (its
    /// [`can_sleep`](crate::clock::AsyncClock::can_sleep) is `false`: the default
    /// `TokioClock` outside a tokio runtime), so no wait or attempt timer
    /// could be made.
    NoTimer,
    /// A [concurrency limit](crate::limit::ConcurrencyLimit) had no slot
    /// for the next attempt (the first, a retry or a hedged copy), at once
    /// or within its queue's wait: [`RetryError::limit_refused`](crate::RetryError::limit_refused)
    /// says which limit and how full it was.
    LimitReached,
    /// The policy's [endpoint set](crate::endpoint::Endpoints) had no
    /// endpoint ready for the next attempt (none connected, or none at
    /// all).
    NoEndpoint,
    /// The policy's [endpoint set](crate::endpoint::Endpoints) had as many
    /// retries and hedged copies in flight as its
    /// [retry cap](crate::endpoint::RetryCap) allows, so the retry was not
    /// sent: the call ends with its last attempt's outcome.
    RetryCapped,
}

impl StopReason {
    /// A short phrase for messages, e.g. `"attempts exhausted"`.
    ///
    /// ```
    /// assert_eq!(steadfast::StopReason::Deadline.as_str(), "deadline exceeded");
    /// ```
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Exhausted => "attempts exhausted",
            Self::Permanent => "permanent error",
            Self::Deadline => "deadline exceeded",
            Self::Cancelled => "cancelled",
            Self::Throttled => "retry refused",
            Self::NotReplayable => "request not replayable",
            Self::LimitReached => "concurrency limit reached",
            Self::NoEndpoint => "no endpoint ready",
            Self::RetryCapped => "retry cap of the endpoint set reached",
            Self::NoTimer => {
                "no timer: the clock cannot sleep outside its runtime (TokioClock needs a tokio runtime; elsewhere enable steadfast's `futures-timer` or `async-io` feature and pass `.clock(FuturesTimerClock)` or `.clock(AsyncIoClock)`)"
            }
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
