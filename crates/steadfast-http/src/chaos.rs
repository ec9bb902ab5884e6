//! The responses a client's chaos substitutes for an attempt.

use std::time::Duration;

/// A response with `status` (and a `Retry-After` of `retry_after`, in whole
/// seconds rounded up) for a client's chaos to substitute for an attempt
/// ([`ClientBuilder::chaos`](crate::ClientBuilder::chaos)): the client
/// classifies it like a response from the server. A status outside
/// 100..=999 reads as 503.
///
/// ```
/// use std::time::Duration;
/// let r = steadfast_http::chaos_response(429, Some(Duration::from_millis(1500)));
/// assert_eq!(r.status(), 429);
/// assert_eq!(r.headers()["retry-after"], "2");
/// ```
#[must_use]
pub fn chaos_response(status: u16, retry_after: Option<Duration>) -> reqwest::Response {
    let mut response = http::Response::new(Vec::<u8>::new());
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::SERVICE_UNAVAILABLE);
    if let Some(wait) = retry_after {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
    }
    reqwest::Response::from(response)
}
