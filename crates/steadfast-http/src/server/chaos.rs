//! [`ChaosLayer`]: faults injected by an axum or hyper server on purpose,
//! configured or asked for by the request's Envoy-style fault headers,
//! capped by the configured rates.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use steadfast::chaos::{Asked, Chaos, ChaosFuture};
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast_tower::body::OptionBody;
use steadfast_tower::fault_headers;
use tower_layer::Layer;
use tower_service::Service;

pub use steadfast_tower::fault_headers::{
    ABORT_HTTP_HEADER as ABORT_HEADER, ABORT_PERCENT_HEADER, DEFAULT_MAX_ASKED_DELAY, DELAY_HEADER,
    DELAY_PERCENT_HEADER,
};

/// A server-side chaos layer: before a request reaches the service, it
/// may be delayed (slept on the layer's clock) and answered with an
/// injected status instead (503 by default, with an optional
/// `Retry-After`), as the [`Chaos`] draws it.
///
/// **Asked by the request.** A request may ask for a fault with Envoy's
/// fault headers: `x-envoy-fault-abort-request: 429` (a status, 200..=599),
/// `x-envoy-fault-delay-request: 200` (milliseconds, capped by
/// [`max_asked_delay`](Self::max_asked_delay)), and a share of requests in
/// `x-envoy-fault-abort-request-percentage` / `...-delay-request-percentage`
/// (0..=100; absent means the configured rate). Each is capped by the
/// configured rate of its fault (the chaos's latency rate for a delay, its
/// outcome rate for an abort), so a client can never ask for more faults
/// than the server allows, and none at all of a fault not configured. A
/// header that does not parse is ignored. A request that asks nothing gets
/// the configured faults.
///
/// **Off unless turned on**, as every [`Chaos`] is.
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::get};
/// use steadfast::chaos::Chaos;
/// use steadfast_http::server::ChaosLayer;
///
/// let chaos = Chaos::builder()
///     .enabled(std::env::var_os("CHAOS").is_some()) // off unless asked
///     .latency(0.1, Duration::from_millis(200))
///     .outcome(0.05, || ())
///     .build()?;
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(ChaosLayer::new(chaos).retry_after(Duration::from_secs(1)));
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub struct ChaosLayer<C = DefaultClock> {
    chaos: Chaos,
    status: StatusCode,
    retry_after: Option<HeaderValue>,
    max_asked_delay: Duration,
    clock: C,
}

impl<C: Clone> Clone for ChaosLayer<C> {
    fn clone(&self) -> Self {
        Self {
            chaos: self.chaos.clone(),
            status: self.status,
            retry_after: self.retry_after.clone(),
            max_asked_delay: self.max_asked_delay,
            clock: self.clock.clone(),
        }
    }
}

impl<C> fmt::Debug for ChaosLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosLayer")
            .field("chaos", &self.chaos)
            .field("status", &self.status)
            .field("retry_after", &self.retry_after)
            .field("max_asked_delay", &self.max_asked_delay)
            .finish_non_exhaustive()
    }
}

impl ChaosLayer {
    /// A layer injecting `chaos`'s faults: its latency, and its outcome as
    /// a `503 Service Unavailable` (an error fault is answered the same).
    #[must_use]
    pub fn new(chaos: Chaos) -> Self {
        Self {
            chaos,
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: None,
            max_asked_delay: DEFAULT_MAX_ASKED_DELAY,
            clock: DefaultClock::default(),
        }
    }
}

impl<C> ChaosLayer<C> {
    /// The status of an injected answer the request did not choose.
    #[must_use]
    pub fn status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// A `Retry-After` (whole seconds, rounded up) on every injected answer.
    #[must_use]
    pub fn retry_after(mut self, wait: Duration) -> Self {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        self.retry_after = Some(HeaderValue::from(secs));
        self
    }

    /// The longest delay a request's header may ask for (10 s by default).
    #[must_use]
    pub fn max_asked_delay(mut self, max: Duration) -> Self {
        self.max_asked_delay = max;
        self
    }

    /// Sleeps the delays on `clock`.
    #[must_use]
    pub fn clock<C2: AsyncClock>(self, clock: C2) -> ChaosLayer<C2> {
        ChaosLayer {
            chaos: self.chaos,
            status: self.status,
            retry_after: self.retry_after,
            max_asked_delay: self.max_asked_delay,
            clock,
        }
    }
}

impl<S, C: Clone> Layer<S> for ChaosLayer<C> {
    type Service = ChaosService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ChaosService {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service under a server [`ChaosLayer`].
pub struct ChaosService<S, C = DefaultClock> {
    inner: S,
    layer: ChaosLayer<C>,
}

impl<S: Clone, C: Clone> Clone for ChaosService<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S, C> fmt::Debug for ChaosService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosService")
            .field("layer", &self.layer)
            .finish_non_exhaustive()
    }
}

/// The faults `headers` ask for, within `max_delay` (steadfast-tower's
/// [`fault_headers::asked`], read for every protocol), and the HTTP status
/// of an asked abort (200..=599); garbage is ignored.
#[must_use]
pub fn asked_faults(headers: &HeaderMap, max_delay: Duration) -> (Asked, Option<StatusCode>) {
    let status = fault_headers::abort_status(headers).and_then(|s| StatusCode::from_u16(s).ok());
    (
        fault_headers::asked(headers, max_delay, status.is_some()),
        status,
    )
}

/// The future of a request under a server [`ChaosLayer`].
pub type ChaosResponse<F, Sl, RB, E> =
    ChaosFuture<WithChaosBody<F>, Sl, Response<ChaosBody<RB>>, E>;

impl<S, B, RB, C> Service<Request<B>> for ChaosService<S, C>
where
    S: Service<Request<B>, Response = Response<RB>>,
    C: AsyncClock,
{
    type Response = Response<ChaosBody<RB>>;
    type Error = S::Error;
    type Future = ChaosResponse<S::Future, C::Sleep, RB, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let layer = &self.layer;
        let drawn = if layer.chaos.is_on() {
            let (asked, status) = asked_faults(request.headers(), layer.max_asked_delay);
            layer.chaos.draw_asked(&asked).map(|i| (i, status))
        } else {
            None
        };
        let inner = &mut self.inner;
        let Some((injection, status)) = drawn else {
            return ChaosFuture::passing(WithChaosBody {
                inner: inner.call(request),
            });
        };
        let answer = injection.fault.map(|_| {
            let mut response = Response::new(OptionBody::empty());
            *response.status_mut() = status.unwrap_or(layer.status);
            if let Some(value) = &layer.retry_after {
                response
                    .headers_mut()
                    .insert(http::header::RETRY_AFTER, value.clone());
            }
            Ok(response)
        });
        ChaosFuture::new(injection, &layer.clock, answer, || WithChaosBody {
            inner: inner.call(request),
        })
    }
}

pin_project! {
    /// The service's response future, its body wrapped in a [`ChaosBody`].
    #[derive(Debug)]
    pub struct WithChaosBody<F> {
        #[pin]
        inner: F,
    }
}

impl<F, RB, E> std::future::Future for WithChaosBody<F>
where
    F: std::future::Future<Output = Result<Response<RB>, E>>,
{
    type Output = Result<Response<ChaosBody<RB>>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project()
            .inner
            .poll(cx)
            .map(|r| r.map(|response| response.map(OptionBody::new)))
    }
}

/// A response body under a server [`ChaosLayer`]: the service's, or the
/// empty body of an injected answer (`steadfast-tower`'s [`OptionBody`],
/// which the shedding layer's body is built on too).
pub type ChaosBody<B> = OptionBody<B>;
