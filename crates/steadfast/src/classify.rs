//! Classification: what one attempt's outcome means for the call.
//!
//! A classifier is the only code that knows a protocol: the core's defaults
//! treat every `Err` as worth retrying; the HTTP and gRPC integrations read
//! status codes and server hints. A classifier sees the whole `Result`, so a
//! response that arrived as `Ok` (an HTTP 503, say) can be retried too.

use std::fmt;
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
    /// use steadfast::{HedgeAction, HedgeDecision, HedgePolicy, Verdict};
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
        matches!(self, Self::Retry | Self::RetryAfter(_))
    }
}

/// Turns an attempt's outcome into a [`Verdict`].
///
/// Implemented for [`AnyError`] (the default), [`When`], [`ClassifyFn`], and
/// any type of yours.
///
/// ```
/// use steadfast::{Classify, Verdict};
///
/// struct RetryServerErrors;
/// impl Classify<u16, std::io::Error> for RetryServerErrors {
///     fn classify(&self, outcome: &Result<u16, std::io::Error>) -> Verdict {
///         match outcome {
///             Ok(status) if *status >= 500 => Verdict::Retry,
///             Ok(_) => Verdict::Success,
///             Err(_) => Verdict::Retry,
///         }
///     }
/// }
/// assert_eq!(RetryServerErrors.classify(&Ok(503)), Verdict::Retry);
/// ```
pub trait Classify<T, E> {
    /// The verdict for one outcome.
    fn classify(&self, outcome: &Result<T, E>) -> Verdict;
}

/// The default classifier: every `Ok` is a success, every `Err` is retried.
///
/// ```
/// use steadfast::{AnyError, Classify, Verdict};
/// assert_eq!(AnyError.classify(&Err::<(), _>("refused")), Verdict::Retry);
/// assert_eq!(AnyError.classify(&Ok::<_, ()>(1)), Verdict::Success);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnyError;

impl<T, E> Classify<T, E> for AnyError {
    #[inline]
    fn classify(&self, outcome: &Result<T, E>) -> Verdict {
        if outcome.is_ok() {
            Verdict::Success
        } else {
            Verdict::Retry
        }
    }
}

/// Retries the errors for which a predicate holds; any other error is
/// permanent. Made by the executors' `.when(..)`.
///
/// ```
/// use steadfast::{Classify, Verdict, When};
/// let transient = When::new(|e: &std::io::ErrorKind| *e == std::io::ErrorKind::ConnectionRefused);
/// assert_eq!(transient.classify(&Err::<(), _>(std::io::ErrorKind::ConnectionRefused)), Verdict::Retry);
/// assert_eq!(transient.classify(&Err::<(), _>(std::io::ErrorKind::PermissionDenied)), Verdict::Stop);
/// ```
#[derive(Clone, Copy)]
pub struct When<F>(F);

impl<F> When<F> {
    /// Retries an error when `predicate` returns `true`.
    pub const fn new(predicate: F) -> Self {
        Self(predicate)
    }
}

impl<F> fmt::Debug for When<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("When(..)")
    }
}

impl<T, E, F: Fn(&E) -> bool> Classify<T, E> for When<F> {
    #[inline]
    fn classify(&self, outcome: &Result<T, E>) -> Verdict {
        match outcome {
            Ok(_) => Verdict::Success,
            Err(e) if (self.0)(e) => Verdict::Retry,
            Err(_) => Verdict::Stop,
        }
    }
}

/// A classifier from a closure over the whole outcome. Made by the
/// executors' `.classify(..)`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{Classify, ClassifyFn, Verdict};
/// let c = ClassifyFn::new(|r: &Result<u16, ()>| match r {
///     Ok(429) => Verdict::RetryAfter(Duration::from_secs(1)),
///     Ok(s) if *s >= 500 => Verdict::Retry,
///     Ok(_) => Verdict::Success,
///     Err(()) => Verdict::Stop,
/// });
/// assert_eq!(c.classify(&Ok(429)), Verdict::RetryAfter(Duration::from_secs(1)));
/// ```
#[derive(Clone, Copy)]
pub struct ClassifyFn<F>(F);

impl<F> ClassifyFn<F> {
    /// A classifier that calls `f`.
    pub const fn new(f: F) -> Self {
        Self(f)
    }
}

impl<F> fmt::Debug for ClassifyFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClassifyFn(..)")
    }
}

impl<T, E, F: Fn(&Result<T, E>) -> Verdict> Classify<T, E> for ClassifyFn<F> {
    #[inline]
    fn classify(&self, outcome: &Result<T, E>) -> Verdict {
        (self.0)(outcome)
    }
}
