//! Classification: what one attempt's outcome means for the call.
//!
//! A classifier is the only code that knows a protocol: the core's defaults
//! treat every `Err` as worth retrying; the HTTP and gRPC integrations read
//! status codes and server hints. A classifier sees the whole `Result`, so a
//! response that arrived as `Ok` (an HTTP 503, say) can be retried too.

use std::fmt;

use crate::call::{Answer, Verdict};

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

    /// Whether a failed outcome is a sign of overload (HTTP 429 or 503,
    /// gRPC `RESOURCE_EXHAUSTED` or `UNAVAILABLE`): a drop signal that
    /// shrinks an adaptive [concurrency limit](crate::limit), whatever its
    /// verdict (see [`Signal::of`](crate::limit::Signal::of)). Asked only
    /// of outcomes that were not a success, when a limit holds a slot for
    /// the attempt. The default says no.
    ///
    /// ```
    /// use steadfast::{Classify, Verdict};
    ///
    /// struct Status;
    /// impl Classify<u16, ()> for Status {
    ///     fn classify(&self, outcome: &Result<u16, ()>) -> Verdict {
    ///         match outcome {
    ///             Ok(200..=299) => Verdict::Success,
    ///             Ok(503) | Err(()) => Verdict::Retry,
    ///             Ok(_) => Verdict::Stop,
    ///         }
    ///     }
    ///     fn overloaded(&self, outcome: &Result<u16, ()>) -> bool {
    ///         matches!(outcome, Ok(429 | 503))
    ///     }
    /// }
    /// assert!(Status.overloaded(&Ok(503)) && !Status.overloaded(&Err(())));
    /// ```
    fn overloaded(&self, outcome: &Result<T, E>) -> bool {
        let _ = outcome;
        false
    }

    /// What the outcome, judged `verdict`, says of the endpoint that gave
    /// it, for outlier detection ([`Answer`]): asked only when the attempt
    /// went to an endpoint of an [endpoint set](crate::endpoint). The
    /// default knows only the verdict ([`Answer::of`]: a success is `Ok`,
    /// anything else a server error); a protocol's classifier tells server,
    /// gateway and client errors apart (Envoy's model ejects for the first
    /// two only).
    ///
    /// ```
    /// use steadfast::endpoint::Answer;
    /// use steadfast::{Classify, Verdict};
    ///
    /// struct Status;
    /// impl Classify<u16, ()> for Status {
    ///     fn classify(&self, outcome: &Result<u16, ()>) -> Verdict {
    ///         match outcome {
    ///             Ok(200..=299) => Verdict::Success,
    ///             Ok(502..=504) | Err(()) => Verdict::Retry,
    ///             Ok(_) => Verdict::Stop,
    ///         }
    ///     }
    ///     fn answer(&self, outcome: &Result<u16, ()>, _: Verdict) -> Answer {
    ///         match outcome {
    ///             Ok(200..=399) => Answer::Ok,
    ///             Ok(502..=504) | Err(()) => Answer::GatewayError,
    ///             Ok(500..) => Answer::ServerError,
    ///             Ok(_) => Answer::ClientError,
    ///         }
    ///     }
    /// }
    /// assert_eq!(Status.answer(&Ok(404), Verdict::Stop), Answer::ClientError);
    /// ```
    fn answer(&self, outcome: &Result<T, E>, verdict: Verdict) -> Answer {
        let _ = outcome;
        Answer::of(verdict)
    }
}

/// The default classifier: every `Ok` is a success, every `Err` is retried.
///
/// ```
/// use steadfast::classify::AnyError;
/// use steadfast::{Classify, Verdict};
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
/// use steadfast::classify::When;
/// use steadfast::{Classify, Verdict};
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
/// use steadfast::classify::ClassifyFn;
/// use steadfast::{Classify, Verdict};
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
