//! [`RateLimitLayer`]: a server's rate limit, answering `429 Too Many
//! Requests` with the exact `Retry-After` the limit computes.

use std::time::Duration;

use http::{HeaderValue, Response, StatusCode};
use steadfast::rate::{KeyedRateLimit, RateLimit, RateRefused};
use steadfast_tower::shed::{PerKey, RateRefusal, RateShed, RateShedLayer};
use tower_layer::Layer;

/// What HTTP answers a request its rate limit refused: `429 Too Many
/// Requests` with `Retry-After` the limit's own wait, in whole seconds
/// rounded up (so a client that honours it is admitted when it comes
/// back); without one if the request could never be admitted (its cost is
/// above the burst).
///
/// ```
/// use std::time::Duration;
/// use steadfast::rate::RateRefused;
/// use steadfast_http::server::TooManyRequests;
/// use steadfast_tower::shed::RateRefusal;
///
/// let refused = RateRefused { by: "api", retry_after: Some(Duration::from_millis(1200)) };
/// let answer = TooManyRequests.refused(&refused);
/// assert_eq!(answer.status(), 429);
/// assert_eq!(answer.headers()["retry-after"], "2");
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct TooManyRequests;

impl RateRefusal for TooManyRequests {
    fn refused(&self, refused: &RateRefused) -> Response<()> {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        if let Some(wait) = refused.retry_after {
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                HeaderValue::from(whole_seconds(wait)),
            );
        }
        response
    }
}

/// `wait` in whole seconds, rounded up.
fn whole_seconds(wait: Duration) -> u64 {
    let secs = wait.as_secs();
    if wait.subsec_nanos() > 0 {
        secs.saturating_add(1)
    } else {
        secs
    }
}

/// A tower layer for axum and hyper services that admits each request
/// through a shared [`RateLimit`] and answers the rest at once with
/// [`TooManyRequests`]. Every connection's copy of the router shares the
/// limit, so it bounds the whole server (tower's own `RateLimit`, counted
/// per service, would bound each connection). It is steadfast-tower's
/// [`RateShedLayer`] with HTTP's refusal.
///
/// ```
/// use axum::{Router, routing::get};
/// use steadfast::rate::{Quota, RateLimit};
/// use steadfast_http::server::RateLimitLayer;
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// let quota = RateLimit::builder().name("api").quota(Quota::per_second(100)?).build()?;
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(RateLimitLayer::new(quota));
/// # let _ = app;
/// # Ok(()) }
/// ```
///
/// A steadfast-http client on the other side classifies the 429 as
/// retryable and a sign of overload, and waits the `Retry-After` (clamped by
/// its `max_delay` and deadline) before it tries again.
#[derive(Clone, Debug)]
pub struct RateLimitLayer<A = RateLimit>(RateShedLayer<TooManyRequests, A>);

impl RateLimitLayer {
    /// Admits requests through `limit`.
    #[must_use]
    pub fn new(limit: RateLimit) -> Self {
        Self(RateShedLayer::new(limit, TooManyRequests))
    }

    /// Admits each request through `limit` under the key `key` draws from
    /// it (an API key, a tenant, the client's address): each key has
    /// quotas of its own, in the limit's bounded key set.
    ///
    /// ```
    /// use axum::{Router, body::Body, http::Request, routing::get};
    /// use steadfast::rate::{KeyedRateLimit, Quota};
    /// use steadfast_http::server::RateLimitLayer;
    ///
    /// # fn main() -> Result<(), steadfast::ConfigError> {
    /// let per_key = KeyedRateLimit::builder().name("per api key").quota(Quota::per_second(10)?).build()?;
    /// // Requests without a key share one quota (the key `None`).
    /// let api_key = |r: &Request<Body>| r.headers().get("x-api-key").map(|v| v.as_bytes().to_vec());
    /// let app: Router = Router::new()
    ///     .route("/", get(|| async { "hello" }))
    ///     .layer(RateLimitLayer::per_key(per_key, api_key));
    /// # let _ = app;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn per_key<K, F>(limit: KeyedRateLimit<K>, key: F) -> RateLimitLayer<PerKey<K, F>> {
        RateLimitLayer(RateShedLayer::per_key(limit, key, TooManyRequests))
    }
}

impl<S, A: Clone> Layer<S> for RateLimitLayer<A> {
    type Service = RateShed<S, TooManyRequests, A>;

    fn layer(&self, inner: S) -> Self::Service {
        self.0.layer(inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_rounded_up_to_whole_seconds_and_never_down() {
        assert_eq!(whole_seconds(Duration::ZERO), 0);
        assert_eq!(whole_seconds(Duration::from_nanos(1)), 1);
        assert_eq!(whole_seconds(Duration::from_secs(3)), 3);
        assert_eq!(whole_seconds(Duration::from_millis(3001)), 4);
        assert_eq!(whole_seconds(Duration::MAX), u64::MAX);
        let never = RateRefused {
            by: "api",
            retry_after: None,
        };
        assert!(
            TooManyRequests
                .refused(&never)
                .headers()
                .get("retry-after")
                .is_none()
        );
    }
}
