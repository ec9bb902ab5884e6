//! The safe default classification of HTTP outcomes, and the idempotency
//! rule.

use std::time::SystemTime;

use http::{Method, StatusCode};
use steadfast::endpoint::Answer;
use steadfast::{Classify, Verdict};

use crate::RetryAfter;

/// The outcome of one attempt, as a classifier sees it.
pub type Outcome = Result<reqwest::Response, reqwest::Error>;

/// The default classifier: retries transport failures (connect, timeout, a
/// connection closed before the response arrived) and the statuses 408,
/// 429, 500, 502, 503 and 504, honouring `Retry-After` on them; every other
/// response is final and handed to the caller as it is (including 501 and
/// the other 4xx), and errors that no retry can fix (a request that could
/// not be built, a redirect loop) stop the call.
///
/// A retryable response without `Retry-After` is read for a rate-limit
/// reset instead (`RateLimit-Reset`, `X-RateLimit-Reset`: seconds or a
/// Unix time, one past 300 s ignored, as Envoy's
/// `rate_limited_retry_back_off`): the retry waits for it, clamped to the
/// policy's `max_delay` and the deadline like any hint.
///
/// A connection that could not be made (refused, or not made in time) is
/// [`Verdict::Unsent`]: the request was never written, so sending it again
/// cannot do its work twice; so is an HTTP/2 stream the server refused
/// unprocessed ([`DefaultClassifier::is_unprocessed`]). Over several endpoints
/// ([`ClientBuilder::endpoints`](crate::ClientBuilder::endpoints)) such a
/// call is requeued to another endpoint without using an attempt, a POST
/// included; over one, it is an ordinary retry (a POST's is not made).
///
/// It also says which outcomes are signs of overload
/// ([`Classify::overloaded`]): a 429 or 503 response, and a transport error
/// that is a timeout. Those are drop signals for a
/// [concurrency limit](crate::ClientBuilder::concurrency_limit): an
/// adaptive limit shrinks on them ([`DefaultClassifier::is_overload_status`]).
///
/// Any [`Classify`] for [`Outcome`] can replace it
/// ([`ClientBuilder::classify`](crate::ClientBuilder::classify)); it sees
/// the status, the headers and the error. A classifier of your own that
/// does not implement `overloaded` sends an adaptive limit no drop signal
/// but an attempt cut off by its timeout; delegate to this one to keep
/// them.
///
/// ```
/// use steadfast_http::DefaultClassifier;
/// use http::StatusCode;
///
/// assert!(DefaultClassifier::is_retryable_status(StatusCode::SERVICE_UNAVAILABLE));
/// assert!(!DefaultClassifier::is_retryable_status(StatusCode::NOT_IMPLEMENTED));
/// assert!(!DefaultClassifier::is_retryable_status(StatusCode::NOT_FOUND));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefaultClassifier;

impl DefaultClassifier {
    /// Whether the default classifier retries a response with `status`.
    #[must_use]
    pub fn is_retryable_status(status: StatusCode) -> bool {
        matches!(status.as_u16(), 408 | 429 | 500 | 502 | 503 | 504)
    }

    /// Whether a response with `status` is a sign of overload: 429 (Too
    /// Many Requests) and 503 (Service Unavailable), the statuses a server
    /// that sheds load answers (steadfast's own
    /// [`ShedLayer`](crate::server::ShedLayer) answers 503).
    ///
    /// ```
    /// use http::StatusCode;
    /// use steadfast_http::DefaultClassifier;
    /// assert!(DefaultClassifier::is_overload_status(StatusCode::TOO_MANY_REQUESTS));
    /// assert!(DefaultClassifier::is_overload_status(StatusCode::SERVICE_UNAVAILABLE));
    /// // Retryable, but not a sign the server is over its capacity.
    /// assert!(!DefaultClassifier::is_overload_status(StatusCode::BAD_GATEWAY));
    /// ```
    #[must_use]
    pub fn is_overload_status(status: StatusCode) -> bool {
        matches!(status.as_u16(), 429 | 503)
    }

    /// What a response with `status` says of the endpoint that sent it
    /// ([`Classify::answer`], for outlier detection): 1xx to 3xx
    /// [`Answer::Ok`]; 502, 503 and 504 [`Answer::GatewayError`]; any
    /// other 5xx [`Answer::ServerError`]; a 4xx (429 included)
    /// [`Answer::ClientError`], which Envoy's model never counts and A50's
    /// does.
    ///
    /// ```
    /// use http::StatusCode;
    /// use steadfast::endpoint::Answer;
    /// use steadfast_http::DefaultClassifier;
    /// assert_eq!(DefaultClassifier::answer_for_status(StatusCode::OK), Answer::Ok);
    /// assert_eq!(DefaultClassifier::answer_for_status(StatusCode::BAD_GATEWAY), Answer::GatewayError);
    /// assert_eq!(DefaultClassifier::answer_for_status(StatusCode::NOT_FOUND), Answer::ClientError);
    /// ```
    #[must_use]
    pub fn answer_for_status(status: StatusCode) -> Answer {
        match status.as_u16() {
            502..=504 => Answer::GatewayError,
            500.. => Answer::ServerError,
            400..=499 => Answer::ClientError,
            _ => Answer::Ok,
        }
    }

    /// Whether the default classifier retries `error`.
    #[must_use]
    pub fn is_retryable_error(error: &reqwest::Error) -> bool {
        !(error.is_builder() || error.is_redirect() || error.is_decode() || error.is_status())
            && (error.is_connect() || error.is_timeout() || error.is_request() || error.is_body())
    }
}

impl Classify<reqwest::Response, reqwest::Error> for DefaultClassifier {
    fn classify(&self, outcome: &Outcome) -> Verdict {
        match outcome {
            Ok(response) if Self::is_retryable_status(response.status()) => {
                let now = SystemTime::now();
                let hint = RetryAfter::from_headers(response.headers(), now)
                    .or_else(|| RetryAfter::from_reset_headers(response.headers(), now));
                match hint {
                    Some(RetryAfter::Delay(d)) => Verdict::RetryAfter(d),
                    _ => Verdict::Retry,
                }
            }
            Ok(_) => Verdict::Success,
            // No connection, so nothing was written: safe to send again
            // even when not idempotent (requeued under an endpoint set).
            Err(e) if e.is_connect() || Self::is_unprocessed(e) => Verdict::Unsent,
            Err(e) if Self::is_retryable_error(e) => Verdict::Retry,
            Err(_) => Verdict::Stop,
        }
    }

    /// A 429 or 503 response, or a transport error that timed out.
    fn overloaded(&self, outcome: &Outcome) -> bool {
        match outcome {
            Ok(response) => Self::is_overload_status(response.status()),
            Err(e) => e.is_timeout(),
        }
    }

    /// A response by its status ([`answer_for_status`](Self::answer_for_status));
    /// no connection, or no answer in time, a gateway error (as Envoy
    /// counts them); any other transport error the endpoint's.
    fn answer(&self, outcome: &Outcome, _: Verdict) -> Answer {
        match outcome {
            Ok(response) => Self::answer_for_status(response.status()),
            Err(e) if e.is_connect() || e.is_timeout() => Answer::GatewayError,
            Err(_) => Answer::ServerError,
        }
    }
}

impl DefaultClassifier {
    /// Whether a transport error says the server never processed the
    /// request: its HTTP/2 stream reset with `REFUSED_STREAM`, or left out
    /// of the server's `GOAWAY` (RFC 9113 §8.7;
    /// [`steadfast_tower::unprocessed`]). Always `false` without the
    /// `http2` feature (on by default), over HTTP/1.1, and for any other
    /// error.
    #[must_use]
    pub fn is_unprocessed(error: &reqwest::Error) -> bool {
        #[cfg(feature = "http2")]
        {
            steadfast_tower::unprocessed(error)
        }
        #[cfg(not(feature = "http2"))]
        {
            let _ = error;
            false
        }
    }
}

/// Whether a method is idempotent (RFC 9110 §9.2.2): GET, HEAD, OPTIONS,
/// TRACE, PUT and DELETE. Only these are retried or hedged unless the
/// caller opts in.
///
/// ```
/// use http::Method;
/// assert!(steadfast_http::is_idempotent(&Method::PUT));
/// assert!(!steadfast_http::is_idempotent(&Method::POST));
/// ```
#[must_use]
pub fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, retry_after: Option<&str>) -> reqwest::Response {
        let mut builder = http::Response::builder().status(status);
        if let Some(v) = retry_after {
            builder = builder.header("retry-after", v);
        }
        reqwest::Response::from(builder.body(Vec::<u8>::new()).expect("valid response"))
    }

    #[test]
    fn the_default_retries_exactly_the_safe_statuses() {
        for status in 100..600_u16 {
            let verdict = DefaultClassifier.classify(&Ok(response(status, None)));
            let expected = if [408, 429, 500, 502, 503, 504].contains(&status) {
                Verdict::Retry
            } else {
                Verdict::Success
            };
            assert_eq!(verdict, expected, "status {status}");
        }
    }

    #[test]
    fn retry_after_on_a_retryable_status_is_a_hint() {
        assert_eq!(
            DefaultClassifier.classify(&Ok(response(429, Some("2")))),
            Verdict::RetryAfter(std::time::Duration::from_secs(2))
        );
        assert_eq!(
            DefaultClassifier.classify(&Ok(response(503, Some("garbage")))),
            Verdict::Retry
        );
        // Not on a final status.
        assert_eq!(
            DefaultClassifier.classify(&Ok(response(404, Some("2")))),
            Verdict::Success
        );
    }

    #[test]
    fn overload_is_429_and_503_whatever_the_verdict() {
        for status in 100..600_u16 {
            let expected = status == 429 || status == 503;
            assert_eq!(
                DefaultClassifier.overloaded(&Ok(response(status, None))),
                expected,
                "status {status}"
            );
        }
        // A hint does not change it: a 503 with Retry-After is a retry
        // after the hint, and a sign of overload.
        let hinted = Ok(response(503, Some("1")));
        assert_eq!(
            DefaultClassifier.classify(&hinted),
            Verdict::RetryAfter(std::time::Duration::from_secs(1))
        );
        assert!(DefaultClassifier.overloaded(&hinted));
    }

    #[tokio::test]
    async fn a_timed_out_transport_error_is_overload_and_a_refused_connection_is_not() {
        // A server that accepts and never answers: reqwest's own timeout.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_millis(50))
            .build()
            .expect("client");
        let timed_out: Outcome = client.get(format!("http://{addr}/")).send().await;
        let error = timed_out.as_ref().expect_err("timed out");
        assert!(error.is_timeout());
        assert!(DefaultClassifier.overloaded(&timed_out));
        hold.abort();

        // Nothing listens on a port just freed: connection refused.
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = free.local_addr().expect("address").port();
        drop(free);
        let refused: Outcome = client.get(format!("http://127.0.0.1:{port}/")).send().await;
        assert!(refused.as_ref().expect_err("refused").is_connect());
        assert!(!DefaultClassifier.overloaded(&refused));
    }

    #[test]
    fn idempotent_methods() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(is_idempotent(&m.parse().expect("method")), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT", "PURGE"] {
            assert!(!is_idempotent(&m.parse().expect("method")), "{m}");
        }
    }
}
