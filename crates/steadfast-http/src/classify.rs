//! The safe default classification of HTTP outcomes, and the idempotency
//! rule.

use std::time::SystemTime;

use http::{Method, StatusCode};
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
/// Any [`Classify`] for [`Outcome`] can replace it
/// ([`ClientBuilder::classify`](crate::ClientBuilder::classify)); it sees
/// the status, the headers and the error.
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
                match RetryAfter::from_headers(response.headers(), SystemTime::now()) {
                    Some(RetryAfter::Delay(d)) => Verdict::RetryAfter(d),
                    _ => Verdict::Retry,
                }
            }
            Ok(_) => Verdict::Success,
            Err(e) if Self::is_retryable_error(e) => Verdict::Retry,
            Err(_) => Verdict::Stop,
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
    fn idempotent_methods() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(is_idempotent(&m.parse().expect("method")), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT", "PURGE"] {
            assert!(!is_idempotent(&m.parse().expect("method")), "{m}");
        }
    }
}
