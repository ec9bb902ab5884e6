//! [`ShedLayer`]: the layer, and its settings.

use std::fmt;
use std::time::Duration;

use http::HeaderValue;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::limit::ConcurrencyLimit;
use tower_layer::Layer;

use super::service::Shed;

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
#[derive(Clone)]
pub struct ShedLayer<C = DefaultClock> {
    pub(super) limit: ConcurrencyLimit,
    pub(super) retry_after: Option<HeaderValue>,
    pub(super) clock: C,
}

impl<C> fmt::Debug for ShedLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedLayer")
            .field("limit", &self.limit)
            .field("retry_after", &self.retry_after)
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
            limit,
            retry_after: Some(retry_after_value(DEFAULT_RETRY_AFTER)),
            clock: DefaultClock::default(),
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
        self.retry_after = Some(retry_after_value(wait));
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
        self.retry_after = None;
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
            limit: self.limit,
            retry_after: self.retry_after,
            clock,
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
        &self.limit
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
        self.retry_after.as_ref()
    }
}

impl<S, C: Clone> Layer<S> for ShedLayer<C> {
    type Service = Shed<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Shed {
            inner,
            limit: self.limit.clone(),
            retry_after: self.retry_after.clone(),
            clock: self.clock.clone(),
        }
    }
}

/// `wait` as `Retry-After` delta-seconds, rounded up.
fn retry_after_value(wait: Duration) -> HeaderValue {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    HeaderValue::from(secs)
}
