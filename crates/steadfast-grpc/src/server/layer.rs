//! [`ShedLayer`]: the layer, and its settings.

use std::fmt;
use std::time::Duration;

use http::HeaderValue;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::limit::ConcurrencyLimit;
use tower_layer::Layer;

use super::{GrpcShedding, Shed};

/// Sheds the gRPC calls a [`ConcurrencyLimit`] has no slot for: they are
/// answered at once with a Trailers-Only `RESOURCE_EXHAUSTED` naming the
/// limit (and `grpc-retry-pushback-ms`, if set), and never reach the
/// service. See the [module docs](super).
///
/// ```
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_grpc::server::ShedLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = ConcurrencyLimit::fixed(1).name("echo").build()?;
/// let handler = service_fn(|_: http::Request<()>| async {
///     let mut ok = http::Response::new(String::new());
///     ok.headers_mut().insert("grpc-status", http::HeaderValue::from_static("0"));
///     Ok::<_, std::convert::Infallible>(ok)
/// });
/// let server = ShedLayer::new(limit.clone())
///     .pushback(std::time::Duration::from_millis(250))
///     .layer(handler);
/// let _busy = limit.try_acquire()?; // the one slot is taken
/// let shed = server.oneshot(http::Request::new(())).await?;
/// assert_eq!(shed.headers()["grpc-status"], "8");
/// assert_eq!(shed.headers()["grpc-message"], "concurrency limit echo full: 1 in flight, limit 1");
/// assert_eq!(shed.headers()["grpc-retry-pushback-ms"], "250");
/// # Ok(()) }
/// ```
///
/// It is steadfast-tower's [`ShedLayer`](steadfast_tower::shed::ShedLayer)
/// with [`GrpcShedding`], and its builder.
#[derive(Clone)]
pub struct ShedLayer<C = DefaultClock> {
    inner: steadfast_tower::shed::ShedLayer<GrpcShedding, C>,
}

impl<C> fmt::Debug for ShedLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedLayer")
            .field("limit", self.inner.limit())
            .field("pushback", &self.inner.protocol().pushback)
            .finish_non_exhaustive()
    }
}

impl ShedLayer {
    /// Sheds what `limit` has no slot for, without a pushback; a queue on
    /// the limit is waited in on tokio's clock.
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// let layer = steadfast_grpc::server::ShedLayer::new(ConcurrencyLimit::fixed(32).build()?);
    /// assert_eq!(layer.limit().limit(), 32);
    /// assert!(layer.pushback_header().is_none());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn new(limit: ConcurrencyLimit) -> Self {
        Self {
            inner: steadfast_tower::shed::ShedLayer::new(limit, GrpcShedding::default()),
        }
    }
}

impl<C> ShedLayer<C> {
    /// Sends `grpc-retry-pushback-ms` with every refusal: a client whose
    /// retry policy retries `RESOURCE_EXHAUSTED` waits exactly this long
    /// before its next attempt (in whole milliseconds, rounded up).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_grpc::server::ShedLayer;
    /// let layer = ShedLayer::new(ConcurrencyLimit::fixed(8).build()?).pushback(Duration::from_micros(1500));
    /// assert_eq!(layer.pushback_header().map(|v| v.to_str().unwrap()), Some("2"));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn pushback(mut self, wait: Duration) -> Self {
        let nanos = wait.as_nanos();
        let ms = nanos / 1_000_000 + u128::from(!nanos.is_multiple_of(1_000_000));
        self.inner.protocol_mut().pushback =
            Some(HeaderValue::from(u64::try_from(ms).unwrap_or(u64::MAX)));
        self
    }

    /// Waits in the limit's queue on `clock`.
    ///
    /// ```
    /// use steadfast::clock::TokioClock;
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_grpc::server::ShedLayer;
    /// let layer = ShedLayer::new(ConcurrencyLimit::fixed(8).build()?).clock(TokioClock);
    /// # let _ = layer;
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn clock<C2: AsyncClock>(self, clock: C2) -> ShedLayer<C2> {
        ShedLayer {
            inner: self.inner.clock(clock),
        }
    }

    /// The limit the layer takes its slots of (shared with every service
    /// it makes).
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// let layer = steadfast_grpc::server::ShedLayer::new(ConcurrencyLimit::fixed(4).name("db").build()?);
    /// assert_eq!(layer.limit().name(), "db");
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn limit(&self) -> &ConcurrencyLimit {
        self.inner.limit()
    }

    /// The `grpc-retry-pushback-ms` value a refusal carries, if any.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_grpc::server::ShedLayer;
    /// let layer = ShedLayer::new(ConcurrencyLimit::fixed(4).build()?).pushback(Duration::from_millis(40));
    /// assert_eq!(layer.pushback_header().map(|v| v.to_str().unwrap()), Some("40"));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn pushback_header(&self) -> Option<&HeaderValue> {
        self.inner.protocol().pushback_header()
    }

    /// The steadfast-tower layer it is, to use as one (in a stack generic
    /// over [`Shedding`](steadfast_tower::shed::Shedding)).
    #[must_use]
    pub fn into_inner(self) -> steadfast_tower::shed::ShedLayer<GrpcShedding, C> {
        self.inner
    }
}

impl<S, C: Clone> Layer<S> for ShedLayer<C> {
    type Service = Shed<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        self.inner.layer(inner)
    }
}
