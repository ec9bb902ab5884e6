//! One retry cap across an endpoint set, on real sockets: 64 callers at
//! once against three loopback replicas that all fail. The replicas count
//! the retries they hold (told apart by the attempt-number header the
//! client sends) and keep them until the test lets go, so that every
//! retry admitted stays in flight: the cap's bound is read at the servers,
//! not inferred from timing.
//!
//! No timing threshold: the test waits (with a liveness bound far above a
//! run's) until every call either holds a retry at a server or has
//! stopped, then counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use steadfast::{Backoff, StopReason};
use steadfast_http::Client;
use tokio::sync::{Barrier, watch};

const CALLERS: u32 = 64;

/// What the three replicas share: first attempts wait for one another
/// (all 64 fail at once), retries wait for the release; both answer 503.
#[derive(Clone)]
struct Fleet {
    first: Arc<Barrier>,
    release: watch::Receiver<bool>,
    held: Arc<AtomicU32>,
    peak: Arc<AtomicU32>,
    retries: Arc<AtomicU32>,
}

impl Fleet {
    async fn answer(self, headers: HeaderMap) -> StatusCode {
        let attempt: u32 = headers
            .get("x-attempt")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if attempt == 1 {
            self.first.wait().await;
        } else {
            self.retries.fetch_add(1, Ordering::SeqCst);
            let now = self.held.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            let mut release = self.release.clone();
            let _ = release.wait_for(|go| *go).await;
            self.held.fetch_sub(1, Ordering::SeqCst);
        }
        StatusCode::SERVICE_UNAVAILABLE
    }
}

async fn replica(fleet: Fleet) -> String {
    let app = Router::new().route(
        "/item",
        get(move |headers: HeaderMap| fleet.clone().answer(headers)),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_cap_holds_under_64_callers_against_a_failing_set() {
    let (go, release) = watch::channel(false);
    let fleet = Fleet {
        first: Arc::new(Barrier::new(CALLERS as usize)),
        release,
        held: Arc::default(),
        peak: Arc::default(),
        retries: Arc::default(),
    };
    let mut urls = Vec::new();
    for _ in 0..3 {
        urls.push(replica(fleet.clone()).await);
    }
    let client = Client::builder()
        .endpoints(urls.clone())
        .attempts(2)
        .backoff(
            Backoff::constant(Duration::from_millis(1))
                .build()
                .expect("a backoff"),
        )
        .attempt_number_header(http::HeaderName::from_static("x-attempt"))
        .build()
        .expect("a client");
    let calls: Vec<_> = (0..CALLERS)
        .map(|_| {
            let client = client.clone();
            let url = format!("{}/item", urls[0]);
            tokio::spawn(async move { client.get(url).send().await })
        })
        .collect();
    // Every call ends up holding a retry at a server or stopped by the
    // cap (no call can do anything else until the release).
    let settled = async {
        loop {
            let done = calls.iter().filter(|c| c.is_finished()).count() as u32;
            if done + fleet.held.load(Ordering::SeqCst) == CALLERS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), settled)
        .await
        .expect("every call holds a retry or stopped");
    let held = fleet.held.load(Ordering::SeqCst);
    go.send(true).expect("the replicas listen");
    let mut capped = 0;
    let mut exhausted = 0;
    for call in calls {
        let err = call
            .await
            .expect("the call's task")
            .expect_err("every replica fails");
        match err.reason() {
            StopReason::RetryCapped => {
                assert_eq!(err.attempts(), 1, "{err}");
                capped += 1;
            }
            StopReason::Exhausted => {
                assert_eq!(err.attempts(), 2, "{err}");
                exhausted += 1;
            }
            other => panic!("unexpected stop {other}: {err}"),
        }
    }
    let peak = fleet.peak.load(Ordering::SeqCst);
    eprintln!("peak {peak}, capped {capped}, retried {exhausted}");
    // 20 % of at most 64 attempts in flight: never more than 12 retries
    // at the servers at once, and at least the floor of 3 got through.
    assert!((3..=12).contains(&peak), "peak of {peak} retries in flight");
    assert_eq!(held, peak, "the retries held are the peak");
    assert_eq!(fleet.retries.load(Ordering::SeqCst), exhausted);
    assert_eq!(capped + exhausted, CALLERS);
    let set = client.endpoints().expect("a set");
    assert_eq!(set.retry_overflows(), u64::from(capped));
    assert_eq!(
        set.flight().attempts,
        0,
        "every attempt gave its place back"
    );
}
