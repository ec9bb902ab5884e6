//! The error of a call that did not succeed: the engine's facts and the
//! last response or transport error.

use std::fmt;
use std::time::Duration;

use http::{Method, StatusCode};
use steadfast::limit::LimitRefused;
use steadfast::{RetryError, StopReason};

use crate::attempt::Failure;
use steadfast::call::{Ending, Refused};

/// Why a call that could have been retried was sent once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NotRetried {
    /// The method is not idempotent and the caller did not opt in
    /// (per request, per client, or with an `Idempotency-Key` header).
    NotIdempotent,
    /// The body is a stream, which cannot be sent again.
    StreamingBody,
    /// The body is a stream longer than the buffer asked for
    /// ([`RequestBuilder::buffer_body`](crate::RequestBuilder::buffer_body)).
    BodyTooLarge {
        /// The buffer's limit, in bytes.
        limit: usize,
    },
}

impl fmt::Display for NotRetried {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Self::BodyTooLarge { limit } = self {
            return write!(
                f,
                "the body is a stream longer than the {limit}-byte buffer"
            );
        }
        f.write_str(match self {
            Self::NotIdempotent => {
                "the method is not idempotent (opt in per request, per client, or with an Idempotency-Key header)"
            }
            Self::StreamingBody | Self::BodyTooLarge { .. } => {
                "the body is a stream, which cannot be sent again"
            }
        })
    }
}

/// The last thing an unsuccessful call got.
#[derive(Debug)]
pub(crate) enum Last {
    Nothing,
    /// The deadline passed while the next attempt was connecting: it was
    /// never sent.
    Unsent,
    Response(Box<reqwest::Response>),
    Transport(reqwest::Error),
    /// A middleware's own error (never retried).
    #[cfg(feature = "middleware")]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// A call that did not succeed: why it stopped, what it did, and the last
/// response or error.
///
/// The facts are the engine's ([`RetryError`], for a retried or a hedged
/// call alike): the [`reason`](Error::reason), the attempts and the time
/// taken, and [`ending`](Error::ending) says how the call went. A response whose status the classifier did
/// not accept (a 503 after the last attempt, say) is kept: see
/// [`status`](Error::status) and [`into_response`](Error::into_response).
/// A transport error is the [`source`](std::error::Error::source). Neither
/// the message nor the source holds the URL (it may carry secrets in its
/// query or userinfo).
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let client = steadfast_http::Client::new();
/// match client.get("http://127.0.0.1:8080/flaky").send().await {
///     Ok(response) => println!("{} after {} attempts", response.status(), response.ending().attempts),
///     Err(e) => eprintln!("{e} (reason {:?}, last status {:?})", e.reason(), e.status()),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Error {
    method: Option<Method>,
    reason: StopReason,
    ending: Ending,
    elapsed: Duration,
    timed_out: bool,
    refused: Option<Refused>,
    not_retried: Option<NotRetried>,
    last: Last,
    /// The endpoint the last attempt went to, under a client of several.
    endpoint: Option<String>,
}

impl Error {
    /// The error of a call, retried or hedged (one error type: a hedged
    /// call's carries its copies' stats).
    pub(crate) fn from_call<E: Into<Last>>(
        method: Method,
        error: RetryError<Failure<E>>,
        ending: Ending,
    ) -> Self {
        let (reason, elapsed, timed_out) = (error.reason(), error.elapsed(), error.timed_out());
        let refused = error.refusal();
        let endpoint = error.last_endpoint().map(str::to_owned);
        let mut ending = ending;
        let mut last = Last::from_failure(error.into_last_error());
        // An attempt the deadline cut off while it was connecting sent
        // nothing: it is not counted, and the error says what happened.
        let unsent = matches!(&last, Last::Transport(e) if crate::connect::is_cut_off(e));
        if unsent {
            ending.attempts = ending.attempts.saturating_sub(1);
            last = Last::Unsent;
        }
        Self {
            method: Some(method),
            reason,
            ending,
            elapsed,
            timed_out: timed_out || unsent,
            refused,
            not_retried: None,
            last,
            endpoint,
        }
    }

    /// A request that could not be built: nothing was sent.
    pub(crate) fn not_built(error: reqwest::Error) -> Self {
        Self {
            method: None,
            reason: StopReason::Permanent,
            ending: Ending::default(),
            elapsed: Duration::ZERO,
            timed_out: false,
            refused: None,
            not_retried: None,
            last: Last::Transport(error),
            endpoint: None,
        }
    }

    /// The error a fallback answered with ([`Answer`](crate::fallback::Answer)):
    /// the client error inside it, else one with its facts, no last
    /// response, and the failed call's `ending` (its attempts) stopped for
    /// its reason.
    pub(crate) fn from_answer(
        method: Option<Method>,
        error: RetryError<Error>,
        ending: Ending,
    ) -> Self {
        let (reason, elapsed, timed_out) = (error.reason(), error.elapsed(), error.timed_out());
        let refused = error.refusal();
        let mut ending = ending;
        ending.stop = Some(reason);
        ending.fell_back = false;
        match error.into_last_error() {
            Some(error) => error,
            None => Self {
                method,
                reason,
                ending,
                elapsed,
                timed_out,
                refused,
                not_retried: None,
                last: Last::Nothing,
                endpoint: None,
            },
        }
    }

    /// The endpoint the last attempt went to, under a client of several
    /// ([`ClientBuilder::endpoints`](crate::ClientBuilder::endpoints)): its
    /// base URL, redacted as telemetry shows URLs.
    #[must_use]
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// The request's method (`None` for a request that was never built).
    pub(crate) fn method(&self) -> Option<&Method> {
        self.method.as_ref()
    }

    /// Takes the last response out of the error, if it holds one
    /// ([`with_response`](Self::with_response) puts it back).
    pub(crate) fn take_response(&mut self) -> Option<reqwest::Response> {
        match std::mem::replace(&mut self.last, Last::Nothing) {
            Last::Response(response) => Some(*response),
            other => {
                self.last = other;
                None
            }
        }
    }

    /// The error with `response` as its last response again.
    pub(crate) fn with_response(mut self, response: reqwest::Response) -> Self {
        self.last = Last::Response(Box::new(response));
        self
    }

    /// Notes that the call was sent once for `why`, if it stopped because
    /// its one attempt was spent.
    pub(crate) fn sent_once(mut self, why: NotRetried) -> Self {
        if matches!(
            self.reason,
            StopReason::Exhausted | StopReason::NotReplayable
        ) {
            self.not_retried = Some(why);
        }
        self
    }

    /// [`sent_once`](Self::sent_once) when `cond` holds.
    pub(crate) fn sent_once_if(self, cond: bool, why: NotRetried) -> Self {
        if cond { self.sent_once(why) } else { self }
    }

    /// Why the call stopped (attempts exhausted, deadline, permanent
    /// failure, refused by the retry control, not replayable, ...).
    #[must_use]
    pub fn reason(&self) -> StopReason {
        self.reason
    }

    /// How the call went: attempts made (with hedging, copies sent), why
    /// it stopped, the time spent waiting between attempts, and a hedged
    /// call's copies (the core's [`Ending`]).
    #[must_use]
    pub fn ending(&self) -> Ending {
        self.ending
    }

    /// Attempts made, counting the first; but a last attempt that the
    /// call's deadline cut off while its connection was being made is not
    /// counted: nothing of it reached the server (the message says so). One
    /// cut off after its connection was made is counted, as it may have
    /// reached the server. Needs [`ConnectWithinDeadline`](crate::ConnectWithinDeadline)
    /// in the `reqwest::Client` (the default client has it).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.ending.attempts
    }

    /// Time from the call's start to its end.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Whether the last attempt was cut off by its timeout (or the deadline).
    #[must_use]
    pub fn timed_out(&self) -> bool {
        self.timed_out
    }

    /// The retry control or rate limit that refused the call or a retry,
    /// if one did.
    #[must_use]
    pub fn refused_by(&self) -> Option<&'static str> {
        self.refused?.throttled_by()
    }

    /// How long the refusal would go on, when the refuser knows: the time
    /// until a [rate limit](crate::ClientBuilder::rate_limit) would admit
    /// the attempt, the rest of an open circuit breaker's break.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.refused?.retry_after()
    }

    /// Who refused the call or its last attempt, if someone did: a retry
    /// control, a rate limit or a concurrency limit, with its account (the
    /// core's one [`Refused`]).
    #[must_use]
    pub fn refusal(&self) -> Option<Refused> {
        self.refused
    }

    /// For a call that stopped with
    /// [`StopReason::LimitReached`]: the
    /// [concurrency limit](crate::ClientBuilder::concurrency_limit) that had
    /// no slot for its next attempt, how many attempts were in flight, the
    /// limit then, and how long the attempt waited in the limit's queue.
    /// [`attempts`](Self::attempts) says whether it was the first attempt
    /// (`0`: nothing was sent) or a retry or hedge.
    ///
    /// ```
    /// use steadfast::StopReason;
    /// use steadfast::limit::ConcurrencyLimit;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limit = ConcurrencyLimit::fixed(1).name("search").build()?;
    /// let client = steadfast_http::Client::builder().concurrency_limit(limit.clone()).build()?;
    /// let _busy = limit.try_acquire()?; // another call holds the only slot
    /// let err = client.get("http://127.0.0.1:9/").send().await.unwrap_err();
    /// assert_eq!((err.reason(), err.attempts()), (StopReason::LimitReached, 0));
    /// let refused = err.limit_refused().expect("the limit refused");
    /// assert_eq!((refused.by, refused.in_flight, refused.limit), ("search", 1, 1));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "GET failed after 0 attempts in 0ms (concurrency limit search full: 1 in flight, limit 1)"
    /// );
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn limit_refused(&self) -> Option<LimitRefused> {
        self.refused?.limit_refused()
    }

    /// Why a failure that would have been retried was not.
    #[must_use]
    pub fn not_retried(&self) -> Option<NotRetried> {
        self.not_retried
    }

    /// The status of the last response, if the last attempt got one.
    #[must_use]
    pub fn status(&self) -> Option<StatusCode> {
        match &self.last {
            Last::Response(r) => Some(r.status()),
            _ => None,
        }
    }

    /// The last transport error, if the last attempt ended with one.
    #[must_use]
    pub fn transport_error(&self) -> Option<&reqwest::Error> {
        match &self.last {
            Last::Transport(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the call ended because its deadline passed.
    #[must_use]
    pub fn is_deadline(&self) -> bool {
        self.reason == StopReason::Deadline
    }

    /// The last response (its status the classifier did not accept), with
    /// its body still to read.
    #[must_use]
    pub fn into_response(self) -> Option<reqwest::Response> {
        match self.last {
            Last::Response(r) => Some(*r),
            _ => None,
        }
    }
}

impl Last {
    fn from_failure<E: Into<Last>>(failure: Option<Failure<E>>) -> Self {
        match failure {
            None => Self::Nothing,
            Some(Failure::Status { response, .. }) => Self::Response(Box::new(response)),
            Some(Failure::Transport { error, .. }) => error.into(),
        }
    }
}

impl From<reqwest::Error> for Last {
    fn from(error: reqwest::Error) -> Self {
        Self::Transport(error)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.ending.attempts;
        write!(
            f,
            "{} failed after {n} attempt{} in {}ms (",
            self.method.as_ref().map_or("the request", Method::as_str),
            if n == 1 { "" } else { "s" },
            self.elapsed.as_millis(),
        )?;
        match (self.reason, self.limit_refused()) {
            // The limit says it all: which one, how full, how long queued.
            (StopReason::LimitReached, Some(refused)) if n == 0 => write!(f, "{refused}")?,
            (StopReason::LimitReached, Some(refused)) => {
                let again = if self.ending.hedge.is_some() {
                    "hedge"
                } else {
                    "retry"
                };
                write!(f, "{again} refused: {refused}")?;
            }
            // No attempt made: the call itself was refused, not a retry.
            (StopReason::Throttled, _) if n == 0 && self.refused_by().is_some() => {
                f.write_str("refused")?;
            }
            (reason, _) => write!(f, "{reason}")?,
        }
        if let Some(by) = self.refused_by() {
            write!(f, " by {by}")?;
            if let Some(d) = self.retry_after() {
                write!(f, ", for {}ms more", d.as_millis())?;
            }
        }
        if let Some(why) = self.not_retried {
            write!(f, "; not retried: {why}")?;
        }
        if let Some(endpoint) = &self.endpoint {
            write!(f, "; last attempt to {endpoint}")?;
        }
        f.write_str(")")?;
        match &self.last {
            Last::Response(r) => write!(f, ": last status {}", r.status()),
            Last::Transport(_) => f.write_str(": transport error"),
            #[cfg(feature = "middleware")]
            Last::Other(_) => f.write_str(": middleware error"),
            Last::Unsent => f.write_str(
                ": the deadline passed while the next attempt was connecting (it was never sent)",
            ),
            Last::Nothing if self.timed_out => f.write_str(": the attempt timed out"),
            Last::Nothing => Ok(()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.last {
            Last::Transport(e) => Some(e),
            #[cfg(feature = "middleware")]
            Last::Other(e) => Some(&**e),
            Last::Response(_) | Last::Nothing | Last::Unsent => None,
        }
    }
}
