use std::convert::Infallible;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, StreamBody};
use steadfast::clock::VirtualClock;
use steadfast::limit::{Aimd, ConcurrencyLimit, Signal};
use tower::{Layer, ServiceExt, service_fn};

use super::{ShedLayer, signal_of};
use crate::Code;

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

fn code(n: u8) -> Code {
    Code::from_i64(i64::from(n)).expect("a code")
}

fn status_headers(code: Code) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("grpc-status", HeaderValue::from(u16::from(code.number())));
    headers
}

type Frames =
    StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// A response that streams one message, then trailers with `code`.
fn streamed(code: Code) -> Response<Frames> {
    let frames = vec![
        Ok(Frame::data(Bytes::from_static(b"\0\0\0\0\x01A"))),
        Ok(Frame::trailers(status_headers(code))),
    ];
    Response::new(StreamBody::new(futures::stream::iter(frames)))
}

#[test]
fn what_each_code_tells_the_limit() {
    use Code::*;
    for n in 0..=16 {
        let c = code(n);
        let expected = match c {
            ResourceExhausted | Unavailable | DeadlineExceeded => Signal::Dropped,
            Cancelled | Unknown | Internal | Unimplemented | DataLoss => Signal::Ignored,
            _ => Signal::Success,
        };
        assert_eq!(signal_of(c), expected, "{c}");
    }
}

#[tokio::test]
async fn a_streamed_response_gives_its_slot_back_at_its_trailers_status() {
    for n in 0..=16 {
        let limit = probe();
        let service =
            ShedLayer::new(limit.clone()).layer(service_fn(move |_: Request<()>| async move {
                Ok::<_, Infallible>(streamed(code(n)))
            }));
        let response = service.oneshot(Request::new(())).await.expect("served");
        assert_eq!((limit.in_flight(), limit.limit()), (1, 2));
        let mut body = pin!(response.into_body());
        let message = body.frame().await.expect("a frame").expect("data");
        assert!(message.is_data());
        assert_eq!(limit.in_flight(), 1, "held until the trailers");
        let trailers = body.frame().await.expect("a frame").expect("trailers");
        assert!(trailers.is_trailers());
        assert_eq!(
            (limit.in_flight(), limit.limit()),
            (0, after(signal_of(code(n)))),
            "{}",
            code(n)
        );
    }
}

#[tokio::test]
async fn a_trailers_only_answer_gives_its_slot_back_at_once_by_its_head() {
    for (n, signal) in [
        (0, Signal::Success),
        (14, Signal::Dropped),
        (13, Signal::Ignored),
    ] {
        let limit = probe();
        let service =
            ShedLayer::new(limit.clone()).layer(service_fn(move |_: Request<()>| async move {
                let mut response = Response::new(Empty::<Bytes>::new());
                *response.headers_mut() = status_headers(code(n));
                Ok::<_, Infallible>(response)
            }));
        let response = service.oneshot(Request::new(())).await.expect("served");
        assert!(!response.body().holds_slot());
        assert_eq!((limit.in_flight(), limit.limit()), (0, after(signal)));
    }
}

#[tokio::test]
async fn a_full_limit_answers_trailers_only_resource_exhausted_without_calling_the_service() {
    let limit = ConcurrencyLimit::fixed(1)
        .name("echo 100%")
        .build()
        .expect("limit");
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let handler = service_fn(move |_: Request<()>| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, Infallible>(streamed(Code::Ok)) }
    });
    let layer = ShedLayer::new(limit.clone());
    let held = layer
        .layer(handler.clone())
        .oneshot(Request::new(()))
        .await
        .expect("served");
    let shed = layer
        .layer(handler.clone())
        .oneshot(Request::new(()))
        .await
        .expect("answered");
    assert_eq!(shed.status(), http::StatusCode::OK);
    let headers = shed.headers();
    assert_eq!(headers["content-type"], "application/grpc");
    assert_eq!(headers["grpc-status"], "8");
    assert_eq!(
        headers["grpc-message"],
        "concurrency limit echo 100%25 full: 1 in flight, limit 1"
    );
    assert!(!headers.contains_key("grpc-retry-pushback-ms"));
    assert!(shed.body().is_end_stream());
    assert_eq!(shed.body().size_hint().exact(), Some(0));
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let pushed = layer
        .pushback(Duration::from_millis(75))
        .layer(handler)
        .oneshot(Request::new(()))
        .await
        .expect("answered");
    assert_eq!(pushed.headers()["grpc-retry-pushback-ms"], "75");
    assert_eq!(
        crate::pushback(pushed.headers()),
        Some(Ok(Duration::from_millis(75)))
    );
    drop(held);
    assert_eq!(limit.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_queue_waits_for_a_slot_up_to_its_max_wait() {
    let limit = ConcurrencyLimit::fixed(1)
        .queue(4, Duration::from_millis(30))
        .build()
        .expect("limit");
    let service = ShedLayer::new(limit.clone()).layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(streamed(Code::Ok))
    }));
    let first = service
        .clone()
        .oneshot(Request::new(()))
        .await
        .expect("served");
    let second = tokio::spawn(service.clone().oneshot(Request::new(())));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(limit.snapshot().queued, 1);
    let _ = first.into_body().collect().await.expect("body");
    let second = second.await.expect("joined").expect("served");
    assert!(!second.headers().contains_key("grpc-status"));
    assert_eq!(limit.in_flight(), 1);

    let started = tokio::time::Instant::now();
    let third = service.oneshot(Request::new(())).await.expect("answered");
    assert_eq!(third.headers()["grpc-status"], "8");
    assert_eq!(started.elapsed(), Duration::from_millis(30));
    assert!(
        third.headers()["grpc-message"]
            .to_str()
            .expect("ascii")
            .ends_with("after 30ms in its queue")
    );
    // Only the call shed counts as a refusal, not the one that waited.
    assert_eq!(limit.snapshot().refused, 1);
    drop(second);
    assert_eq!((limit.in_flight(), limit.snapshot().queued), (0, 0));
}
