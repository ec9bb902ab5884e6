//! [`GrpcLayer`]: a service config applied per method to any gRPC client
//! service (a tonic `Channel`, or a stack over one).

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use steadfast::call::Reported;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::deadline::{CancelCause, DeadlineHeader};
use steadfast::policy::Limits;
use steadfast::{
    Backoff, ConfigError, Deadline, HedgePolicy, Report, RetryError, RetryPolicy, StopReason,
    deadline,
};
use steadfast_tower::deadline::{SetDeadlineHeader, SetDeadlineHeaderLayer};
use steadfast_tower::replay::ReplayBody;
use steadfast_tower::{HedgeLayer, RetryLayer, hedge, retry};
use tower_layer::Layer;
use tower_service::Service;

use crate::config::{MethodPolicy, ServiceConfig};
use crate::metrics::{self, Extra};
use crate::throttle::bucket_for;
use crate::{Code, GrpcClassify, GrpcReplay};

/// A boxed error, as tonic takes them.
pub type BoxError = Box<dyn Error + Send + Sync>;

type RetryRoute<C> = RetryLayer<Arc<RetryPolicy<Backoff>>, GrpcClassify, GrpcReplay, C>;
type HedgeRoute<C> = HedgeLayer<Arc<HedgePolicy>, GrpcClassify, GrpcReplay, C>;

/// What a method's calls go through.
enum Route<C> {
    Retry(RetryRoute<C>),
    Hedge(HedgeRoute<C>),
    Plain { timeout: Option<Duration> },
}

/// The routes of a service config, one per method config, in its order.
struct Routes<C> {
    config: ServiceConfig,
    routes: Vec<Route<C>>,
    clock: C,
    // The server name, as the metrics' `grpc.target`.
    target: Arc<str>,
}

impl<C> Routes<C> {
    fn route(&self, path: &str) -> Option<&Route<C>> {
        let config = self.config.method_config(path)?;
        let index = self
            .config
            .method_configs()
            .iter()
            .position(|c| std::ptr::eq(c, config))?;
        self.routes.get(index)
    }
}

/// Applies a gRPC service config (gRFC A6) to every call of the inner
/// service, per method: retries with the A6 backoff on the listed codes,
/// hedging, the server's pushback, throttling with the A6 token bucket
/// shared by every channel to the same server, `grpc-previous-rpc-attempts`
/// on every attempt after the first, and each attempt's `grpc-timeout` set
/// to the call's true time left (the earliest of the request's own timeout,
/// the method's `timeout` and the ambient deadline).
///
/// A response head without `grpc-status` commits the call: it is returned
/// as it is and never retried. A Trailers-Only response (its status in its
/// headers) is classified: see [`GrpcClassify`]. Request messages are
/// buffered for replay up to 256 KiB per call ([`GrpcReplay`]); a larger
/// request is sent once. A call whose retries end because its deadline
/// would pass is answered with `DEADLINE_EXCEEDED` when its last attempt
/// failed in transport.
///
/// The inner service takes `http::Request<ReplayBody<B>>`: for a tonic
/// `Channel`, map the body back with `tonic::body::Body::new` (see the
/// crate README).
pub struct GrpcLayer<C = DefaultClock> {
    routes: Arc<Routes<C>>,
    header: SetDeadlineHeaderLayer<C>,
}

impl<C: Clone> Clone for GrpcLayer<C> {
    fn clone(&self) -> Self {
        Self {
            routes: Arc::clone(&self.routes),
            header: self.header.clone(),
        }
    }
}

impl<C> fmt::Debug for GrpcLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcLayer")
            .field("config", &self.routes.config)
            .finish_non_exhaustive()
    }
}

impl GrpcLayer {
    /// The layer for calls to `target` (the server name: its throttling
    /// bucket is shared with every other channel to it) under `config`, on
    /// tokio's clock.
    ///
    /// # Errors
    /// A core [`ConfigError`] if a policy of the config is refused (a
    /// config that parsed never has one).
    pub fn new(config: ServiceConfig, target: &str) -> Result<Self, ConfigError> {
        Self::with_clock(config, target, DefaultClock::default())
    }
}

impl<C: AsyncClock> GrpcLayer<C> {
    /// [`new`](GrpcLayer::new), reading time and sleeping on `clock`.
    ///
    /// # Errors
    /// As [`new`](GrpcLayer::new).
    pub fn with_clock(config: ServiceConfig, target: &str, clock: C) -> Result<Self, ConfigError> {
        let bucket = config
            .retry_throttling()
            .map(|t| bucket_for(target, *t))
            .transpose()?;
        let mut routes = Vec::with_capacity(config.method_configs().len());
        for method in config.method_configs() {
            let timeout = method.timeout();
            // The method's timeout bounds the whole call; the server's bucket
            // is asked before every retry and hedge. One function sets both
            // on either kind of policy.
            let limits = |mut limits: Limits| {
                if let Some(t) = timeout {
                    limits = limits.with_max_elapsed(t);
                }
                if let Some(b) = &bucket {
                    limits = limits.with_control(b.clone());
                }
                limits
            };
            routes.push(match method.policy() {
                Some(MethodPolicy::Retry(r)) => Route::Retry(
                    RetryLayer::new(r.to_policy()?.to_builder().limits(limits).build()?)
                        .with_classifier(GrpcClassify::retrying(r.retryable_codes()))
                        .replay(GrpcReplay::default())
                        .clock(clock.clone()),
                ),
                Some(MethodPolicy::Hedging(h)) => Route::Hedge(
                    HedgeLayer::new(h.to_policy()?.to_builder().limits(limits).build()?)
                        .with_classifier(GrpcClassify::retrying(h.non_fatal_codes()))
                        .replay(GrpcReplay::default())
                        .clock(clock.clone()),
                ),
                None => Route::Plain { timeout },
            });
        }
        let header = SetDeadlineHeaderLayer::new(DeadlineHeader::GRPC)?.clock(clock.clone());
        Ok(Self {
            routes: Arc::new(Routes {
                config,
                routes,
                clock,
                target: Arc::from(target),
            }),
            header,
        })
    }
}

impl<S, C: Clone> Layer<S> for GrpcLayer<C> {
    type Service = GrpcService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcService {
            inner: self.header.layer(inner),
            routes: Arc::clone(&self.routes),
        }
    }
}

/// The service a [`GrpcLayer`] makes.
pub struct GrpcService<S, C = DefaultClock> {
    inner: SetDeadlineHeader<S, C>,
    routes: Arc<Routes<C>>,
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

type Inner<S, C> = SetDeadlineHeader<S, C>;
type Outgoing<B> = Request<ReplayBody<B>>;

impl<S, C, B, ResBody> Service<Request<B>> for GrpcService<S, C>
where
    S: Service<Outgoing<B>, Response = Response<ResBody>> + Clone,
    S::Error: Error + Send + Sync + 'static,
    B: Body<Data = Bytes> + Unpin,
    ResBody: Default,
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
        let kind = match self.routes.route(request.uri().path()) {
            Some(Route::Retry(layer)) => Kind::Retry {
                future: layer.run_reported(ready, request),
            },
            Some(Route::Hedge(layer)) => Kind::Hedge {
                future: layer.run_reported(ready, request),
            },
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
            clock,
            span,
            labels: Some(Labels {
                method,
                target: Arc::clone(&self.routes.target),
            }),
        }
    }
}

/// What names a call in its metrics.
struct Labels {
    method: Option<http::uri::PathAndQuery>,
    target: Arc<str>,
}

impl Labels {
    fn record(&self, extra: Extra) {
        let method = self.method.as_ref().map_or("", |m| m.path());
        metrics::record(extra, method, &self.target);
    }
}

fn plain<S, C, B>(
    mut inner: Inner<S, C>,
    request: Request<B>,
    deadline: Option<Deadline>,
    clock: C,
    span: tracing::Span,
) -> GrpcFuture<S, C, B>
where
    S: Service<Outgoing<B>>,
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
        clock,
        span,
        labels: None,
    }
}

pin_project! {
    /// The future of a [`GrpcService`] call.
    #[must_use = "futures do nothing unless polled"]
    pub struct GrpcFuture<S, C, B>
    where
        S: Service<Outgoing<B>>,
        B: Body<Data = Bytes>,
        B: Unpin,
        C: AsyncClock,
    {
        #[pin]
        kind: Kind<S, C, B>,
        // The request's own deadline, ambient around every poll.
        deadline: Option<Deadline>,
        clock: C,
        // The call's span: every poll runs inside it.
        span: tracing::Span,
        // Method and target, for the metrics of a retried or hedged call.
        labels: Option<Labels>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<S, C, B>
    where
        S: Service<Outgoing<B>>,
        B: Body<Data = Bytes>,
        B: Unpin,
        C: AsyncClock,
    {
        Retry { #[pin] future: retry::ResponseFuture<Inner<S, C>, Request<B>, Arc<RetryPolicy<Backoff>>, GrpcClassify, GrpcReplay, C, Reported> },
        Hedge { #[pin] future: hedge::ResponseFuture<Inner<S, C>, Request<B>, Arc<HedgePolicy>, GrpcClassify, GrpcReplay, C, Reported> },
        Plain { #[pin] future: S::Future },
    }
}

impl<S, C, B> fmt::Debug for GrpcFuture<S, C, B>
where
    S: Service<Outgoing<B>>,
    B: Body<Data = Bytes> + Unpin,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            Kind::Retry { .. } => "GrpcFuture(retrying)",
            Kind::Hedge { .. } => "GrpcFuture(hedging)",
            Kind::Plain { .. } => "GrpcFuture(plain)",
        })
    }
}

impl<S, C, B, ResBody> Future for GrpcFuture<S, C, B>
where
    S: Service<Outgoing<B>, Response = Response<ResBody>> + Clone,
    S::Error: Error + Send + Sync + 'static,
    B: Body<Data = Bytes> + Unpin,
    ResBody: Default,
    C: AsyncClock,
{
    type Output = Result<Response<ResBody>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let kind = this.kind;
        let clock = &*this.clock;
        let labels = this.labels.as_ref();
        let poll = move || match kind.project() {
            KindProj::Retry { future } => future.poll(cx).map(|report| {
                if let Some(labels) = labels {
                    labels.record(Extra::Retries {
                        retries: report.attempts.saturating_sub(1),
                        delay: report.waited,
                    });
                }
                answer(report)
            }),
            KindProj::Hedge { future } => future.poll(cx).map(|report| {
                if let Some(labels) = labels {
                    labels.record(Extra::Hedges {
                        hedges: report.hedge.map_or(0, |stats| stats.hedges()),
                    });
                }
                answer(report)
            }),
            KindProj::Plain { future } => future.poll(cx).map(|out| match out {
                Ok(response) => Ok(response),
                // A call cut off once its deadline had passed (tonic's channel
                // enforces the `grpc-timeout` it sends, and reports
                // CANCELLED) is DEADLINE_EXCEEDED, as gRPC reports it.
                Err(e) => match CancelCause::classify(deadline::current(), clock.now()) {
                    CancelCause::DeadlineExceeded => {
                        Ok(status_response(Code::DeadlineExceeded, "deadline exceeded"))
                    }
                    CancelCause::Cancelled => Err(e.into()),
                },
            }),
        };
        match *this.deadline {
            Some(d) => deadline::scope(d, poll),
            None => poll(),
        }
    }
}

/// A retried or hedged call's answer: its response, unless the call stopped
/// because the next attempt would start past the deadline, which gRPC
/// reports as `DEADLINE_EXCEEDED` (whatever status the last attempt had).
fn answer<T: Default, E: Error + Send + Sync + 'static>(
    report: Report<Response<T>, E>,
) -> Result<Response<T>, BoxError> {
    match (report.result, report.stop) {
        (Ok(response), Some(StopReason::Deadline)) => Ok(out_of_time(&response, report.attempts)),
        (Ok(response), _) => Ok(response),
        (Err(e), _) => call_error(e),
    }
}

/// `DEADLINE_EXCEEDED` for a call that gave up on `last` (a Trailers-Only
/// failure) because its deadline would pass before the next attempt.
#[cold]
fn out_of_time<T: Default>(last: &Response<T>, attempts: u32) -> Response<T> {
    let code = crate::head_status(last.headers()).unwrap_or(Code::Unknown);
    let message = format!(
        "deadline exceeded: no time for another attempt after {attempts} (the last ended {code})"
    );
    status_response(Code::DeadlineExceeded, &message)
}

/// A call that ran out of time is `DEADLINE_EXCEEDED`, as gRPC reports it;
/// any other failure is the error itself.
fn call_error<T: Default, E: Error + Send + Sync + 'static>(
    e: RetryError<E>,
) -> Result<Response<T>, BoxError> {
    match e.reason() {
        StopReason::Deadline => Ok(status_response(Code::DeadlineExceeded, &e.to_string())),
        _ => Err(Box::new(e)),
    }
}

/// A Trailers-Only response with `code`.
fn status_response<T: Default>(code: Code, message: &str) -> Response<T> {
    let mut response = Response::new(T::default());
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    headers.insert(
        "grpc-status",
        http::HeaderValue::from(u16::from(code.number())),
    );
    // grpc-message is percent-encoded; keep to what needs no encoding.
    let message: String = message
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || " .,:-_()".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if let Ok(v) = http::HeaderValue::from_str(&message) {
        headers.insert("grpc-message", v);
    }
    response
}
