//! A client over several endpoints, on real sockets: axum replicas on
//! 127.0.0.1 (OS-picked ports) called through steadfast's `Client` with
//! `.endpoints(..)`. One replica fails (500s, or refuses connections): the
//! calls all succeed, a call that met it retries elsewhere, never on it
//! again; an endpoint that fails every call is ejected by gRFC A50's
//! failure-percentage rule, gets nothing while ejected and returns after
//! its ejection time; the error of a call that failed everywhere names the
//! endpoint of its last attempt.
//!
//! Real time, no timing threshold: every assertion counts requests, and
//! the waits for a sweep or a return are liveness bounds far above what a
//! run takes.

mod support {
    pub mod server;
}

use support::server::refusing;

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use steadfast::Backoff;
use steadfast::endpoint::{Endpoints, FailurePercentage, OutlierDetection};
use steadfast_http::Client;

/// A replica on 127.0.0.1 answering its current status, counting what it
/// got.
struct Replica {
    url: String,
    status: Arc<AtomicU16>,
    hits: Arc<AtomicU32>,
}

impl Replica {
    async fn start(status: StatusCode) -> Self {
        let hits = Arc::new(AtomicU32::new(0));
        let code = Arc::new(AtomicU16::new(status.as_u16()));
        let (counted, answer) = (Arc::clone(&hits), Arc::clone(&code));
        let app = Router::new().route(
            "/item",
            get(move || {
                counted.fetch_add(1, Ordering::Relaxed);
                let status = StatusCode::from_u16(answer.load(Ordering::Relaxed))
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                async move { status }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("an address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            url,
            status: code,
            hits,
        }
    }

    fn hits(&self) -> u32 {
        self.hits.load(Ordering::Relaxed)
    }
}

fn quick() -> Backoff {
    Backoff::constant(Duration::from_millis(1))
        .build()
        .expect("a valid backoff")
}

#[tokio::test]
async fn a_call_that_meets_the_failing_replica_retries_elsewhere_and_succeeds() {
    let good = [
        Replica::start(StatusCode::OK).await,
        Replica::start(StatusCode::OK).await,
    ];
    let bad = Replica::start(StatusCode::INTERNAL_SERVER_ERROR).await;
    let client = Client::builder()
        .endpoints([&good[0].url, &bad.url, &good[1].url].map(String::clone))
        .backoff(quick())
        .build()
        .expect("a client");
    let mut attempts = 0;
    for _ in 0..60 {
        // Written against one replica; sent to whichever the set picks.
        let response = client
            .get(format!("{}/item", good[0].url))
            .send()
            .await
            .expect("every call succeeds");
        assert_eq!(response.status(), StatusCode::OK);
        let made = response.ending().attempts;
        // The bad replica at most once per call: a retry goes elsewhere.
        assert!(made <= 2, "{made} attempts");
        attempts += made;
    }
    let good_hits = good[0].hits() + good[1].hits();
    assert_eq!(good_hits, 60, "one success per call");
    assert_eq!(
        attempts,
        good_hits + bad.hits(),
        "every attempt reached a replica"
    );
    let set = client.endpoints().expect("a set");
    assert_eq!(set.len(), 3);
    assert!(
        set.snapshot(std::time::Instant::now())
            .iter()
            .all(|e| e.in_flight == 0)
    );
}

#[tokio::test]
async fn a_replica_that_refuses_connections_is_routed_around() {
    let good = Replica::start(StatusCode::OK).await;
    let dead = refusing().await;
    let client = Client::builder()
        .endpoints([dead.clone(), good.url.clone()])
        .backoff(quick())
        .build()
        .expect("a client");
    for _ in 0..20 {
        let response = client
            .get(format!("{dead}/item"))
            .send()
            .await
            .expect("every call succeeds");
        assert_eq!(response.status(), StatusCode::OK);
        assert!(response.ending().attempts <= 2);
    }
    assert_eq!(good.hits(), 20);
}

#[tokio::test]
async fn a_call_failing_everywhere_names_the_endpoint_of_its_last_attempt() {
    let replicas = [
        Replica::start(StatusCode::SERVICE_UNAVAILABLE).await,
        Replica::start(StatusCode::SERVICE_UNAVAILABLE).await,
    ];
    let client = Client::builder()
        .endpoints(replicas.iter().map(|r| r.url.clone()))
        .attempts(2)
        .backoff(quick())
        .build()
        .expect("a client");
    let err = client
        .get(format!("{}/item", replicas[0].url))
        .send()
        .await
        .expect_err("every replica fails");
    // Two attempts, one on each replica.
    assert_eq!((replicas[0].hits(), replicas[1].hits()), (1, 1));
    let last = err.endpoint().expect("an endpoint");
    assert!(
        replicas.iter().any(|r| format!("{}/", r.url) == last),
        "{last}"
    );
    assert!(
        err.to_string()
            .contains(&format!("; last attempt to {last})")),
        "{err}"
    );
}

#[tokio::test]
async fn a_replica_failing_every_call_is_ejected_then_returns() {
    let good = [
        Replica::start(StatusCode::OK).await,
        Replica::start(StatusCode::OK).await,
    ];
    let bad = Replica::start(StatusCode::INTERNAL_SERVER_ERROR).await;
    // gRFC A50's failure-percentage rule, judged every 100 ms on 5 calls;
    // a load that forgets a penalty in a millisecond, so that the bad
    // replica keeps its share of first attempts until it is ejected.
    let detection = OutlierDetection::a50()
        .interval(Duration::from_millis(100))
        .base_ejection_time(Duration::from_millis(300))
        .success_rate(None)
        .failure_percentage(Some(FailurePercentage {
            threshold: 85,
            enforcement_percentage: 100,
            minimum_hosts: 3,
            request_volume: 5,
        }))
        .build()
        .expect("a valid detection");
    let client = Client::builder()
        .endpoints([&good[0].url, &bad.url, &good[1].url].map(String::clone))
        .endpoint_set(
            Endpoints::builder()
                .decay(Duration::from_millis(1))
                .outlier_detection(Some(detection)),
        )
        .backoff(quick())
        .build()
        .expect("a client");
    let set = client.endpoints().expect("a set").clone();
    let bad_state = || {
        set.snapshot(std::time::Instant::now())
            .into_iter()
            .find(|e| bad.url.starts_with(e.label.trim_end_matches('/')))
            .expect("the bad replica is in the set")
    };
    let call = || async {
        let response = client
            .get(format!("{}/item", good[0].url))
            .send()
            .await
            .expect("every call succeeds");
        assert_eq!(response.status(), StatusCode::OK);
    };
    // Calls until a sweep ejects it (a liveness bound: 100 ms sweeps).
    let mut ejected = false;
    for _ in 0..2_000 {
        call().await;
        if bad_state().ejected {
            ejected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(ejected, "the failing replica was never ejected");
    assert!(bad.hits() >= 5, "judged on at least its request volume");
    // While it is ejected, nothing reaches it.
    let before = bad.hits();
    for _ in 0..20 {
        if !bad_state().ejected {
            break;
        }
        call().await;
        if bad_state().ejected {
            assert_eq!(bad.hits(), before, "an ejected replica got a call");
        }
    }
    // It is healthy again, and it returns after its ejection time.
    bad.status.store(StatusCode::OK.as_u16(), Ordering::Relaxed);
    let mut back = false;
    for _ in 0..2_000 {
        call().await;
        if !bad_state().ejected {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(back, "the replica never returned");
    let returned_at = bad.hits();
    for _ in 0..60 {
        call().await;
    }
    assert!(
        bad.hits() > returned_at,
        "a returned replica gets calls again"
    );
}
