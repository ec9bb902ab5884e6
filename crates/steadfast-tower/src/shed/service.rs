//! [`Shed`]: the service a [`ShedLayer`](super::ShedLayer) makes.

use std::fmt;
use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::limit::ConcurrencyLimit;
use tower_service::Service;

use super::Shedding;
use super::body::ShedBody;
use super::future::ShedFuture;

/// A service behind a [`ShedLayer`](super::ShedLayer): each request takes a
/// slot of the layer's limit (every clone shares it) or is answered with
/// the protocol's refusal.
#[derive(Clone)]
pub struct Shed<S, P, C = DefaultClock> {
    inner: S,
    limit: ConcurrencyLimit,
    protocol: P,
    clock: C,
}

impl<S: fmt::Debug, P, C> fmt::Debug for Shed<S, P, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shed")
            .field("inner", &self.inner)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<S, P, C> Shed<S, P, C> {
    pub(super) fn new(inner: S, limit: ConcurrencyLimit, protocol: P, clock: C) -> Self {
        Self {
            inner,
            limit,
            protocol,
            clock,
        }
    }

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

impl<S, P, C, B, ResBody> Service<Request<B>> for Shed<S, P, C>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone,
    ResBody: Body,
    P: Shedding,
    C: AsyncClock,
{
    type Response = Response<ShedBody<ResBody, P>>;
    type Error = S::Error;
    type Future = ShedFuture<S, B, P, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let protocol = self.protocol.clone();
        let queue = self
            .limit
            .max_queue_wait()
            .filter(|_| self.clock.can_sleep());
        let Some(max_wait) = queue else {
            return match self.limit.try_acquire() {
                Ok(permit) => ShedFuture::calling(self.inner.call(request), permit, protocol),
                Err(refused) => ShedFuture::refused(refused, protocol),
            };
        };
        if let Some(permit) = self.limit.try_take() {
            return ShedFuture::calling(self.inner.call(request), permit, protocol);
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
            protocol,
        )
    }
}
