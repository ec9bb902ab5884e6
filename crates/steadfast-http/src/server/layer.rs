//! [`ShedLayer`]: the layer, its settings, and what HTTP adds to
//! steadfast-tower's shedding ([`HttpShedding`]).

use std::fmt;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Response, StatusCode, response::Parts};
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::limit::{ConcurrencyLimit, LimitRefused, Signal};
use steadfast_tower::shed::Shedding;
use tower_layer::Layer;

use super::{Shed, signal_of};

/// The `Retry-After` a [`ShedLayer`] answers with unless told otherwise:
/// one second.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Sheds the requests a [`ConcurrencyLimit`] has no slot for: they are
/// answered at once with `503 Service Unavailable` and a `Retry-After`
/// (default [`DEFAULT_RETRY_AFTER`]), and never reach the service. See the
/// [module docs](super) for when a slot is taken, given back, and what an
/// adaptive limit learns.
///
/// ```
/// use std::time::Duration;
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_http::server::ShedLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = ConcurrencyLimit::fixed(1).name("reports").build()?;
/// let handler = service_fn(|_: http::Request<String>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("done")))
/// });
/// let server = ShedLayer::new(limit.clone()).retry_after(Duration::from_secs(3)).layer(handler);
///
/// let busy = limit.try_acquire()?; // the one slot is taken
/// let shed = server.clone().oneshot(http::Request::new(String::new())).await?;
/// assert_eq!(shed.status(), http::StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(shed.headers()["retry-after"], "3");
///
/// drop(busy);
/// let served = server.oneshot(http::Request::new(String::new())).await?;
/// assert_eq!(served.status(), http::StatusCode::OK);
/// assert_eq!(limit.in_flight(), 1); // held by the response body until it is sent
/// drop(served);
/// assert_eq!(limit.in_flight(), 0);
/// # Ok(()) }
/// ```
///
/// It is steadfast-tower's [`ShedLayer`](steadfast_tower::shed::ShedLayer)
/// with [`HttpShedding`], and its builder.
#[derive(Clone)]
pub struct ShedLayer<C = DefaultClock> {
    inner: steadfast_tower::shed::ShedLayer<HttpShedding, C>,
}

impl<C> fmt::Debug for ShedLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedLayer")
            .field("limit", self.inner.limit())
            .field("retry_after", &self.inner.protocol().retry_after)
            .finish_non_exhaustive()
    }
}

impl ShedLayer {
    /// Sheds what `limit` has no slot for; a queue on the limit is waited
    /// in on tokio's clock.
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// let layer = steadfast_http::server::ShedLayer::new(ConcurrencyLimit::fixed(32).build()?);
    /// assert_eq!(layer.limit().limit(), 32);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn new(limit: ConcurrencyLimit) -> Self {
        Self {
            inner: steadfast_tower::shed::ShedLayer::new(limit, HttpShedding::default()),
        }
    }
}

impl<C> ShedLayer<C> {
    /// The `Retry-After` of a shed request, in whole seconds (rounded up;
    /// zero is `Retry-After: 0`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_http::server::ShedLayer;
    /// let layer = ShedLayer::new(ConcurrencyLimit::fixed(8).build()?)
    ///     .retry_after(Duration::from_millis(1500));
    /// assert_eq!(layer.retry_after_header().map(|v| v.to_str().unwrap()), Some("2"));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn retry_after(mut self, wait: Duration) -> Self {
        self.inner.protocol_mut().retry_after = Some(retry_after_value(wait));
        self
    }

    /// Sheds without a `Retry-After` header.
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_http::server::ShedLayer;
    /// let layer = ShedLayer::new(ConcurrencyLimit::fixed(8).build()?).no_retry_after();
    /// assert!(layer.retry_after_header().is_none());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn no_retry_after(mut self) -> Self {
        self.inner.protocol_mut().retry_after = None;
        self
    }

    /// Waits in the limit's queue on `clock` (a paused tokio clock or a
    /// [`VirtualClock`](steadfast::clock::VirtualClock) in tests).
    ///
    /// ```
    /// use steadfast::clock::TokioClock;
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_http::server::ShedLayer;
    /// let layer = ShedLayer::new(ConcurrencyLimit::fixed(8).build()?).clock(TokioClock);
    /// # let _ = layer;
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn clock<C2: AsyncClock + Clone>(self, clock: C2) -> ShedLayer<C2> {
        ShedLayer {
            inner: self.inner.clock(clock),
        }
    }

    /// The limit the layer takes its slots of (shared with every service
    /// it makes).
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// let layer = steadfast_http::server::ShedLayer::new(ConcurrencyLimit::fixed(4).name("db").build()?);
    /// assert_eq!(layer.limit().name(), "db");
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn limit(&self) -> &ConcurrencyLimit {
        self.inner.limit()
    }

    /// The `Retry-After` value a shed request gets, if any.
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// let layer = steadfast_http::server::ShedLayer::new(ConcurrencyLimit::fixed(4).build()?);
    /// assert_eq!(layer.retry_after_header().map(|v| v.to_str().unwrap()), Some("1"));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn retry_after_header(&self) -> Option<&HeaderValue> {
        self.inner.protocol().retry_after.as_ref()
    }

    /// The steadfast-tower layer it is, to use as one (in a stack generic
    /// over [`Shedding`]).
    #[must_use]
    pub fn into_inner(self) -> steadfast_tower::shed::ShedLayer<HttpShedding, C> {
        self.inner
    }
}

impl<S, C: Clone> Layer<S> for ShedLayer<C> {
    type Service = Shed<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        self.inner.layer(inner)
    }
}

/// What HTTP adds to steadfast-tower's shedding: a shed request is
/// answered `503 Service Unavailable` with the layer's `Retry-After` (if
/// any), and a response tells the limit what its status says (a 503 or 504
/// is a drop, any other 5xx nothing, the rest a success; see the
/// [module docs](super)). [`ShedLayer`] is the layer with it.
///
/// ```
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_http::server::HttpShedding;
/// use steadfast_tower::shed::ShedLayer;
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// // The same layer as `steadfast_http::server::ShedLayer::new(limit)`.
/// let layer = ShedLayer::new(ConcurrencyLimit::fixed(64).build()?, HttpShedding::default());
/// assert_eq!(layer.protocol().retry_after_header().map(|v| v.to_str().unwrap()), Some("1"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct HttpShedding {
    retry_after: Option<HeaderValue>,
}

impl Default for HttpShedding {
    /// A `Retry-After` of [`DEFAULT_RETRY_AFTER`].
    fn default() -> Self {
        Self {
            retry_after: Some(retry_after_value(DEFAULT_RETRY_AFTER)),
        }
    }
}

impl HttpShedding {
    /// The `Retry-After` value a shed request gets, if any.
    #[must_use]
    pub fn retry_after_header(&self) -> Option<&HeaderValue> {
        self.retry_after.as_ref()
    }
}

impl Shedding for HttpShedding {
    fn refused(&self, _refused: &LimitRefused) -> Response<()> {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        if let Some(value) = &self.retry_after {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, value.clone());
        }
        response
    }

    fn on_head(&self, head: &Parts) -> Option<Signal> {
        Some(signal_of(head.status))
    }

    /// Trailers say nothing over HTTP: the status has said it.
    fn on_trailers(&self, _trailers: &HeaderMap) -> Option<Signal> {
        None
    }
}

/// `wait` as `Retry-After` delta-seconds, rounded up.
fn retry_after_value(wait: Duration) -> HeaderValue {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    HeaderValue::from(secs)
}
