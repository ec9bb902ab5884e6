use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
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

// Dropped requests and bodies, failing bodies, the queue and clones
// sharing one limit are steadfast-tower's shed tests.

trait EmptyBody {
    fn is_end_stream_empty(&self) -> bool;
}

impl<B: http_body::Body> EmptyBody for super::ShedBody<B> {
    fn is_end_stream_empty(&self) -> bool {
        http_body::Body::is_end_stream(self) && http_body::Body::size_hint(self).exact() == Some(0)
    }
}
