//! [`RateLimitLayer`]: a gRPC server's rate limit, answering
//! `RESOURCE_EXHAUSTED` with the limit's exact wait as pushback.

use http::{HeaderValue, Response};
use steadfast::rate::{KeyedRateLimit, RateLimit, RateRefused};
use steadfast_tower::shed::{PerKey, RateRefusal, RateShed, RateShedLayer};
use tower_layer::Layer;

use crate::Code;
use crate::trailers_only::{pushback_value, trailers_only};

/// What gRPC answers a call its rate limit refused: a Trailers-Only
/// `RESOURCE_EXHAUSTED` naming the limit, with `grpc-retry-pushback-ms` the
/// limit's own wait in milliseconds, rounded up (a client honouring it, as
/// gRFC A6 says, is admitted when it comes back), or `-1` (do not retry)
/// when the call could never be admitted (its cost is above the burst).
///
/// ```
/// use std::time::Duration;
/// use steadfast::rate::RateRefused;
/// use steadfast_grpc::server::GrpcRateRefusal;
/// use steadfast_tower::shed::RateRefusal;
///
/// let refused = RateRefused { by: "api", retry_after: Some(Duration::from_micros(12_300)) };
/// let answer = GrpcRateRefusal.refused(&refused);
/// assert_eq!(answer.headers()["grpc-status"], "8");
/// assert_eq!(answer.headers()["grpc-retry-pushback-ms"], "13");
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GrpcRateRefusal;

impl RateRefusal for GrpcRateRefusal {
    fn refused(&self, refused: &RateRefused) -> Response<()> {
        // `-1`: a call that could never fit (gRFC A6: do not retry).
        let pushback = refused
            .retry_after
            .map_or_else(|| HeaderValue::from_static("-1"), pushback_value);
        trailers_only(
            u32::from(Code::ResourceExhausted.number()),
            &refused.to_string(),
            Some(&pushback),
        )
    }
}

/// A tower layer for tonic services (`Server::builder().layer(..)`) that
/// admits each call through a shared [`RateLimit`] and answers the rest at
/// once with [`GrpcRateRefusal`]. Every connection shares the limit. It is
/// steadfast-tower's [`RateShedLayer`] with gRPC's refusal.
///
/// ```
/// use steadfast::rate::{Quota, RateLimit};
/// use steadfast_grpc::server::RateLimitLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = RateLimit::new(Quota::per_minute(1)?);
/// let handler = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("message")))
/// });
/// let service = RateLimitLayer::new(limit).layer(handler);
/// assert!(service.clone().oneshot(http::Request::new(())).await?.headers().get("grpc-status").is_none());
/// let refused = service.oneshot(http::Request::new(())).await?;
/// assert_eq!(refused.headers()["grpc-status"], "8");
/// # Ok(()) }
/// ```
///
/// A steadfast-grpc client whose retry policy lists `RESOURCE_EXHAUSTED`
/// waits the pushback exactly and restarts its backoff, as A6 says.
#[derive(Clone, Debug)]
pub struct RateLimitLayer<A = RateLimit>(RateShedLayer<GrpcRateRefusal, A>);

impl RateLimitLayer {
    /// Admits calls through `limit`.
    #[must_use]
    pub fn new(limit: RateLimit) -> Self {
        Self(RateShedLayer::new(limit, GrpcRateRefusal))
    }

    /// Admits each call through `limit` under the key `key` draws from it
    /// (a tenant in the metadata, the method's path): each key has quotas
    /// of its own, in the limit's bounded key set.
    ///
    /// ```
    /// use steadfast::rate::{KeyedRateLimit, Quota};
    /// use steadfast_grpc::server::RateLimitLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let per_method = KeyedRateLimit::builder().quota(Quota::per_minute(1)?).build()?;
    /// let method = |r: &http::Request<()>| r.uri().path().to_owned();
    /// let handler = service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// });
    /// let service = RateLimitLayer::per_key(per_method, method).layer(handler);
    /// let to = |path: &str| http::Request::builder().uri(path).body(()).unwrap();
    /// assert!(service.clone().oneshot(to("/echo.Echo/Say")).await?.headers().get("grpc-status").is_none());
    /// assert!(service.clone().oneshot(to("/echo.Echo/Shout")).await?.headers().get("grpc-status").is_none());
    /// assert_eq!(service.oneshot(to("/echo.Echo/Say")).await?.headers()["grpc-status"], "8");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn per_key<K, F>(limit: KeyedRateLimit<K>, key: F) -> RateLimitLayer<PerKey<K, F>> {
        RateLimitLayer(RateShedLayer::per_key(limit, key, GrpcRateRefusal))
    }
}

impl<S, A: Clone> Layer<S> for RateLimitLayer<A> {
    type Service = RateShed<S, GrpcRateRefusal, A>;

    fn layer(&self, inner: S) -> Self::Service {
        self.0.layer(inner)
    }
}
