//! [`Shed`]: the service a [`ShedLayer`](super::ShedLayer) makes.

use std::fmt;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response};
use http_body::Body;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::limit::ConcurrencyLimit;
use tower_service::Service;

use super::body::ShedBody;
use super::future::ShedFuture;

/// A service behind a [`ShedLayer`](super::ShedLayer): each request takes a
/// slot of the layer's limit (every clone shares it) or is answered 503.
///
/// ```
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_http::server::ShedLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = ConcurrencyLimit::fixed(2).build()?;
/// let handler = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// });
/// let service = ShedLayer::new(limit.clone()).layer(handler);
/// let response = service.clone().oneshot(http::Request::new(())).await?;
/// // An empty body is done as soon as the response is made: the slot is back.
/// assert_eq!((response.status(), limit.in_flight()), (http::StatusCode::OK, 0));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Shed<S, C = DefaultClock> {
    pub(super) inner: S,
    pub(super) limit: ConcurrencyLimit,
    pub(super) retry_after: Option<HeaderValue>,
    pub(super) clock: C,
}

impl<S: fmt::Debug, C> fmt::Debug for Shed<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shed")
            .field("inner", &self.inner)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<S, C> Shed<S, C> {
    /// The limit this service takes its slots of.
    #[must_use]
    pub fn limit(&self) -> &ConcurrencyLimit {
        &self.limit
    }

    /// The service behind it.
    #[must_use]
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, C, B, ResBody> Service<Request<B>> for Shed<S, C>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone,
    ResBody: Body,
    C: AsyncClock + Clone,
{
    type Response = Response<ShedBody<ResBody>>;
    type Error = S::Error;
    type Future = ShedFuture<S, B, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let queue = self
            .limit
            .max_queue_wait()
            .filter(|_| self.clock.can_sleep());
        let Some(max_wait) = queue else {
            return match self.limit.try_acquire() {
                Ok(permit) => ShedFuture::calling(self.inner.call(request), permit),
                Err(refused) => ShedFuture::refused(refused, self.retry_after.clone()),
            };
        };
        if let Some(permit) = self.limit.try_take() {
            return ShedFuture::calling(self.inner.call(request), permit);
        }
        // Every slot is taken but the limit queues: wait for one, holding
        // the service this `poll_ready` readied (a clone stays here).
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        ShedFuture::queued(
            self.limit.acquire(),
            self.clock.sleep(max_wait),
            self.clock.clone(),
            ready,
            request,
            self.retry_after.clone(),
        )
    }
}
