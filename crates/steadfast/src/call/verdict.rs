//! What a classifier says of one attempt's outcome.

use std::time::Duration;

/// What a classifier says about one attempt's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Done: hand the outcome to the caller.
    Success,
    /// A transient failure: retry after the schedule's next delay.
    Retry,
    /// A transient failure with a server hint: retry after this delay
    /// (clamped by the policy), then start the backoff curve over.
    RetryAfter(Duration),
    /// A permanent failure: stop now and return it. Copies of a
    /// [hedged](crate::hedge) call still in flight are cancelled.
    Stop,
    /// A failure that forbids any further attempt but not the ones already
    /// sent: gRFC A6's server pushback saying "do not retry". No new attempt
    /// or hedge is sent; a hedged call lets the copies in flight finish (the
    /// first success among them still wins) and stops when they are done.
    /// For a retry, where one attempt runs at a time, it stops the call at
    /// once, like [`Stop`](Self::Stop). Unlike `Stop`, the retry control
    /// hears it as a retryable failure, so it counts against a token bucket
    /// or a circuit breaker.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::policy::{HedgeAction, HedgeDecision};
    /// use steadfast::{HedgePolicy, Verdict};
    ///
    /// let policy = HedgePolicy::builder(Duration::from_millis(10)).max_attempts(3).build()?;
    /// let clock = VirtualClock::manual();
    /// let mut call = policy.start(&clock, None);
    /// let _ = policy.send_due(&mut call, &clock); // copy 1
    /// clock.advance(Duration::from_millis(10));
    /// let _ = policy.send_due(&mut call, &clock); // copy 2
    /// // Copy 2's server forbids retries: copy 1 runs on, copy 3 is never sent.
    /// assert_eq!(policy.on_outcome(&mut call, 2, Verdict::StopSending, &clock), HedgeDecision::Continue);
    /// assert!(!matches!(policy.send_due(&mut call, &clock), HedgeAction::Send(_)));
    /// assert_eq!(policy.on_outcome(&mut call, 1, Verdict::Success, &clock), HedgeDecision::Succeed);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    StopSending,
    /// A failure that certainly happened before the request was written
    /// (the connection was refused, the server turned the request away
    /// unprocessed: HTTP/2 `REFUSED_STREAM`, a stream past a GOAWAY's last
    /// id): sending it again cannot do the work twice, even for a request
    /// that is not idempotent. Under an
    /// [endpoint set](crate::endpoint::Endpoints) the call is *requeued*:
    /// sent at once to an endpoint it has not tried, without using one of
    /// its `max_attempts` (see [`RetryPolicy::decide`](crate::RetryPolicy::decide));
    /// otherwise it is a [`Retry`](Self::Retry).
    Unsent,
}

impl Verdict {
    /// Whether the verdict asks for another attempt.
    ///
    /// ```
    /// use steadfast::Verdict;
    /// assert!(Verdict::Retry.is_retry());
    /// assert!(!Verdict::Stop.is_retry());
    /// ```
    #[must_use]
    pub const fn is_retry(self) -> bool {
        matches!(self, Self::Retry | Self::RetryAfter(_) | Self::Unsent)
    }
}
