//! What a gRPC attempt's response head says: success, committed, a status
//! to retry (after a pushback, maybe), or a status to stop on.

use std::time::Duration;

use http::{HeaderMap, Response};
use steadfast::endpoint::Answer;
use steadfast::{Classify, Verdict};

use crate::Code;

/// A set of status codes, as one word.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CodeSet(u32);

impl CodeSet {
    /// The set of `codes`.
    #[must_use]
    pub fn of(codes: &[Code]) -> Self {
        Self(codes.iter().fold(0, |set, c| set | (1 << c.number())))
    }

    /// Whether `code` is in the set.
    #[must_use]
    pub fn contains(self, code: Code) -> bool {
        self.0 & (1 << code.number()) != 0
    }
}

/// The header a server sets to push back on retries (gRFC A6).
pub const PUSHBACK_HEADER: &str = "grpc-retry-pushback-ms";

/// The status a response head carries, if it is a Trailers-Only response
/// (`grpc-status` among the headers). A head without one starts a response
/// that streams: the call is committed.
#[must_use]
pub fn head_status(headers: &HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?;
    let n: i64 = value.to_str().ok()?.trim().parse().ok()?;
    // A status outside 0..=16 is UNKNOWN, as gRPC clients read it.
    Some(Code::from_i64(n).unwrap_or(Code::Unknown))
}

/// What the server's pushback says: `Some(Ok(wait))` for a valid
/// non-negative number of milliseconds, `Some(Err(()))` for anything else
/// (negative, not a number: A6 says do not retry), `None` when absent.
#[must_use]
pub fn pushback(headers: &HeaderMap) -> Option<Result<Duration, ()>> {
    let value = headers.get(PUSHBACK_HEADER)?;
    let text = value.to_str().map_err(|_| ()).map(str::trim);
    Some(match text.map(str::parse::<i64>) {
        Ok(Ok(ms)) if ms >= 0 => Ok(Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        _ => Err(()),
    })
}

/// The gRPC classifier: a response head with no `grpc-status` commits the
/// call (it is returned as it is, never retried); a Trailers-Only head with
/// `OK` succeeds; one with a code in the set is retried, after the server's
/// pushback if it gave a valid one (then the backoff starts over), or not at
/// all if its pushback is invalid or negative ([`Verdict::StopSending`]: no
/// further attempt or hedge is sent, copies already in flight run on, and
/// the throttle counts the failure); any other code is final. A
/// transport error before any response counts as `UNAVAILABLE`; when the
/// set has `UNAVAILABLE` and the error is a refused connection
/// ([`never_sent`]), it is [`Verdict::Unsent`]: the RPC never left the
/// client, and under an endpoint set it is requeued to another replica
/// without using an attempt (gRFC A6's transparent retry; elsewhere it is
/// a retry like any `UNAVAILABLE`).
///
/// For retries the set is the method's `retryableStatusCodes`; for hedging
/// its `nonFatalStatusCodes` (a non-fatal failure sends the next copy at
/// once; a fatal one ends the call).
///
/// `RESOURCE_EXHAUSTED` and `UNAVAILABLE` (a transport error included) are
/// signs of overload ([`Classify::overloaded`]), whether the set retries
/// them or not: drop signals that shrink an adaptive
/// [concurrency limit](crate::GrpcLayerBuilder::concurrency_limit)
/// ([`is_overload`]).
///
/// ```
/// use steadfast::{Classify, Verdict};
/// use steadfast_grpc::{Code, GrpcClassify};
///
/// let classify = GrpcClassify::retrying(&[Code::Unavailable]);
/// let head = |status: &str, pushback: Option<&str>| {
///     let mut r = http::Response::builder().header("grpc-status", status);
///     if let Some(p) = pushback { r = r.header("grpc-retry-pushback-ms", p); }
///     Ok::<_, std::io::Error>(r.body(()).unwrap())
/// };
/// assert_eq!(classify.classify(&head("14", None)), Verdict::Retry);
/// assert_eq!(classify.classify(&head("14", Some("250"))), Verdict::RetryAfter(std::time::Duration::from_millis(250)));
/// assert_eq!(classify.classify(&head("14", Some("-1"))), Verdict::StopSending);
/// assert_eq!(classify.classify(&head("3", None)), Verdict::Stop);
/// assert_eq!(classify.classify(&head("0", None)), Verdict::Success);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrpcClassify {
    codes: CodeSet,
}

impl GrpcClassify {
    /// Retries (or, for hedging, treats as non-fatal) the statuses in `codes`.
    #[must_use]
    pub fn retrying(codes: &[Code]) -> Self {
        Self {
            codes: CodeSet::of(codes),
        }
    }

    /// The verdict for a status and the head that carried it.
    fn status(self, code: Code, headers: Option<&HeaderMap>) -> Verdict {
        if code == Code::Ok {
            return Verdict::Success;
        }
        let verdict = if self.codes.contains(code) {
            match headers.and_then(pushback) {
                None => Verdict::Retry,
                Some(Ok(wait)) => Verdict::RetryAfter(wait),
                // No more attempts, but hedges in flight run on (A6); the
                // throttle counts it as a failure.
                Some(Err(())) => Verdict::StopSending,
            }
        } else {
            Verdict::Stop
        };
        attempt_failed(code, headers, verdict);
        verdict
    }
}

impl<B, E: std::error::Error + 'static> Classify<Response<B>, E> for GrpcClassify {
    fn classify(&self, outcome: &Result<Response<B>, E>) -> Verdict {
        match outcome {
            Ok(response) => match head_status(response.headers()) {
                Some(code) => self.status(code, Some(response.headers())),
                // Headers without a status: the response streams; committed.
                None => Verdict::Success,
            },
            // A connection refused, a stream refused or left out by a
            // GOAWAY: the RPC was never processed (A6's transparent
            // retry), so it may go again elsewhere.
            Err(e) if self.codes.contains(Code::Unavailable) && never_sent(e) => {
                attempt_failed(Code::Unavailable, None, Verdict::Unsent);
                Verdict::Unsent
            }
            Err(_) => self.status(Code::Unavailable, None),
        }
    }

    /// A Trailers-Only `RESOURCE_EXHAUSTED` or `UNAVAILABLE`, or a
    /// transport error (`UNAVAILABLE`), retryable or not.
    fn overloaded(&self, outcome: &Result<Response<B>, E>) -> bool {
        match outcome {
            Ok(response) => head_status(response.headers()).is_some_and(is_overload),
            Err(_) => is_overload(Code::Unavailable),
        }
    }

    /// The head's status by [`answer_for_code`] (a response whose status
    /// comes in its trailers is a stream the call has committed to: `Ok`);
    /// a transport error, no answer at all, a gateway error.
    fn answer(&self, outcome: &Result<Response<B>, E>, _: Verdict) -> Answer {
        match outcome {
            Ok(response) => head_status(response.headers()).map_or(Answer::Ok, answer_for_code),
            Err(_) => Answer::GatewayError,
        }
    }
}

/// Whether `error` says the request was never processed by a server, so
/// sending it again cannot do its work twice (gRFC A6's transparent
/// retry): looked for anywhere in its chain of sources (as tonic's
/// transport error carries them),
/// - a connection refused (an `io::Error` of kind `ConnectionRefused`):
///   the request never left the client;
/// - an HTTP/2 stream the server reset with `REFUSED_STREAM` or left out
///   of its `GOAWAY` ([`steadfast_tower::unprocessed`]).
///
/// Anything else may have been processed, so it is not.
///
/// ```
/// use std::io;
/// let refused = io::Error::new(io::ErrorKind::ConnectionRefused, "connect");
/// assert!(steadfast_grpc::never_sent(&refused));
/// let reset = io::Error::new(io::ErrorKind::ConnectionReset, "reset");
/// assert!(!steadfast_grpc::never_sent(&reset));
/// // A reset the client itself sent says nothing of the server.
/// let ours = h2::Error::from(h2::Reason::REFUSED_STREAM);
/// assert!(!steadfast_grpc::never_sent(&ours));
/// ```
#[must_use]
pub fn never_sent(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    // A bounded walk: a hostile or cyclic chain ends it.
    for _ in 0..32 {
        let Some(e) = next else { break };
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        next = e.source();
    }
    steadfast_tower::unprocessed(error)
}

/// What a status says of the endpoint that sent it, for outlier detection:
/// `OK` [`Answer::Ok`]; `UNAVAILABLE` and `DEADLINE_EXCEEDED` (no answer
/// from the server in time) [`Answer::GatewayError`]; the codes a request
/// earns by itself (`CANCELLED`, `INVALID_ARGUMENT`, `NOT_FOUND`,
/// `ALREADY_EXISTS`, `PERMISSION_DENIED`, `RESOURCE_EXHAUSTED`,
/// `FAILED_PRECONDITION`, `OUT_OF_RANGE`, `UNAUTHENTICATED`)
/// [`Answer::ClientError`]; the rest [`Answer::ServerError`]. gRFC A50
/// counts every one but `OK` as a failure (grpcio ejects a replica that
/// answers `RESOURCE_EXHAUSTED`); Envoy's model counts server and gateway
/// errors only.
///
/// ```
/// use steadfast::endpoint::Answer;
/// use steadfast_grpc::{Code, answer_for_code};
/// assert_eq!(answer_for_code(Code::Ok), Answer::Ok);
/// assert_eq!(answer_for_code(Code::Unavailable), Answer::GatewayError);
/// assert_eq!(answer_for_code(Code::NotFound), Answer::ClientError);
/// assert_eq!(answer_for_code(Code::Internal), Answer::ServerError);
/// ```
#[must_use]
pub fn answer_for_code(code: Code) -> Answer {
    match code {
        Code::Ok => Answer::Ok,
        Code::Unavailable | Code::DeadlineExceeded => Answer::GatewayError,
        Code::Cancelled
        | Code::InvalidArgument
        | Code::NotFound
        | Code::AlreadyExists
        | Code::PermissionDenied
        | Code::ResourceExhausted
        | Code::FailedPrecondition
        | Code::OutOfRange
        | Code::Unauthenticated => Answer::ClientError,
        _ => Answer::ServerError,
    }
}

/// Whether a status says the server is over its capacity:
/// `RESOURCE_EXHAUSTED` (a server that sheds load, a quota) or
/// `UNAVAILABLE` (the server or the way to it is down or overloaded), as
/// Netflix's concurrency limits and gRPC's own load reporting read them.
///
/// ```
/// use steadfast_grpc::{Code, is_overload};
/// assert!(is_overload(Code::ResourceExhausted) && is_overload(Code::Unavailable));
/// assert!(!is_overload(Code::Internal) && !is_overload(Code::DeadlineExceeded));
/// ```
#[must_use]
pub fn is_overload(code: Code) -> bool {
    matches!(code, Code::ResourceExhausted | Code::Unavailable)
}

/// One event per failed attempt, inside the call's span (which names the
/// method): its status, the server's pushback if any, and what follows.
#[cold]
fn attempt_failed(code: Code, headers: Option<&HeaderMap>, verdict: Verdict) {
    let pushback = headers
        .and_then(|h| h.get(PUSHBACK_HEADER))
        .and_then(|v| v.to_str().ok());
    let next = match verdict {
        Verdict::Retry => "retry (or the next copy) after the backoff",
        Verdict::Unsent => "requeue: the request never reached the server",
        Verdict::RetryAfter(_) => "retry (or the next copy) after the server's pushback",
        Verdict::StopSending => "stop sending: the server's pushback forbids a retry",
        Verdict::Stop => "stop: not a retryable status",
        Verdict::Success => "done",
    };
    tracing::debug!(status = %code, pushback, next, "steadfast: gRPC attempt failed");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: Option<u16>, pushback: Option<&str>) -> Result<Response<()>, std::io::Error> {
        let mut r = Response::builder();
        if let Some(status) = status {
            r = r.header("grpc-status", status);
        }
        if let Some(p) = pushback {
            r = r.header(PUSHBACK_HEADER, p);
        }
        Ok(r.body(()).expect("valid head"))
    }

    #[test]
    fn overload_is_resource_exhausted_and_unavailable_whatever_the_codes_retried() {
        let none = GrpcClassify::retrying(&[]);
        let both = GrpcClassify::retrying(&[Code::ResourceExhausted, Code::Unavailable]);
        for n in 0..=16_u16 {
            let code = Code::from_i64(i64::from(n)).expect("a code");
            let expected = matches!(code, Code::ResourceExhausted | Code::Unavailable);
            for classify in [none, both] {
                assert_eq!(
                    classify.overloaded(&head(Some(n), None)),
                    expected,
                    "{code}"
                );
            }
        }
        // Retried or not, pushed back or not: the same word on overload.
        assert_eq!(none.classify(&head(Some(8), None)), Verdict::Stop);
        assert_eq!(
            both.classify(&head(Some(8), Some("20"))),
            Verdict::RetryAfter(Duration::from_millis(20))
        );
        assert!(none.overloaded(&head(Some(8), None)));
        assert!(both.overloaded(&head(Some(8), Some("20"))));
        assert!(both.overloaded(&head(Some(14), Some("-1"))));
    }

    #[test]
    fn a_transport_error_is_unavailable_and_so_overload() {
        let classify = GrpcClassify::retrying(&[]);
        let failed: Result<Response<()>, std::io::Error> = Err(std::io::Error::other("reset"));
        assert_eq!(classify.classify(&failed), Verdict::Stop);
        assert!(classify.overloaded(&failed));
    }

    #[test]
    fn a_committed_head_and_an_unknown_status_are_not_overload() {
        let classify = GrpcClassify::retrying(&[Code::Unavailable]);
        // No grpc-status: the response streams, committed.
        assert!(!classify.overloaded(&head(None, None)));
        // A status outside 0..=16 reads as UNKNOWN.
        assert!(!classify.overloaded(&head(Some(99), None)));
        assert!(!classify.overloaded(&head(Some(0), None)));
    }

    /// A transport error whose chain holds a refused connection, as
    /// tonic's does.
    #[derive(Debug)]
    struct Wrapped(std::io::Error);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("transport error")
        }
    }
    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_refused_connection_never_left_the_client() {
        use std::io::{Error, ErrorKind};
        let refused: Result<Response<()>, Wrapped> =
            Err(Wrapped(Error::new(ErrorKind::ConnectionRefused, "connect")));
        let reset: Result<Response<()>, Wrapped> =
            Err(Wrapped(Error::new(ErrorKind::ConnectionReset, "reset")));
        let retrying = GrpcClassify::retrying(&[Code::Unavailable]);
        assert_eq!(retrying.classify(&refused), Verdict::Unsent);
        assert_eq!(retrying.classify(&reset), Verdict::Retry);
        // A method that does not retry UNAVAILABLE keeps it final.
        let other = GrpcClassify::retrying(&[Code::Aborted]);
        assert_eq!(other.classify(&refused), Verdict::Stop);
        // Either way the endpoint gave no answer.
        assert_eq!(
            retrying.answer(&refused, Verdict::Unsent),
            Answer::GatewayError
        );
    }
}
