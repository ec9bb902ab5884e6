//! Retry elsewhere, on real sockets: loopback replicas (OS-picked ports)
//! behind one `Client` with `.endpoints(..)`.
//!
//! - a retried call never goes back to the replica that failed it while
//!   another is eligible (each replica records which call it served);
//! - a refused connection is requeued: the call goes elsewhere without
//!   using an attempt, a POST included (it was never sent);
//! - over HTTP/2, a stream the server refused unprocessed
//!   (`REFUSED_STREAM`) is requeued the same way;
//! - a POST that reached a replica is never sent twice;
//! - a `Retry-After` is its replica's: a call with another replica to go
//!   to does not wait for it; a call whose every replica asked waits it.
//!
//! No timing threshold on a busy host: the waits asserted are the ones the
//! client decided (its attempt events), and a wall-clock bound is only
//! ever a lower one (a sleep is never shorter than asked).

mod support {
    pub mod server;
}

use support::server::refusing;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use steadfast::endpoint::Endpoints;
use steadfast::{Backoff, StopReason};
use steadfast_http::Client;

/// A replica answering `status` (with `Retry-After: retry_after` seconds
/// if given), recording the `x-call` header of every request it gets.
struct Replica {
    url: String,
    calls: Arc<Mutex<Vec<u32>>>,
}

impl Replica {
    async fn start(status: StatusCode, retry_after: Option<u32>) -> Self {
        let calls: Arc<Mutex<Vec<u32>>> = Arc::default();
        let seen = Arc::clone(&calls);
        let answer = move |headers: HeaderMap| {
            let call = headers
                .get("x-call")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            seen.lock().expect("calls").push(call);
            let mut out = HeaderMap::new();
            if let Some(secs) = retry_after {
                out.insert("retry-after", secs.into());
            }
            async move { (status, out).into_response() }
        };
        let app = Router::new().route("/item", get(answer.clone()).post(answer));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, calls }
    }

    fn calls(&self) -> Vec<u32> {
        self.calls.lock().expect("calls").clone()
    }
}

fn quick() -> Backoff {
    Backoff::constant(Duration::from_millis(1))
        .build()
        .expect("a valid backoff")
}

/// No outlier detection: these tests are about where retries go, not
/// about ejection.
fn plain_set() -> steadfast::endpoint::EndpointsBuilder {
    Endpoints::builder().outlier_detection(None)
}

#[tokio::test]
async fn a_retried_call_never_goes_back_to_the_failing_replica() {
    let bad = Replica::start(StatusCode::SERVICE_UNAVAILABLE, None).await;
    let good = [
        Replica::start(StatusCode::OK, None).await,
        Replica::start(StatusCode::OK, None).await,
    ];
    let client = Client::builder()
        .endpoints([&bad.url, &good[0].url, &good[1].url].map(String::clone))
        .endpoint_set(plain_set())
        .attempts(3)
        .backoff(quick())
        .build()
        .expect("a client");
    for call in 0..90_u32 {
        let response = client
            .get(format!("{}/item", bad.url))
            .header("x-call", call)
            .send()
            .await
            .expect("every call succeeds");
        assert_eq!(response.status(), StatusCode::OK);
    }
    let mut at_bad = bad.calls();
    assert!(!at_bad.is_empty(), "the picks spread over every replica");
    let met = at_bad.len();
    at_bad.dedup();
    assert_eq!(at_bad.len(), met, "a call went back to the failing replica");
    // Every call succeeded exactly once, on a good replica.
    let good_calls = good[0].calls().len() + good[1].calls().len();
    assert_eq!(good_calls, 90);
}

#[tokio::test]
async fn a_refused_connection_is_requeued_without_using_an_attempt() {
    let good = Replica::start(StatusCode::OK, None).await;
    let dead = refusing().await;
    // One attempt only: a call whose pick is the dead replica gets through
    // only by being requeued.
    let client = Client::builder()
        .endpoints([dead.clone(), good.url.clone()])
        .endpoint_set(plain_set())
        .attempts(1)
        .backoff(quick())
        .attempt_number_header(http::HeaderName::from_static("x-attempt"))
        .build()
        .expect("a client");
    for call in 0..30_u32 {
        let response = client
            .get(format!("{dead}/item"))
            .header("x-call", call)
            .send()
            .await
            .expect("every call gets through");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.ending().attempts, 1, "a requeue is no attempt");
    }
    assert_eq!(good.calls().len(), 30);
    // A POST is requeued too: it was never written anywhere.
    let response = client
        .post(format!("{dead}/item"))
        .header("x-call", 1000)
        .body("pay")
        .send()
        .await
        .expect("the POST gets through");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(good.calls().iter().filter(|c| **c == 1000).count(), 1);
    // Every pick and every place under the retry cap was given back.
    let set = client.endpoints().expect("a set");
    assert_eq!((set.flight().attempts, set.flight().retries), (0, 0));
}

/// An HTTP/2 server (prior knowledge, no TLS) on 127.0.0.1 that resets
/// every stream with `REFUSED_STREAM` (RFC 9113 §8.7: closed before any
/// processing), counting the streams it refused.
async fn refusing_streams() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let streams = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&streams);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(socket).await else {
                    return;
                };
                while let Some(Ok((_request, mut respond))) = connection.accept().await {
                    counted.fetch_add(1, Ordering::SeqCst);
                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                }
            });
        }
    });
    (url, streams)
}

/// Over HTTP/2, a request the server refused unprocessed is requeued: one
/// attempt allowed, two replicas of three refusing every stream, and every
/// call gets through, a POST included, each reaching the good replica
/// once.
#[tokio::test]
async fn an_http2_stream_refused_unprocessed_is_requeued() {
    let good = Replica::start(StatusCode::OK, None).await;
    let refusing = [refusing_streams().await, refusing_streams().await];
    let client = Client::builder()
        .reqwest_client(
            reqwest::Client::builder()
                .http2_prior_knowledge()
                .retry(reqwest::retry::never())
                .build()
                .expect("an HTTP/2 client"),
        )
        .endpoints([
            refusing[0].0.clone(),
            refusing[1].0.clone(),
            good.url.clone(),
        ])
        .endpoint_set(plain_set())
        .attempts(1)
        .backoff(quick())
        .build()
        .expect("a client");
    let mut call = 0_u32;
    // Until both refusing replicas were picked (a liveness bound: a pick
    // meets one of them in about a third of the calls while neither
    // carries a penalty).
    while refusing.iter().any(|(_, n)| n.load(Ordering::SeqCst) == 0) {
        assert!(call < 500, "the refusing replicas were never picked");
        let post = call % 2 == 1;
        let request = if post {
            client.post(format!("{}/item", good.url)).body("pay")
        } else {
            client.get(format!("{}/item", good.url))
        };
        let response = request
            .header("x-call", call)
            .send()
            .await
            .expect("every call gets through");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.ending().attempts, 1, "a requeue is no attempt");
        call += 1;
    }
    let calls = good.calls();
    assert_eq!(
        calls,
        (0..call).collect::<Vec<_>>(),
        "every call reached the good replica once"
    );
}

#[tokio::test]
async fn a_post_that_reached_a_replica_is_never_sent_twice() {
    let replicas = [
        Replica::start(StatusCode::SERVICE_UNAVAILABLE, None).await,
        Replica::start(StatusCode::SERVICE_UNAVAILABLE, None).await,
        Replica::start(StatusCode::SERVICE_UNAVAILABLE, None).await,
    ];
    let client = Client::builder()
        .endpoints(replicas.iter().map(|r| r.url.clone()))
        .endpoint_set(plain_set())
        .attempts(5)
        .backoff(quick())
        .build()
        .expect("a client");
    for call in 0..20_u32 {
        let err = client
            .post(format!("{}/item", replicas[0].url))
            .header("x-call", call)
            .body("pay")
            .send()
            .await
            .expect_err("every replica fails");
        assert_eq!(err.attempts(), 1, "{err}");
    }
    let mut all: Vec<u32> = replicas.iter().flat_map(Replica::calls).collect();
    all.sort_unstable();
    assert_eq!(all, (0..20).collect::<Vec<_>>(), "each POST sent once");
}

/// The wait before each attempt, as the client decided it.
fn waits(client: steadfast_http::ClientBuilder) -> (Client, Arc<Mutex<Vec<Duration>>>) {
    let waits: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let seen = Arc::clone(&waits);
    let client = client
        .on_attempt(move |event| seen.lock().expect("waits").push(event.waited))
        .build()
        .expect("a client");
    (client, waits)
}

#[tokio::test]
async fn a_hint_is_waited_for_only_when_every_replica_asked() {
    // One replica asks for 2 s of room, the other answers: the retry goes
    // to the other on the schedule's 1 ms, not after 2 s.
    let busy = Replica::start(StatusCode::SERVICE_UNAVAILABLE, Some(2)).await;
    let fine = Replica::start(StatusCode::OK, None).await;
    let (client, decided) = waits(
        Client::builder()
            .endpoints([busy.url.clone(), fine.url.clone()])
            .endpoint_set(plain_set())
            .attempts(2)
            .backoff(quick()),
    );
    // Calls until one met the busy replica first (the picks are random).
    for call in 0..200_u32 {
        decided.lock().expect("waits").clear();
        let response = client
            .get(format!("{}/item", fine.url))
            .header("x-call", call)
            .send()
            .await
            .expect("every call succeeds");
        if response.ending().attempts == 2 {
            let waits = decided.lock().expect("waits").clone();
            assert_eq!(waits.len(), 2, "{waits:?}");
            assert!(
                waits[1] < Duration::from_secs(1),
                "waited {:?} with another replica to go to",
                waits[1]
            );
            break;
        }
    }
    assert!(!busy.calls().is_empty(), "no call met the busy replica");

    // Every replica asks for 2 s: the retry waits for it.
    let replicas = [
        Replica::start(StatusCode::SERVICE_UNAVAILABLE, Some(2)).await,
        Replica::start(StatusCode::SERVICE_UNAVAILABLE, Some(2)).await,
    ];
    let (client, decided) = waits(
        Client::builder()
            .endpoints(replicas.iter().map(|r| r.url.clone()))
            .endpoint_set(plain_set())
            .attempts(3)
            .backoff(quick()),
    );
    let started = Instant::now();
    let err = client
        .get(format!("{}/item", replicas[0].url))
        .send()
        .await
        .expect_err("every replica asks for room");
    let took = started.elapsed();
    assert_eq!(err.reason(), StopReason::Exhausted);
    let waits = decided.lock().expect("waits").clone();
    // Attempt 2 went to the other replica at once (it had not asked yet);
    // attempt 3 had nowhere new to go and waited the 2 s asked for.
    assert_eq!(waits.len(), 3, "{waits:?}");
    assert!(waits[1] < Duration::from_secs(1), "{waits:?}");
    assert!(
        (Duration::from_secs(2)..=Duration::from_secs(3)).contains(&waits[2]),
        "{waits:?}"
    );
    assert!(took >= Duration::from_secs(2), "took {took:?}");
}

/// A 429 with no `Retry-After` but a rate-limit reset: the retry waits
/// for the reset (seconds here; a Unix time is read the same way).
#[tokio::test]
async fn a_rate_limit_reset_is_waited_for() {
    let served = Arc::new(Mutex::new(0_u32));
    let count = Arc::clone(&served);
    let app = Router::new().route(
        "/item",
        get(move || {
            let n = {
                let mut served = count.lock().expect("count");
                *served += 1;
                *served
            };
            async move {
                if n == 1 {
                    let mut out = HeaderMap::new();
                    out.insert("x-ratelimit-reset", 1.into());
                    (StatusCode::TOO_MANY_REQUESTS, out).into_response()
                } else {
                    StatusCode::OK.into_response()
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}/item", listener.local_addr().expect("an address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (client, decided) = waits(Client::builder().attempts(2).backoff(quick()));
    let started = Instant::now();
    let response = client.get(url).send().await.expect("the retry succeeds");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        *decided.lock().expect("waits"),
        vec![Duration::ZERO, Duration::from_secs(1)]
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
}
