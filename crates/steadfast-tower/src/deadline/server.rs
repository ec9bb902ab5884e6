use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use pin_project_lite::pin_project;
use steadfast::clock::{AsyncClock, Clock, DefaultClock};
use steadfast::deadline::{DeadlineExceeded, DeadlineHeader, Timeout};
use steadfast::{Deadline, deadline};
use tower_layer::Layer;
use tower_service::Service;

use super::DeadlineError;

/// What a server answers when a request's deadline passes before its
/// handler does: see [`ServerDeadlineLayer::on_expiry`].
pub trait OnExpiry<Resp, E> {
    /// The service's error type.
    type Error;
    /// The answer once the deadline has passed (the handler was dropped).
    fn expired(&self) -> Result<Resp, Self::Error>;
    /// The handler's own error.
    fn inner(&self, error: E) -> Self::Error;
}

/// The default [`OnExpiry`]: fail with [`DeadlineError::Exceeded`] (map it
/// to a response with your framework's error handling).
#[derive(Debug, Clone, Copy, Default)]
pub struct ErrorOnExpiry;

impl<Resp, E> OnExpiry<Resp, E> for ErrorOnExpiry {
    type Error = DeadlineError<E>;

    fn expired(&self) -> Result<Resp, Self::Error> {
        Err(DeadlineError::Exceeded(DeadlineExceeded::new()))
    }

    fn inner(&self, error: E) -> Self::Error {
        DeadlineError::Inner(error)
    }
}

/// An [`OnExpiry`] that answers with the response its function makes (for
/// example a 504), keeping the handler's error type: what an axum `Router`
/// needs, whose services cannot fail.
#[derive(Clone, Copy)]
pub struct RespondOnExpiry<F>(F);

impl<F> fmt::Debug for RespondOnExpiry<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RespondOnExpiry(..)")
    }
}

impl<Resp, E, F: Fn() -> Resp> OnExpiry<Resp, E> for RespondOnExpiry<F> {
    type Error = E;

    fn expired(&self) -> Result<Resp, E> {
        Ok((self.0)())
    }

    fn inner(&self, error: E) -> E {
        error
    }
}

/// Reads an incoming request's deadline header into the ambient deadline of
/// its handler.
///
/// The header (by default `grpc-timeout`; [`DeadlineHeader::DEFAULT`] is
/// steadfast's `x-steadfast-timeout`) carries the time the client has left.
/// The handler's `call` and future run with `now + that` as the ambient
/// deadline ([`steadfast::deadline::current`]), so every retry, hedge and
/// outgoing call made while handling the request inherits the time left,
/// and a [`SetDeadlineHeaderLayer`](super::SetDeadlineHeaderLayer) sends
/// it on. When the deadline passes first, the handler's future is dropped
/// (work nobody waits for stops) and [`OnExpiry`] answers. A header that
/// does not parse is ignored (a `debug` event says so); `max_timeout`
/// bounds what a client can ask for.
///
/// ```
/// use std::time::Duration;
/// use steadfast_tower::deadline::ServerDeadlineLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let handler = service_fn(|_: http::Request<()>| async {
///     // Deep in the handler, without a parameter: the time the client gave.
///     let left = steadfast::deadline::current().map(|d| d.remaining(tokio::time::Instant::now().into_std()));
///     Ok::<_, std::io::Error>(left)
/// });
/// let server = ServerDeadlineLayer::new().layer(handler);
/// let request = http::Request::get("/").header("grpc-timeout", "150m").body(())?;
/// assert_eq!(server.oneshot(request).await?, Some(Duration::from_millis(150)));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ServerDeadlineLayer<X = ErrorOnExpiry, C = DefaultClock> {
    header: DeadlineHeader,
    max: Option<Duration>,
    on_expiry: X,
    clock: C,
}

impl Default for ServerDeadlineLayer {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerDeadlineLayer {
    /// Reads `grpc-timeout`; fails a call whose deadline passes with
    /// [`DeadlineError::Exceeded`].
    #[must_use]
    pub fn new() -> Self {
        Self {
            header: DeadlineHeader::GRPC,
            max: None,
            on_expiry: ErrorOnExpiry,
            clock: DefaultClock::default(),
        }
    }
}

impl<X, C> ServerDeadlineLayer<X, C> {
    /// Reads `header` instead (name and format).
    #[must_use]
    pub fn header(mut self, header: DeadlineHeader) -> Self {
        self.header = header;
        self
    }

    /// Grants no request more than `max`, whatever its header asks, and
    /// gives requests without a header `max` too.
    #[must_use]
    pub fn max_timeout(mut self, max: Duration) -> Self {
        self.max = Some(max);
        self
    }

    /// Answers an expired request with `respond()` (for example a 504).
    pub fn on_expiry<F>(self, respond: F) -> ServerDeadlineLayer<RespondOnExpiry<F>, C> {
        ServerDeadlineLayer {
            header: self.header,
            max: self.max,
            on_expiry: RespondOnExpiry(respond),
            clock: self.clock,
        }
    }

    /// Reads time and sleeps on `clock`.
    pub fn clock<C2: Clock>(self, clock: C2) -> ServerDeadlineLayer<X, C2> {
        ServerDeadlineLayer {
            header: self.header,
            max: self.max,
            on_expiry: self.on_expiry,
            clock,
        }
    }
}

impl<S, X: Clone, C: Clone> Layer<S> for ServerDeadlineLayer<X, C> {
    type Service = ServerDeadline<S, X, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ServerDeadline {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service a [`ServerDeadlineLayer`] makes.
#[derive(Debug, Clone)]
pub struct ServerDeadline<S, X = ErrorOnExpiry, C = DefaultClock> {
    inner: S,
    layer: ServerDeadlineLayer<X, C>,
}

impl<S, X, C> ServerDeadline<S, X, C> {
    /// The time the request asks for, bounded by `max_timeout`.
    fn timeout<B>(&self, request: &Request<B>) -> Option<Duration> {
        let asked = request
            .headers()
            .get(self.layer.header.name())
            .and_then(|value| match self.layer.header.decode(value.as_bytes()) {
                Ok(left) => Some(left),
                Err(error) => {
                    tracing::debug!(
                        header = self.layer.header.name(),
                        %error,
                        "steadfast: ignoring a deadline header that does not parse"
                    );
                    None
                }
            });
        match (asked, self.layer.max) {
            (Some(asked), Some(max)) => Some(asked.min(max)),
            (asked, max) => asked.or(max),
        }
    }
}

impl<S, X, C, B> Service<Request<B>> for ServerDeadline<S, X, C>
where
    S: Service<Request<B>>,
    X: OnExpiry<S::Response, S::Error> + Clone,
    C: AsyncClock,
{
    type Response = S::Response;
    type Error = X::Error;
    type Future = ServerDeadlineFuture<S::Future, X, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match self.inner.poll_ready(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(self.layer.on_expiry.inner(e))),
            Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let own = self
            .timeout(&request)
            .map(|t| Deadline::after(self.layer.clock.now(), t));
        let on_expiry = self.layer.on_expiry.clone();
        match Deadline::earliest(deadline::current(), own) {
            Some(d) => {
                let call = deadline::scope(d, || self.inner.call(request));
                ServerDeadlineFuture {
                    kind: Kind::Timed {
                        inner: deadline::timeout_at(self.layer.clock.clone(), d, call),
                    },
                    on_expiry,
                }
            }
            None => ServerDeadlineFuture {
                kind: Kind::Unbounded {
                    inner: self.inner.call(request),
                },
                on_expiry,
            },
        }
    }
}

pin_project! {
    /// The future of a [`ServerDeadline`] call.
    #[must_use = "futures do nothing unless polled"]
    pub struct ServerDeadlineFuture<F, X, C: AsyncClock> {
        #[pin]
        kind: Kind<F, C>,
        on_expiry: X,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, C: AsyncClock> {
        // Under the request's deadline.
        Timed { #[pin] inner: Timeout<C, F> },
        // No deadline: the handler as it is.
        Unbounded { #[pin] inner: F },
    }
}

impl<F, X, C: AsyncClock> fmt::Debug for ServerDeadlineFuture<F, X, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Timed { inner } => f.debug_tuple("ServerDeadlineFuture").field(inner).finish(),
            Kind::Unbounded { .. } => f.write_str("ServerDeadlineFuture(no deadline)"),
        }
    }
}

impl<F, X, C, T, E> Future for ServerDeadlineFuture<F, X, C>
where
    F: Future<Output = Result<T, E>>,
    X: OnExpiry<T, E>,
    C: AsyncClock,
{
    type Output = Result<T, X::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let on_expiry = this.on_expiry;
        match this.kind.project() {
            KindProj::Timed { inner } => inner.poll(cx).map(|out| match out {
                Ok(Ok(response)) => Ok(response),
                Ok(Err(e)) => Err(on_expiry.inner(e)),
                Err(_) => on_expiry.expired(),
            }),
            KindProj::Unbounded { inner } => inner
                .poll(cx)
                .map(|out| out.map_err(|e| on_expiry.inner(e))),
        }
    }
}
