//! [`GrpcService`]: the service a [`GrpcLayer`](super::GrpcLayer) makes, which routes each call
//! to its method's policy.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::deadline::DeadlineHeader;
use steadfast::limit::ConcurrencyLimit;
use steadfast::{Deadline, deadline};
use steadfast_tower::deadline::SetDeadlineHeader;
use steadfast_tower::replay::ReplayBody;
use tower_service::Service;

use crate::chaos::{ChaosAttempt, StatusResponse};
use crate::fallback::FallbackBody;
use crate::metrics::{self, Extra};

use super::BoxError;
use super::future::{GrpcFuture, Kind};
use super::routes::{Route, Routes};

/// The service a [`GrpcLayer`](super::GrpcLayer) makes.
pub struct GrpcService<S, C = DefaultClock> {
    pub(super) inner: Inner<S, C>,
    pub(super) routes: Arc<Routes<C>>,
}

impl<S: Clone, C: Clone> Clone for GrpcService<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            routes: Arc::clone(&self.routes),
        }
    }
}

impl<S: fmt::Debug, C: fmt::Debug> fmt::Debug for GrpcService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, C> GrpcService<S, C> {
    /// The concurrency limit every call takes its slots of, if it has one.
    #[must_use]
    pub fn concurrency_limit(&self) -> Option<&ConcurrencyLimit> {
        self.routes.concurrency.as_ref()
    }

    /// The endpoint set every attempt is sent to one of, if it has one.
    #[must_use]
    pub fn endpoints(&self) -> Option<&steadfast::endpoint::Endpoints> {
        self.routes.endpoints.as_ref()
    }
}

/// The service each attempt is made on: the layer's chaos (if any) over
/// the `grpc-timeout` of the attempt's time left over the channel.
pub(super) type Inner<S, C> = ChaosAttempt<SetDeadlineHeader<S, C>, C>;
pub(super) type Outgoing<B> = Request<ReplayBody<B>>;

impl<S, C, B, ResBody> Service<Request<B>> for GrpcService<S, C>
where
    S: Service<Outgoing<B>, Response = Response<ResBody>> + Clone,
    S::Error: Error + Send + Sync + 'static,
    B: Body<Data = Bytes> + Unpin,
    ResBody: Default + From<FallbackBody>,
    C: AsyncClock,
{
    type Response = Response<ResBody>;
    type Error = BoxError;
    type Future = GrpcFuture<S, C, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let ready = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, ready);
        let clock = self.routes.clock.clone();
        // The request's own timeout (tonic writes it as `grpc-timeout`).
        let own = request
            .headers()
            .get("grpc-timeout")
            .and_then(|v| DeadlineHeader::GRPC.decode(v.as_bytes()).ok())
            .map(|left| Deadline::after(clock.now(), left));
        // Every event of the call (attempts, waits, hedges, giving up) is
        // inside this span, which names the method and the target; a span
        // no subscriber wants costs a check.
        let span = tracing::debug_span!("grpc call", method = %request.uri().path());
        let entered = span.enter();
        let method = request.uri().path_and_query().cloned();
        // The call's effective deadline, to judge its last answer by: the
        // earliest of its own, the method's timeout and the ambient one.
        let due = |timeout: &Option<Duration>| {
            let method = timeout.map(|t| Deadline::after(clock.now(), t));
            Deadline::earliest(Deadline::earliest(own, method), deadline::current())
        };
        let (kind, due) = match self.routes.route(request.uri().path()) {
            Some(Route::Retry(layer, timeout)) => (
                Kind::Retry {
                    future: layer.run_reported(ready, request),
                },
                due(timeout),
            ),
            Some(Route::Hedge(layer, timeout)) => (
                Kind::Hedge {
                    future: layer.run_reported(ready, request),
                },
                due(timeout),
            ),
            Some(Route::Plain { timeout }) => {
                let method = timeout.map(|t| Deadline::after(clock.now(), t));
                let deadline = Deadline::earliest(own, method);
                drop(entered);
                return plain(ready, request, deadline, clock, span);
            }
            None => {
                drop(entered);
                return plain(ready, request, own, clock, span);
            }
        };
        drop(entered);
        GrpcFuture {
            kind,
            deadline: own,
            due,
            clock,
            span,
            labels: Some(Labels {
                method,
                target: Arc::clone(&self.routes.target),
            }),
            fallback: self.routes.fallback.clone(),
            answering: None,
        }
    }
}

/// What names a call in its metrics.
pub(super) struct Labels {
    pub(super) method: Option<http::uri::PathAndQuery>,
    pub(super) target: Arc<str>,
}

impl Labels {
    pub(super) fn record(&self, extra: Extra) {
        let method = self.method.as_ref().map_or("", |m| m.path());
        metrics::record(extra, method, &self.target);
    }
}

pub(super) fn plain<S, C, B>(
    mut inner: Inner<S, C>,
    request: Request<B>,
    deadline: Option<Deadline>,
    clock: C,
    span: tracing::Span,
) -> GrpcFuture<S, C, B>
where
    S: Service<Outgoing<B>> + Clone,
    S::Response: StatusResponse,
    B: Body<Data = Bytes> + Unpin,
    C: AsyncClock,
{
    let request = request.map(ReplayBody::streaming);
    let future = span.in_scope(|| match deadline {
        Some(d) => deadline::scope(d, || inner.call(request)),
        None => inner.call(request),
    });
    GrpcFuture {
        kind: Kind::Plain { future },
        deadline,
        due: deadline,
        clock,
        span,
        labels: None,
        // A layer with a fallback runs every call under the executor.
        fallback: None,
        answering: None,
    }
}
