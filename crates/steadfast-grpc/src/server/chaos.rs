//! [`ChaosLayer`]: faults a gRPC server injects on purpose, configured or
//! asked for by the request's Envoy fault headers, capped by the
//! configured rates.

use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Request, Response};
use steadfast::chaos::{Chaos, ChaosFuture};
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast_tower::fault_headers;
use tower_layer::Layer;
use tower_service::Service;

use crate::Code;
use crate::trailers_only::{pushback_value, trailers_only};

/// The header asking for an abort with an HTTP status (200..=599), which
/// Envoy prefers to [`ABORT_GRPC_HEADER`] when a request has both: a gRPC
/// server answers it with the gRPC code a client derives from that HTTP
/// status (gRPC's HTTP-to-gRPC mapping: 400 `INTERNAL`, 401
/// `UNAUTHENTICATED`, 403 `PERMISSION_DENIED`, 404 `UNIMPLEMENTED`, 429,
/// 502, 503 and 504 `UNAVAILABLE`, any other `UNKNOWN`).
pub use steadfast_tower::fault_headers::ABORT_HTTP_HEADER;
pub use steadfast_tower::fault_headers::{
    ABORT_PERCENT_HEADER, DEFAULT_MAX_ASKED_DELAY, DELAY_HEADER, DELAY_PERCENT_HEADER,
};

/// The header asking for an abort with this gRPC status code (Envoy's
/// name): a non-negative integer, any `u32` (codes gRPC does not define
/// included, as Envoy allows).
pub const ABORT_GRPC_HEADER: &str = "x-envoy-fault-abort-grpc-request";

/// The `grpc-message` of an injected abort.
const MESSAGE: &str = "fault injected by steadfast chaos";

/// A server-side chaos layer for a tonic server
/// (`tonic::transport::Server::builder().layer(..)`) or any gRPC service
/// over `http`: before a call reaches the service, it may be delayed
/// (slept on the layer's clock) and answered with a Trailers-Only status
/// instead (`UNAVAILABLE` by default, with an optional
/// `grpc-retry-pushback-ms`), as the [`Chaos`] draws it. The service is
/// not called for an aborted call.
///
/// **Asked by the request.** A call may ask for a fault with Envoy's
/// fault headers (gRPC metadata): `x-envoy-fault-abort-grpc-request: 14`
/// (a gRPC status code), `x-envoy-fault-delay-request: 200` (milliseconds,
/// capped by [`max_asked_delay`](Self::max_asked_delay)), and a share of
/// calls in `x-envoy-fault-abort-request-percentage` /
/// `x-envoy-fault-delay-request-percentage` (0..=100; absent means the
/// configured rate). Each is capped by the configured rate of its fault
/// (the chaos's latency rate for a delay, its outcome rate for an abort),
/// so a client can never ask for more faults than the server allows, and
/// none at all of a fault not configured. A header that does not parse is
/// ignored. A call that asks nothing gets the configured faults. The
/// parsing of the shared headers is steadfast-tower's
/// [`fault_headers`](steadfast_tower::fault_headers), as the HTTP
/// server's layer reads them.
///
/// **Off unless turned on**, as every [`Chaos`] is.
///
/// ```no_run
/// use std::time::Duration;
/// use steadfast::chaos::Chaos;
/// use steadfast_grpc::Code;
/// use steadfast_grpc::server::ChaosLayer;
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// let chaos = Chaos::builder()
///     .enabled(std::env::var_os("CHAOS").is_some()) // off unless asked
///     .latency(0.1, Duration::from_millis(200))
///     .outcome(0.05, || ())
///     .build()?;
/// let layer = ChaosLayer::new(chaos)
///     .code(Code::ResourceExhausted)
///     .pushback(Duration::from_millis(100));
/// // tonic::transport::Server::builder().layer(layer).add_service(..).serve(..)
/// # let _ = layer;
/// # Ok(()) }
/// ```
pub struct ChaosLayer<C = DefaultClock> {
    chaos: Chaos,
    code: Code,
    pushback: Option<HeaderValue>,
    max_asked_delay: Duration,
    clock: C,
}

impl<C: Clone> Clone for ChaosLayer<C> {
    fn clone(&self) -> Self {
        Self {
            chaos: self.chaos.clone(),
            code: self.code,
            pushback: self.pushback.clone(),
            max_asked_delay: self.max_asked_delay,
            clock: self.clock.clone(),
        }
    }
}

impl<C> fmt::Debug for ChaosLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosLayer")
            .field("chaos", &self.chaos)
            .field("code", &self.code)
            .field("pushback", &self.pushback)
            .field("max_asked_delay", &self.max_asked_delay)
            .finish_non_exhaustive()
    }
}

impl ChaosLayer {
    /// A layer injecting `chaos`'s faults: its latency, and its outcome as
    /// a Trailers-Only `UNAVAILABLE` (an error fault is answered the same).
    #[must_use]
    pub fn new(chaos: Chaos) -> Self {
        Self {
            chaos,
            code: Code::Unavailable,
            pushback: None,
            max_asked_delay: DEFAULT_MAX_ASKED_DELAY,
            clock: DefaultClock::default(),
        }
    }
}

impl<C> ChaosLayer<C> {
    /// The code of an injected abort the call did not choose.
    #[must_use]
    pub fn code(mut self, code: Code) -> Self {
        self.code = code;
        self
    }

    /// A `grpc-retry-pushback-ms` (whole milliseconds, rounded up) on every
    /// injected abort.
    #[must_use]
    pub fn pushback(mut self, wait: Duration) -> Self {
        self.pushback = Some(pushback_value(wait));
        self
    }

    /// The longest delay a call's header may ask for (10 s by default).
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
            code: self.code,
            pushback: self.pushback,
            max_asked_delay: self.max_asked_delay,
            clock,
        }
    }

    /// The chaos it injects.
    #[must_use]
    pub fn chaos(&self) -> &Chaos {
        &self.chaos
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

/// A gRPC service under a server [`ChaosLayer`].
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

/// The gRPC status an abort asked by `headers` would carry, if one is
/// asked: [`ABORT_HTTP_HEADER`] (200..=599, mapped to its gRPC code) when
/// present and valid, else [`ABORT_GRPC_HEADER`] (any `u32`). Garbage is
/// ignored.
///
/// ```
/// use steadfast_grpc::server::{ABORT_GRPC_HEADER, ABORT_HTTP_HEADER, asked_abort};
/// let mut headers = http::HeaderMap::new();
/// assert_eq!(asked_abort(&headers), None);
/// headers.insert(ABORT_GRPC_HEADER, "8".parse()?);
/// assert_eq!(asked_abort(&headers), Some(8));
/// headers.insert(ABORT_HTTP_HEADER, "503".parse()?); // Envoy prefers it
/// assert_eq!(asked_abort(&headers), Some(14));
/// headers.insert(ABORT_HTTP_HEADER, "99".parse()?); // out of range: ignored
/// assert_eq!(asked_abort(&headers), Some(8));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub fn asked_abort(headers: &HeaderMap) -> Option<u32> {
    match fault_headers::abort_status(headers) {
        Some(status) => Some(u32::from(grpc_code_of_http(status).number())),
        None => fault_headers::number(headers, ABORT_GRPC_HEADER)
            .and_then(|code| u32::try_from(code).ok()),
    }
}

/// The gRPC code a client derives from an HTTP status with no
/// `grpc-status` (gRPC's "HTTP to gRPC status code mapping").
fn grpc_code_of_http(status: u16) -> Code {
    match status {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502..=504 => Code::Unavailable,
        _ => Code::Unknown,
    }
}

/// The future of a call under a server [`ChaosLayer`].
pub type ChaosResponse<F, Sl, RB, E> = ChaosFuture<F, Sl, Response<RB>, E>;

impl<S, B, RB, C> Service<Request<B>> for ChaosService<S, C>
where
    S: Service<Request<B>, Response = Response<RB>>,
    RB: Default,
    C: AsyncClock,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = ChaosResponse<S::Future, C::Sleep, RB, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let layer = &self.layer;
        let drawn = if layer.chaos.is_on() {
            let code = asked_abort(request.headers());
            let asked =
                fault_headers::asked(request.headers(), layer.max_asked_delay, code.is_some());
            layer.chaos.draw_asked(&asked).map(|i| (i, code))
        } else {
            None
        };
        let inner = &mut self.inner;
        let Some((injection, code)) = drawn else {
            return ChaosFuture::passing(inner.call(request));
        };
        let answer = injection.fault.map(|_| {
            let code = code.unwrap_or_else(|| u32::from(layer.code.number()));
            Ok(trailers_only(code, MESSAGE, layer.pushback.as_ref()))
        });
        ChaosFuture::new(injection, &layer.clock, answer, || inner.call(request))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use steadfast::clock::VirtualClock;
    use tower::{ServiceExt, service_fn};

    use super::*;

    /// An OK handler counting its calls.
    fn handler(
        calls: &Arc<AtomicU32>,
    ) -> impl Service<
        Request<()>,
        Response = Response<()>,
        Error = std::convert::Infallible,
        Future = std::future::Ready<Result<Response<()>, std::convert::Infallible>>,
    > + Clone {
        let calls = calls.clone();
        service_fn(move |_: Request<()>| {
            calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(trailers_only(0, "", None)))
        })
    }

    fn request(headers: &[(&'static str, &str)]) -> Request<()> {
        let mut request = Request::new(());
        for (name, value) in headers {
            if let Ok(v) = HeaderValue::from_str(value) {
                request.headers_mut().insert(*name, v);
            }
        }
        request
    }

    fn status(response: &Response<()>) -> Option<&str> {
        response
            .headers()
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
    }

    async fn aborted(
        layer: &ChaosLayer<VirtualClock>,
        headers: &[(&'static str, &str)],
        n: u32,
    ) -> u32 {
        let calls = Arc::new(AtomicU32::new(0));
        let service = layer.layer(handler(&calls));
        let mut aborted = 0;
        for _ in 0..n {
            let response = service
                .clone()
                .oneshot(request(headers))
                .await
                .expect("infallible");
            if status(&response) != Some("0") {
                aborted += 1;
            }
        }
        assert_eq!(
            aborted + calls.load(Ordering::SeqCst),
            n,
            "an aborted call is never served"
        );
        aborted
    }

    fn chaos(outcome: f64, latency: Option<f64>) -> Chaos {
        let mut builder = Chaos::builder()
            .enabled(true)
            .seed(11)
            .outcome(outcome, || ());
        if let Some(rate) = latency {
            builder = builder.latency(rate, Duration::from_millis(40));
        }
        builder.build().expect("valid chaos")
    }

    #[tokio::test]
    async fn a_header_asked_abort_answers_that_code_and_a_share_above_the_ceiling_is_capped() {
        let clock = VirtualClock::new();
        let layer = ChaosLayer::new(chaos(0.5, None)).clock(clock.clone());
        // Asked at 100 %: capped at the configured 50 %. 2,000 seeded calls:
        // the binomial's sd is ~22, so 900..1100 is ~4.5 sd either side.
        let asked = [(ABORT_GRPC_HEADER, "5"), (ABORT_PERCENT_HEADER, "100")];
        let n = aborted(&layer, &asked, 2_000).await;
        assert!((900..1_100).contains(&n), "{n} of 2000 aborted");
        // The asked code is the answer's.
        let layer = ChaosLayer::new(chaos(1.0, None)).clock(clock.clone());
        let calls = Arc::new(AtomicU32::new(0));
        let response = layer
            .layer(handler(&calls))
            .oneshot(request(&asked))
            .await
            .expect("infallible");
        assert_eq!(status(&response), Some("5"));
        assert_eq!(response.headers()["grpc-message"], MESSAGE);
        // A share asked below the ceiling is the share.
        let asked = [(ABORT_GRPC_HEADER, "5"), (ABORT_PERCENT_HEADER, "20")];
        let n = aborted(&layer, &asked, 2_000).await;
        assert!((320..480).contains(&n), "{n} of 2000 aborted at 20 %");
        assert_eq!(
            clock.elapsed(),
            Duration::ZERO,
            "no latency configured, none asked"
        );
    }

    #[tokio::test]
    async fn an_abort_not_configured_is_never_injected_and_garbage_is_ignored() {
        let clock = VirtualClock::new();
        // No outcome configured: an asked abort has a ceiling of 0.
        let layer = ChaosLayer::new(chaos(0.0, None)).clock(clock.clone());
        let asked = [(ABORT_GRPC_HEADER, "14"), (ABORT_PERCENT_HEADER, "100")];
        assert_eq!(aborted(&layer, &asked, 200).await, 0);
        // Garbage: the abort is not asked, the configured (nothing) stands.
        let layer = ChaosLayer::new(chaos(1.0, Some(1.0)))
            .code(Code::ResourceExhausted)
            .pushback(Duration::from_millis(30))
            .clock(clock.clone());
        let calls = Arc::new(AtomicU32::new(0));
        let garbage = [
            (ABORT_GRPC_HEADER, "fourteen"),
            (ABORT_PERCENT_HEADER, "-3"),
            (DELAY_HEADER, "1e3"),
            (DELAY_PERCENT_HEADER, "50%"),
            (ABORT_HTTP_HEADER, "600"),
        ];
        let before = clock.elapsed();
        let response = layer
            .layer(handler(&calls))
            .oneshot(request(&garbage))
            .await
            .expect("infallible");
        // Nothing parsed, so the call asked nothing: the configured faults
        // (the layer's code, its pushback, the configured 40 ms latency).
        assert_eq!(status(&response), Some("8"));
        assert_eq!(response.headers()["grpc-retry-pushback-ms"], "30");
        assert_eq!(clock.elapsed() - before, Duration::from_millis(40));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        // A non-UTF-8 header value is garbage too.
        let mut request = Request::new(());
        request.headers_mut().insert(
            ABORT_GRPC_HEADER,
            HeaderValue::from_bytes(b"\xff\xfe").expect("opaque bytes are a valid value"),
        );
        assert_eq!(asked_abort(request.headers()), None);
    }

    #[tokio::test]
    async fn an_asked_delay_is_capped_and_slept_on_the_layer_clock() {
        let clock = VirtualClock::new();
        let layer = ChaosLayer::new(chaos(0.0, Some(1.0)))
            .max_asked_delay(Duration::from_millis(500))
            .clock(clock.clone());
        let calls = Arc::new(AtomicU32::new(0));
        let service = layer.layer(handler(&calls));
        let response = service
            .clone()
            .oneshot(request(&[(DELAY_HEADER, "120")]))
            .await
            .expect("infallible");
        assert_eq!(status(&response), Some("0"));
        assert_eq!(clock.elapsed(), Duration::from_millis(120));
        let response = service
            .oneshot(request(&[(DELAY_HEADER, "3600000")]))
            .await
            .expect("infallible");
        assert_eq!(status(&response), Some("0"));
        assert_eq!(
            clock.elapsed(),
            Duration::from_millis(620),
            "capped at 500 ms"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn chaos_off_means_off() {
        let clock = VirtualClock::new();
        let chaos = chaos(1.0, Some(1.0));
        chaos.switch().turn_off();
        let layer = ChaosLayer::new(chaos.clone()).clock(clock.clone());
        let asked = [
            (ABORT_GRPC_HEADER, "14"),
            (ABORT_PERCENT_HEADER, "100"),
            (DELAY_HEADER, "100"),
        ];
        assert_eq!(aborted(&layer, &asked, 50).await, 0);
        assert_eq!(clock.elapsed(), Duration::ZERO);
        assert_eq!(chaos.stats().drawn, 0);
    }

    #[test]
    fn http_statuses_map_to_the_codes_a_client_derives() {
        let code = |s| grpc_code_of_http(s);
        assert_eq!(code(400), Code::Internal);
        assert_eq!(code(401), Code::Unauthenticated);
        assert_eq!(code(403), Code::PermissionDenied);
        assert_eq!(code(404), Code::Unimplemented);
        for s in [429, 502, 503, 504] {
            assert_eq!(code(s), Code::Unavailable);
        }
        assert_eq!(code(500), Code::Unknown);
        assert_eq!(code(200), Code::Unknown);
    }
}
