use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Context;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use steadfast::clock::VirtualClock;
use steadfast::limit::{Aimd, ConcurrencyLimit, Signal};
use tower::{Layer, Service, ServiceExt, service_fn};

use super::{ShedLayer, signal_of};

/// An AIMD limit of 2 that closes a window on every sample, so each
/// finished slot shows what it said: a success with its one slot in use
/// grows it to 3, a drop shrinks it to 1, an ignored slot leaves it at 2.
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

/// What `probe()` is after one slot said `signal`.
fn after(signal: Signal) -> u32 {
    match signal {
        Signal::Success => 3,
        Signal::Dropped => 1,
        Signal::Ignored => 2,
    }
}

/// A handler answering the status in the request's `x-status` header
/// (default 200) with a one-byte body, counting its calls.
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
        let status = request
            .headers()
            .get("x-status")
            .and_then(|v| v.to_str().ok()?.parse::<u16>().ok())
            .unwrap_or(200);
        async move {
            let mut response = Response::new(Full::new(Bytes::from_static(b"x")));
            *response.status_mut() = StatusCode::from_u16(status).expect("valid status");
            Ok(response)
        }
    })
}

fn with_status(status: u16) -> Request<()> {
    Request::get("/")
        .header("x-status", status)
        .body(())
        .expect("valid request")
}

#[test]
fn what_each_status_tells_the_limit() {
    for status in 100..600_u16 {
        let expected = match status {
            503 | 504 => Signal::Dropped,
            500..=599 => Signal::Ignored,
            _ => Signal::Success,
        };
        let status = StatusCode::from_u16(status).expect("valid status");
        assert_eq!(signal_of(status), expected, "{status}");
    }
}

#[tokio::test]
async fn a_sent_body_gives_its_slot_back_with_its_status_signal() {
    for status in [200, 204, 302, 404, 429, 500, 502, 503, 504] {
        let limit = probe();
        let service = ShedLayer::new(limit.clone()).layer(handler(Arc::default()));
        let response = service.oneshot(with_status(status)).await.expect("served");
        assert_eq!(response.status().as_u16(), status);
        // Held until the body is read to its end.
        assert_eq!((limit.in_flight(), limit.limit()), (1, 2), "{status}");
        let body = response.into_body().collect().await.expect("body");
        assert_eq!(&body.to_bytes()[..], b"x");
        let signal = signal_of(StatusCode::from_u16(status).expect("valid"));
        assert_eq!(
            (limit.in_flight(), limit.limit()),
            (0, after(signal)),
            "{status}"
        );
    }
}

#[tokio::test]
async fn an_empty_body_gives_its_slot_back_at_once() {
    let limit = probe();
    let service = ShedLayer::new(limit.clone()).layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
    }));
    let response = service.oneshot(Request::new(())).await.expect("served");
    assert!(!response.body().holds_slot());
    assert_eq!(
        (limit.in_flight(), limit.limit()),
        (0, after(Signal::Success))
    );
}

#[tokio::test]
async fn a_full_limit_sheds_with_503_and_retry_after_without_calling_the_service() {
    let limit = ConcurrencyLimit::fixed(1)
        .name("api")
        .build()
        .expect("limit");
    let calls = Arc::new(AtomicUsize::new(0));
    let layer = ShedLayer::new(limit.clone());
    let service = layer.layer(handler(Arc::clone(&calls)));
    let held = service
        .clone()
        .oneshot(Request::new(()))
        .await
        .expect("served");
    assert_eq!((held.status(), limit.in_flight()), (StatusCode::OK, 1));
    let shed = service
        .clone()
        .oneshot(Request::new(()))
        .await
        .expect("answered");
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shed.headers()[http::header::RETRY_AFTER], "1");
    assert!(shed.body().is_end_stream_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(limit.snapshot().refused, 1);

    // Other values, or none.
    let service = layer
        .clone()
        .retry_after(Duration::from_millis(2001))
        .layer(handler(Arc::default()));
    let shed = service.oneshot(Request::new(())).await.expect("answered");
    assert_eq!(shed.headers()[http::header::RETRY_AFTER], "3");
    let service = layer.no_retry_after().layer(handler(Arc::default()));
    let shed = service.oneshot(Request::new(())).await.expect("answered");
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(!shed.headers().contains_key(http::header::RETRY_AFTER));

    drop(held);
    assert_eq!(limit.in_flight(), 0);
}

#[tokio::test]
async fn a_request_dropped_in_the_service_gives_its_slot_back() {
    let limit = probe();
    let service = ShedLayer::new(limit.clone()).layer(service_fn(|_: Request<()>| {
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
    let service = ShedLayer::new(limit.clone()).layer(handler(Arc::default()));
    let response = service.oneshot(Request::new(())).await.expect("served");
    assert_eq!(limit.in_flight(), 1);
    drop(response);
    assert_eq!(
        (limit.in_flight(), limit.limit()),
        (0, after(Signal::Ignored))
    );

    let limit = probe();
    let service = ShedLayer::new(limit.clone()).layer(service_fn(|_: Request<()>| async {
        let frames = futures::stream::iter([
            Ok(http_body::Frame::data(Bytes::from_static(b"partial"))),
            Err(std::io::Error::other("the stream broke")),
        ]);
        Ok::<_, Infallible>(Response::new(StreamBody::new(frames)))
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
async fn clones_share_one_limit() {
    let limit = ConcurrencyLimit::fixed(3).build().expect("limit");
    let service = ShedLayer::new(limit.clone()).layer(handler(Arc::default()));
    let mut statuses = Vec::new();
    let mut held = Vec::new();
    for _ in 0..10 {
        let response = service
            .clone()
            .oneshot(Request::new(()))
            .await
            .expect("answered");
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
    let service = ShedLayer::new(limit.clone()).layer(handler(Arc::clone(&calls)));
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

trait EmptyBody {
    fn is_end_stream_empty(&self) -> bool;
}

impl<B: http_body::Body> EmptyBody for super::ShedBody<B> {
    fn is_end_stream_empty(&self) -> bool {
        http_body::Body::is_end_stream(self) && http_body::Body::size_hint(self).exact() == Some(0)
    }
}
