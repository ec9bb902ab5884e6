//! `Balance` over real replicas: axum servers on 127.0.0.1 called through a
//! real hyper client, endpoints given by a static list or a channel. One
//! replica fails (500s, or refuses connections): after its first failure
//! its load carries the penalty and the calls go to the others; a removed
//! replica gets nothing new; an endpoint whose readiness fails is kept,
//! asked again after its backoff (on a virtual clock), and never picked
//! meanwhile.
//!
//! Real time, no timing thresholds: every assertion counts requests.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use steadfast::clock::VirtualClock;
use steadfast::endpoint::{Answer, Endpoints, OutlierDetection};
use steadfast::{Classify, Verdict};
use steadfast_tower::balance::{Balance, BalanceError};
use tower::discover::{Change, ServiceList};
use tower::{Service, ServiceExt};

type Http = Client<HttpConnector, Full<Bytes>>;
type Outcome = Result<StatusCode, hyper_util::client::legacy::Error>;

/// A replica on 127.0.0.1 answering `status`, counting what it got.
struct Replica {
    url: String,
    hits: Arc<AtomicU32>,
}

async fn replica(status: StatusCode) -> Replica {
    let hits = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&hits);
    let app = Router::new().route(
        "/",
        get(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            async move { status }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}/", listener.local_addr().expect("an address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Replica { url, hits }
}

/// A port on 127.0.0.1 nothing listens on: connections are refused.
async fn refusing() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}/", listener.local_addr().expect("an address"));
    drop(listener);
    url
}

fn http() -> Http {
    Client::builder(TokioExecutor::new()).build_http()
}

/// The endpoint service of `url`: one GET, its status.
fn endpoint(
    client: &Http,
    url: &str,
) -> impl Service<
    (),
    Response = StatusCode,
    Error = hyper_util::client::legacy::Error,
    Future = Pin<Box<dyn Future<Output = Outcome> + Send>>,
> + Clone {
    let client = client.clone();
    let uri: http::Uri = url.parse().expect("a URL");
    tower::service_fn(move |()| {
        let request = http::Request::get(uri.clone())
            .body(Full::default())
            .expect("a request");
        let response = client.request(request);
        Box::pin(async move { response.await.map(|r| r.status()) })
            as Pin<Box<dyn Future<Output = Outcome> + Send>>
    })
}

/// HTTP's answers: 5xx server errors (502-504 gateway), 4xx client
/// errors, no connection a gateway error.
#[derive(Clone)]
struct ByStatus;

impl Classify<StatusCode, hyper_util::client::legacy::Error> for ByStatus {
    fn classify(&self, outcome: &Outcome) -> Verdict {
        match outcome {
            Ok(s) if s.is_server_error() => Verdict::Retry,
            Ok(s) if s.is_client_error() => Verdict::Stop,
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::Retry,
        }
    }

    fn answer(&self, outcome: &Outcome, _: Verdict) -> Answer {
        match outcome {
            Ok(s) if matches!(s.as_u16(), 502..=504) => Answer::GatewayError,
            Ok(s) if s.is_server_error() => Answer::ServerError,
            Ok(s) if s.is_client_error() => Answer::ClientError,
            Ok(_) => Answer::Ok,
            Err(_) => Answer::GatewayError,
        }
    }
}

fn set() -> Endpoints {
    Endpoints::builder().seed(3).build().expect("a valid set")
}

#[tokio::test]
async fn calls_spread_over_the_replicas_and_leave_the_failing_one() {
    let good = [replica(StatusCode::OK).await, replica(StatusCode::OK).await];
    let bad = replica(StatusCode::INTERNAL_SERVER_ERROR).await;
    let client = http();
    let urls = [&good[0].url, &bad.url, &good[1].url];
    let list = ServiceList::new(urls.iter().map(|u| endpoint(&client, u)));
    let mut balance = Balance::new(list, set()).classify(ByStatus);
    let mut ok = 0;
    for _ in 0..60 {
        let status = balance
            .ready()
            .await
            .expect("ready")
            .call(())
            .await
            .expect("an answer");
        if status == StatusCode::OK {
            ok += 1;
        }
    }
    // After its first 500 the bad replica's load carries a 5 s penalty:
    // the less loaded of any two is always another.
    let on_bad = bad.hits.load(Ordering::Relaxed);
    assert!(on_bad <= 1, "the failing replica got {on_bad} calls");
    assert_eq!(ok + on_bad, 60);
    for g in &good {
        assert!(
            g.hits.load(Ordering::Relaxed) > 0,
            "both good replicas get calls"
        );
    }
    assert_eq!(balance.endpoints().len(), 3);
}

#[tokio::test]
async fn a_refused_connection_is_avoided_and_its_error_names_the_endpoint() {
    let good = [replica(StatusCode::OK).await, replica(StatusCode::OK).await];
    let closed = refusing().await;
    let client = http();
    let urls = [good[0].url.clone(), closed.clone(), good[1].url.clone()];
    // Keyed by URL, so the error names the replica.
    let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Change<String, _>, Infallible>>();
    for url in &urls {
        tx.unbounded_send(Ok(Change::Insert(url.clone(), endpoint(&client, url))))
            .expect("the balance listens");
    }
    let mut balance = Balance::new(rx, set()).classify(ByStatus);
    let mut errors = Vec::new();
    for _ in 0..40 {
        match balance.ready().await.expect("ready").call(()).await {
            Ok(status) => assert_eq!(status, StatusCode::OK),
            Err(e) => errors.push(e),
        }
    }
    assert!(errors.len() <= 1, "{errors:?}");
    for e in &errors {
        assert!(matches!(e, BalanceError::Service { .. }));
        assert_eq!(e.endpoint(), Some(closed.as_str()), "{e}");
    }
    let served: u32 = good.iter().map(|g| g.hits.load(Ordering::Relaxed)).sum();
    assert_eq!(served as usize + errors.len(), 40);
}

#[tokio::test]
async fn a_removed_replica_gets_nothing_new() {
    let a = replica(StatusCode::OK).await;
    let b = replica(StatusCode::OK).await;
    let client = http();
    let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Change<String, _>, Infallible>>();
    tx.unbounded_send(Ok(Change::Insert("a".into(), endpoint(&client, &a.url))))
        .expect("sent");
    tx.unbounded_send(Ok(Change::Insert("b".into(), endpoint(&client, &b.url))))
        .expect("sent");
    let mut balance = Balance::new(rx, set()).classify(ByStatus);
    for _ in 0..20 {
        balance
            .ready()
            .await
            .expect("ready")
            .call(())
            .await
            .expect("an answer");
    }
    tx.unbounded_send(Ok(Change::Remove("a".into())))
        .expect("sent");
    // The next poll_ready takes the removal in before any call.
    balance.ready().await.expect("ready");
    let before = a.hits.load(Ordering::Relaxed);
    for _ in 0..30 {
        balance
            .ready()
            .await
            .expect("ready")
            .call(())
            .await
            .expect("an answer");
    }
    assert_eq!(
        a.hits.load(Ordering::Relaxed),
        before,
        "removed: nothing new"
    );
    assert_eq!(balance.endpoints().len(), 1);
}

/// An endpoint whose readiness fails until `healthy` is set.
#[derive(Clone)]
struct Flaky {
    healthy: Arc<std::sync::atomic::AtomicBool>,
    asked: Arc<AtomicU32>,
}

impl Service<()> for Flaky {
    type Response = &'static str;
    type Error = &'static str;
    type Future = std::future::Ready<Result<&'static str, &'static str>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), &'static str>> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        if self.healthy.load(Ordering::Relaxed) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Ready(Err("connection refused"))
        }
    }
    fn call(&mut self, (): ()) -> Self::Future {
        std::future::ready(Ok("flaky"))
    }
}

#[test]
fn an_endpoint_whose_readiness_fails_is_kept_and_asked_again_after_its_backoff() {
    let clock = VirtualClock::manual();
    let flaky = Flaky {
        healthy: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        asked: Arc::new(AtomicU32::new(0)),
    };
    let steady = tower::service_fn(|()| std::future::ready(Ok::<_, &'static str>("steady")));
    let (tx, rx) = futures::channel::mpsc::unbounded::<
        Result<Change<&str, tower::util::Either<Flaky, _>>, Infallible>,
    >();
    tx.unbounded_send(Ok(Change::Insert(
        "flaky",
        tower::util::Either::Left(flaky.clone()),
    )))
    .expect("sent");
    let set = Endpoints::builder()
        .seed(1)
        .outlier_detection(Some(OutlierDetection::a50().build().expect("valid")))
        .build()
        .expect("valid");
    let mut balance = Balance::with_clock(rx, set.clone(), clock.clone());
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    // Only the failing endpoint: not ready, and not dropped.
    assert!(balance.poll_ready(&mut cx).is_pending());
    assert_eq!(flaky.asked.load(Ordering::Relaxed), 1);
    assert_eq!(set.len(), 1);
    // Within its backoff (1 s) it is not asked again.
    clock.advance(Duration::from_millis(500));
    assert!(balance.poll_ready(&mut cx).is_pending());
    assert_eq!(flaky.asked.load(Ordering::Relaxed), 1);
    // A ready endpoint joins: calls go to it, never to the failing one.
    tx.unbounded_send(Ok(Change::Insert(
        "steady",
        tower::util::Either::Right(steady),
    )))
    .expect("sent");
    for _ in 0..5 {
        assert!(balance.poll_ready(&mut cx).is_ready());
        let answer = futures::executor::block_on(balance.call(())).expect("an answer");
        assert_eq!(answer, "steady");
    }
    // Past its backoff it is asked again, and once ready it takes calls.
    flaky.healthy.store(true, Ordering::Relaxed);
    clock.advance(Duration::from_millis(600));
    let mut answers = std::collections::HashSet::new();
    for _ in 0..40 {
        assert!(balance.poll_ready(&mut cx).is_ready());
        answers.insert(futures::executor::block_on(balance.call(())).expect("an answer"));
    }
    assert!(flaky.asked.load(Ordering::Relaxed) >= 2);
    assert!(answers.contains("flaky"), "{answers:?}");
}

#[tokio::test]
async fn with_no_endpoint_yet_poll_ready_waits_for_the_discovery() {
    let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Change<u8, _>, Infallible>>();
    let mut balance = Balance::new(rx, set());
    let waker = futures::task::noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(Service::<u32>::poll_ready(&mut balance, &mut cx).is_pending());
    tx.unbounded_send(Ok(Change::Insert(
        1,
        tower::service_fn(|x: u32| std::future::ready(Ok::<_, Infallible>(x + 1))),
    )))
    .expect("sent");
    let answer = balance
        .ready()
        .await
        .expect("ready")
        .call(41)
        .await
        .expect("an answer");
    assert_eq!(answer, 42);
}

/// The crate README shows `examples/balance_replicas.rs` verbatim.
#[test]
fn the_readme_shows_the_balance_example() {
    let readme = include_str!("../README.md");
    let example = include_str!("../examples/balance_replicas.rs");
    assert!(
        readme.contains(example),
        "README.md no longer shows examples/balance_replicas.rs"
    );
}
