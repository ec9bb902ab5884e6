//! The protocol-free machinery, under a test protocol: a refusal is a 503
//! naming the limit, a head's `x-signal` header (or a trailer of that
//! name) says what the response tells the limit.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Context;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, response::Parts};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use steadfast::clock::VirtualClock;
use steadfast::limit::{Aimd, ConcurrencyLimit, LimitRefused, Signal};
use tower::{Layer, Service, ServiceExt, service_fn};

use super::{ShedLayer, Shedding};

#[derive(Clone, Debug)]
struct Probe;

fn signal_in(headers: &HeaderMap) -> Option<Signal> {
    match headers.get("x-signal")?.to_str().ok()? {
        "success" => Some(Signal::Success),
        "dropped" => Some(Signal::Dropped),
        "ignored" => Some(Signal::Ignored),
        _ => None,
    }
}

impl Shedding for Probe {
    fn refused(&self, refused: &LimitRefused) -> Response<()> {
        let mut response = Response::new(());
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        let by = HeaderValue::from_str(refused.by).expect("a header value");
        response.headers_mut().insert("x-shed-by", by);
        response
    }

    fn on_head(&self, head: &Parts) -> Option<Signal> {
        signal_in(&head.headers)
    }

    fn on_trailers(&self, trailers: &HeaderMap) -> Option<Signal> {
        signal_in(trailers)
    }
}

/// An AIMD limit of 2 that closes a window on every sample: a success with
/// its one slot in use grows it to 3, a drop shrinks it to 1, an ignored
/// slot leaves it at 2.
fn probe() -> ConcurrencyLimit {
    let aimd = Aimd::builder()
        .initial_limit(2)
        .min_limit(1)
        .build()
        .expect("valid aimd");
    ConcurrencyLimit::adaptive(aimd)
        .window(Duration::ZERO, 1)
        .min_rtt(Duration::ZERO)
        .build_with_clock(VirtualClock::manual())
        .expect("valid limit")
}

fn after(signal: Signal) -> u32 {
    match signal {
        Signal::Success => 3,
        Signal::Dropped => 1,
        Signal::Ignored => 2,
    }
}

fn signal_headers(signal: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("x-signal", HeaderValue::from_static(signal));
    headers
}

/// A handler answering a one-byte body with the request's `x-signal` in
/// its head, counting its calls.
fn handler(
    calls: Arc<AtomicUsize>,
) -> impl Service<
    Request<()>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Full<Bytes>>, Infallible>>,
> + Clone {
    service_fn(move |request: Request<()>| {
        calls.fetch_add(1, Ordering::SeqCst);
        let signal = request.headers().get("x-signal").cloned();
        async move {
            let mut response = Response::new(Full::new(Bytes::from_static(b"x")));
            if let Some(signal) = signal {
                response.headers_mut().insert("x-signal", signal);
            }
            Ok(response)
        }
    })
}

fn saying(signal: &'static str) -> Request<()> {
    let mut request = Request::new(());
    *request.headers_mut() = signal_headers(signal);
    request
}

#[tokio::test]
async fn a_sent_body_gives_its_slot_back_with_its_heads_signal() {
    for (name, signal) in [
        ("success", Signal::Success),
        ("dropped", Signal::Dropped),
        ("ignored", Signal::Ignored),
        ("nothing", Signal::Ignored),
    ] {
        let limit = probe();
        let service = ShedLayer::new(limit.clone(), Probe).layer(handler(Arc::default()));
        let response = service.oneshot(saying(name)).await.expect("served");
        assert!(response.body().holds_slot());
        assert_eq!((limit.in_flight(), limit.limit()), (1, 2), "{name}");
        let body = response.into_body().collect().await.expect("body");
        assert_eq!(&body.to_bytes()[..], b"x");
        assert_eq!(
            (limit.in_flight(), limit.limit()),
            (0, after(signal)),
            "{name}"
        );
    }
}

#[tokio::test]
async fn an_empty_body_gives_its_slot_back_at_once() {
    let limit = probe();
    let service = ShedLayer::new(limit.clone(), Probe).layer(service_fn(|_: Request<()>| async {
        let mut response = Response::new(Empty::<Bytes>::new());
        *response.headers_mut() = signal_headers("dropped");
        Ok::<_, Infallible>(response)
    }));
    let response = service.oneshot(Request::new(())).await.expect("served");
    assert!(!response.body().holds_slot());
    assert_eq!(
        (limit.in_flight(), limit.limit()),
        (0, after(Signal::Dropped))
    );
}

#[tokio::test]
async fn trailers_override_the_heads_signal() {
    for (trailer, signal) in [
        (Some("dropped"), Signal::Dropped),
        (Some("ignored"), Signal::Ignored),
        (None, Signal::Success),
    ] {
        let limit = probe();
        let service = ShedLayer::new(limit.clone(), Probe).layer(service_fn(
            move |_: Request<()>| async move {
                let mut frames = vec![Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"x")))];
                frames.push(Ok(Frame::trailers(
                    trailer.map_or_else(HeaderMap::new, signal_headers),
                )));
                let mut response = Response::new(StreamBody::new(futures::stream::iter(frames)));
                *response.headers_mut() = signal_headers("success");
                Ok::<_, Infallible>(response)
            },
        ));
        let response = service.oneshot(Request::new(())).await.expect("served");
        let mut body = pin!(response.into_body());
        assert!(
            body.frame()
                .await
                .expect("a frame")
                .expect("data")
                .is_data()
        );
        assert_eq!(limit.in_flight(), 1, "held until the trailers");
        let trailers = body.frame().await.expect("a frame").expect("trailers");
        assert!(trailers.is_trailers());
        assert_eq!(
            (limit.in_flight(), limit.limit()),
            (0, after(signal)),
            "{trailer:?}"
        );
    }
}

#[tokio::test]
async fn a_full_limit_answers_the_protocols_refusal_without_calling_the_service() {
    let limit = ConcurrencyLimit::fixed(1)
        .name("api")
        .build()
        .expect("limit");
    let calls = Arc::new(AtomicUsize::new(0));
    let service = ShedLayer::new(limit.clone(), Probe).layer(handler(Arc::clone(&calls)));
    let held = service
        .clone()
        .oneshot(Request::new(()))
        .await
        .expect("served");
    let shed = service.oneshot(Request::new(())).await.expect("answered");
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.headers()["x-shed-by"], "api");
    assert!(shed.body().is_end_stream());
    assert_eq!(shed.body().size_hint().exact(), Some(0));
    assert!(!shed.body().holds_slot());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(limit.snapshot().refused, 1);
    drop(held);
    assert_eq!(limit.in_flight(), 0);
}

#[tokio::test]
async fn a_request_dropped_in_the_service_gives_its_slot_back() {
    let limit = probe();
    let service = ShedLayer::new(limit.clone(), Probe).layer(service_fn(|_: Request<()>| {
        std::future::pending::<Result<Response<Full<Bytes>>, Infallible>>()
    }));
    let mut future = Box::pin(service.oneshot(Request::new(())));
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(future.as_mut().poll(&mut cx).is_pending());
    assert_eq!(limit.in_flight(), 1);
    drop(future);
    // Back, and as nothing: a cancelled request is no sample.
    assert_eq!(
        (limit.in_flight(), limit.limit()),
        (0, after(Signal::Ignored))
    );
}

#[tokio::test]
async fn a_body_dropped_unfinished_or_failing_gives_its_slot_back_as_nothing() {
    let limit = probe();
    let service = ShedLayer::new(limit.clone(), Probe).layer(handler(Arc::default()));
    let response = service.oneshot(saying("dropped")).await.expect("served");
    assert_eq!(limit.in_flight(), 1);
    drop(response);
    assert_eq!(
        (limit.in_flight(), limit.limit()),
        (0, after(Signal::Ignored))
    );

    let limit = probe();
    let service = ShedLayer::new(limit.clone(), Probe).layer(service_fn(|_: Request<()>| async {
        let frames = futures::stream::iter([
            Ok(Frame::data(Bytes::from_static(b"partial"))),
            Err(std::io::Error::other("the stream broke")),
        ]);
        let mut response = Response::new(StreamBody::new(frames));
        *response.headers_mut() = signal_headers("success");
        Ok::<_, Infallible>(response)
    }));
    let response = service.oneshot(Request::new(())).await.expect("served");
    let mut body = pin!(response.into_body());
    let first = body.frame().await.expect("a frame").expect("data");
    assert_eq!(first.into_data().ok().as_deref(), Some(&b"partial"[..]));
    assert_eq!(limit.in_flight(), 1);
    assert!(body.frame().await.expect("a frame").is_err());
    assert_eq!(
        (limit.in_flight(), limit.limit()),
        (0, after(Signal::Ignored))
    );
}

#[tokio::test]
async fn an_error_of_the_service_gives_its_slot_back_as_nothing() {
    let limit = probe();
    let service = ShedLayer::new(limit.clone(), Probe).layer(service_fn(|_: Request<()>| async {
        Err::<Response<Full<Bytes>>, _>(std::io::Error::other("refused"))
    }));
    assert!(service.oneshot(Request::new(())).await.is_err());
    assert_eq!(
        (limit.in_flight(), limit.limit()),
        (0, after(Signal::Ignored))
    );
}

#[tokio::test]
async fn clones_share_one_limit() {
    let limit = ConcurrencyLimit::fixed(3).build().expect("limit");
    let layer = ShedLayer::new(limit.clone(), Probe);
    let service = layer.layer(handler(Arc::default()));
    let mut statuses = Vec::new();
    let mut held = Vec::new();
    for n in 0..10 {
        // Clones of the service, and services of clones of the layer.
        let service = if n % 2 == 0 {
            service.clone()
        } else {
            layer.clone().layer(handler(Arc::default()))
        };
        let response = service.oneshot(Request::new(())).await.expect("answered");
        statuses.push(response.status().as_u16());
        held.push(response);
    }
    assert_eq!(statuses, [200, 200, 200, 503, 503, 503, 503, 503, 503, 503]);
    assert_eq!(limit.in_flight(), 3);
    drop(held);
    assert_eq!(limit.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_queue_waits_for_a_slot_up_to_its_max_wait() {
    let limit = ConcurrencyLimit::fixed(1)
        .queue(4, Duration::from_millis(50))
        .build()
        .expect("limit");
    let calls = Arc::new(AtomicUsize::new(0));
    let service = ShedLayer::new(limit.clone(), Probe).layer(handler(Arc::clone(&calls)));
    let first = service
        .clone()
        .oneshot(Request::new(()))
        .await
        .expect("served");
    // The second waits; the first's body is read 20 ms later, its slot
    // handed over.
    let second = tokio::spawn(service.clone().oneshot(Request::new(())));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(
        (limit.snapshot().queued, calls.load(Ordering::SeqCst)),
        (1, 1)
    );
    let _ = first.into_body().collect().await.expect("body");
    let second = second.await.expect("joined").expect("served");
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!((limit.in_flight(), calls.load(Ordering::SeqCst)), (1, 2));

    // The third waits its 50 ms for a slot that does not come: shed.
    let started = tokio::time::Instant::now();
    let third = service
        .clone()
        .oneshot(Request::new(()))
        .await
        .expect("answered");
    assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    assert_eq!(
        (limit.snapshot().queued, calls.load(Ordering::SeqCst)),
        (0, 2)
    );
    assert_eq!(limit.snapshot().refused, 1);

    // A request dropped while it waits leaves the queue.
    let mut waiting = Box::pin(service.oneshot(Request::new(())));
    let waker = futures::task::noop_waker();
    assert!(
        waiting
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
    assert_eq!(limit.snapshot().queued, 1);
    drop(waiting);
    assert_eq!(limit.snapshot().queued, 0);
    drop(second);
    assert_eq!(limit.in_flight(), 0);
}

/// Outside a tokio runtime, tokio's clock cannot sleep: a full limit
/// refuses at once instead of queueing.
#[test]
fn a_clock_that_cannot_sleep_does_not_queue() {
    let limit = ConcurrencyLimit::fixed(1)
        .queue(4, Duration::from_secs(60))
        .build()
        .expect("limit");
    let service = ShedLayer::new(limit.clone(), Probe)
        .clock(steadfast::clock::TokioClock)
        .layer(handler(Arc::default()));
    futures::executor::block_on(async {
        let held = service
            .clone()
            .oneshot(Request::new(()))
            .await
            .expect("served");
        let shed = service.oneshot(Request::new(())).await.expect("answered");
        assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(limit.snapshot().queued, 0);
        drop(held);
    });
    assert_eq!(limit.in_flight(), 0);
}
