//! The layers over a real hyper client calling a real axum server on
//! 127.0.0.1: retries after injected 503s, a body over the replay limit
//! sent once, a hedged call whose slow copy the server sees cancelled, and a
//! deadline that shrinks across a two-hop chain and cancels the last hop.
//!
//! Real time (these are integration tests); nothing asserts a timing
//! threshold beyond "before the 60 s the slow handler would take".

mod support {
    pub mod server;
}

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use steadfast::deadline::DeadlineHeader;
use steadfast::{Backoff, HedgePolicy, Jitter, RetryPolicy, StopReason, Verdict};
use steadfast_tower::replay::HttpReplay;
use steadfast_tower::{HedgeLayer, RetryLayer, ServerDeadlineLayer, SetDeadlineHeaderLayer};
use support::server::{Handler, Seen, Server, eventually, hyper_client};
use tower::{ServiceBuilder, ServiceExt};

type Outcome = Result<Response<Incoming>, hyper_util::client::legacy::Error>;

/// 503 and transport errors are retried; everything else is final.
fn retry_503(outcome: &Outcome) -> Verdict {
    match outcome {
        Ok(r) if r.status() == StatusCode::SERVICE_UNAVAILABLE => Verdict::Retry,
        Ok(_) => Verdict::Success,
        Err(_) => Verdict::Retry,
    }
}

fn policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(
            Backoff::exponential()
                .initial(Duration::from_millis(5))
                .jitter(Jitter::None)
                .build()
                .expect("valid backoff"),
        )
        .build()
        .expect("valid policy")
}

fn get_request(url: &str) -> Request<Full<Bytes>> {
    Request::get(url)
        .body(Full::default())
        .expect("valid request")
}

async fn text(response: Response<Incoming>) -> String {
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

#[tokio::test]
async fn recovers_after_injected_503s_and_sends_the_time_left_on_each_attempt() {
    let server = Server::start().await;
    let client = ServiceBuilder::new()
        .layer(
            RetryLayer::new(policy(4))
                .replay(HttpReplay::default())
                .classify(retry_503),
        )
        .layer(SetDeadlineHeaderLayer::new(DeadlineHeader::DEFAULT).expect("valid header"))
        .service(hyper_client());
    let d = steadfast::Deadline::after(std::time::Instant::now(), Duration::from_secs(30));
    let response =
        steadfast::deadline::scope_async(d, client.oneshot(get_request(&server.url("/flaky/2"))))
            .await
            .expect("recovered");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(text(response).await, "ok");
    assert_eq!(server.seen.requests("/flaky/2"), 3);
    // Every attempt carried the time it had left, and it shrank.
    let sent: Vec<Duration> = server
        .seen
        .deadlines
        .lock()
        .expect("lock")
        .iter()
        .map(|h| {
            DeadlineHeader::DEFAULT
                .decode(h.as_deref().expect("a deadline header").as_bytes())
                .expect("a valid header")
        })
        .collect();
    assert_eq!(sent.len(), 3);
    assert!(sent.windows(2).all(|w| w[1] < w[0]), "{sent:?}");
    assert!(sent[0] <= Duration::from_secs(30));
    assert_eq!(server.seen.in_flight.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_body_over_the_replay_limit_is_sent_once() {
    let server = Server::start().await;
    let client = RetryLayer::new(policy(3))
        .replay(HttpReplay::new(1024))
        .classify(retry_503);
    let client = tower::Layer::layer(&client, hyper_client());
    let big = Request::post(server.url("/upload"))
        .body(Full::new(Bytes::from(vec![b'x'; 4096])))
        .expect("valid request");
    let response = client.clone().oneshot(big).await.expect("a response");
    // The 503 would have been retried; the body could not be sent again.
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(text(response).await, "4096");
    assert_eq!(server.seen.requests("/upload"), 1);

    // Within the limit, the same body is sent on every attempt.
    let small = Request::post(server.url("/upload"))
        .body(Full::new(Bytes::from(vec![b'y'; 512])))
        .expect("valid request");
    let response = client.oneshot(small).await.expect("a response");
    assert_eq!(text(response).await, "512");
    assert_eq!(server.seen.requests("/upload"), 4);
}

#[tokio::test]
async fn a_hedged_call_returns_the_fast_copy_and_the_slow_one_is_cancelled() {
    let server = Server::start().await;
    let policy = HedgePolicy::builder(Duration::from_millis(20))
        .max_attempts(2)
        .build()
        .expect("valid policy");
    let client = HedgeLayer::new(policy).replay(HttpReplay::default());
    let client = tower::Layer::layer(&client, hyper_client());
    let started = std::time::Instant::now();
    let response = client
        .oneshot(get_request(&server.url("/hedge")))
        .await
        .expect("a reply");
    assert_eq!(text(response).await, "fast");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(server.seen.requests("/hedge"), 2);
    // The slow copy's connection was closed: its handler was dropped.
    let seen = Arc::clone(&server.seen);
    assert!(
        eventually(|| seen.cancelled.load(Ordering::SeqCst) == 1).await,
        "the server never saw the slow copy cancelled"
    );
    assert!(eventually(|| seen.in_flight.load(Ordering::SeqCst) == 0).await);
}

/// What the last hop saw: the time it had left when its handler started,
/// and whether it was cancelled.
#[derive(Debug, Default)]
struct Hop {
    left: std::sync::Mutex<Option<Duration>>,
}

#[tokio::test]
async fn the_deadline_shrinks_across_two_hops_and_cancels_the_last() {
    // Service B: records the ambient deadline its handler sees, then works
    // for a minute (it will be cut off).
    let b_seen = Arc::new(Seen::default());
    let hop = Arc::new(Hop::default());
    let b = {
        let hop = Arc::clone(&hop);
        let seen = Arc::clone(&b_seen);
        Router::new()
            .route(
                "/b",
                get(move || {
                    let hop = Arc::clone(&hop);
                    let seen = Arc::clone(&seen);
                    async move {
                        let handler = Handler::start(&seen);
                        *hop.left.lock().expect("lock") = steadfast::deadline::current()
                            .map(|d| d.remaining(std::time::Instant::now()));
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        handler.finish("finished")
                    }
                }),
            )
            .layer(
                ServerDeadlineLayer::new()
                    .header(DeadlineHeader::DEFAULT)
                    .on_expiry(|| StatusCode::GATEWAY_TIMEOUT.into_response()),
            )
    };
    let b = Server::serve(b, Arc::clone(&b_seen)).await;

    // Service A: reads its deadline, spends 100 ms, then calls B through a
    // client stack that sends the time left.
    #[derive(Clone)]
    struct AState {
        b_url: String,
        a_left: Arc<std::sync::Mutex<Option<Duration>>>,
    }
    async fn a_handler(State(state): State<AState>) -> (StatusCode, String) {
        *state.a_left.lock().expect("lock") =
            steadfast::deadline::current().map(|d| d.remaining(std::time::Instant::now()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let client = ServiceBuilder::new()
            .layer(SetDeadlineHeaderLayer::new(DeadlineHeader::DEFAULT).expect("valid header"))
            .service(hyper_client());
        match client.oneshot(get_request(&state.b_url)).await {
            Ok(r) => (r.status(), "from b".to_owned()),
            Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()),
        }
    }
    let a_left = Arc::new(std::sync::Mutex::new(None));
    let a = Router::new()
        .route("/a", get(a_handler))
        .with_state(AState {
            b_url: b.url("/b"),
            a_left: Arc::clone(&a_left),
        })
        .layer(
            ServerDeadlineLayer::new()
                .header(DeadlineHeader::DEFAULT)
                .on_expiry(|| StatusCode::GATEWAY_TIMEOUT.into_response()),
        );
    let a = Server::serve(a, Arc::new(Seen::default())).await;

    // The client gives the whole chain 1.5 s.
    let client = ServiceBuilder::new()
        .layer(steadfast_tower::DeadlineLayer::new(Duration::from_millis(
            1500,
        )))
        .layer(SetDeadlineHeaderLayer::new(DeadlineHeader::DEFAULT).expect("valid header"))
        .service(hyper_client());
    let started = std::time::Instant::now();
    let response = client.oneshot(get_request(&a.url("/a"))).await;
    // B ran out of time first (its deadline is A's minus what A spent), and
    // answered 504 through A; or A's own deadline cut A off: either way the
    // client got its answer within its 1.5 s, not after B's minute.
    assert!(started.elapsed() < Duration::from_secs(30));
    match response {
        Ok(r) => assert_eq!(r.status(), StatusCode::GATEWAY_TIMEOUT),
        Err(e) => assert!(e.is_exceeded(), "{e}"),
    }
    let a_left = a_left.lock().expect("lock").expect("A saw a deadline");
    let b_left = hop.left.lock().expect("lock").expect("B saw a deadline");
    assert!(a_left <= Duration::from_millis(1500), "{a_left:?}");
    assert!(
        b_left + Duration::from_millis(100) <= a_left,
        "A {a_left:?}, B {b_left:?}"
    );
    // B's handler was dropped when its deadline passed.
    let seen = Arc::clone(&b_seen);
    assert!(eventually(|| seen.cancelled.load(Ordering::SeqCst) == 1).await);
    assert_eq!(b_seen.in_flight.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn every_attempt_failing_reports_why() {
    let server = Server::start().await;
    let client = RetryLayer::new(policy(2))
        .replay(HttpReplay::default())
        .name("flaky-api");
    let client = tower::Layer::layer(&client, hyper_client());
    // Nothing listens on this port once the listener is dropped.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("address")
    };
    let err = client
        .oneshot(get_request(&format!("http://{closed}/")))
        .await
        .expect_err("connection refused");
    assert_eq!((err.reason(), err.attempts()), (StopReason::Exhausted, 2));
    assert_eq!(err.name(), Some("flaky-api"));
    drop(server);
}
