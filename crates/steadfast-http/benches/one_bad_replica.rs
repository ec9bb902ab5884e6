//! One bad replica of five, over loopback: five axum servers on 127.0.0.1
//! (each answers after 1 ms), one of which is bad in one of three ways:
//! it answers 500 to every request (`always`), to every other one
//! (`half`), or answers 200 after 50 ms instead of 1 ms (`slow`). A
//! `steadfast_http::Client` (3 attempts, 1 ms constant backoff) makes
//! `CALLS` calls (default 2,000; 16 in flight) with each strategy:
//!
//! - `random, retry same`: what users write with reqwest today, one client
//!   and a random replica per call, its retries going to the same one;
//! - `p2c`: `ClientBuilder::endpoints` without outlier detection: the power
//!   of two choices by peak-EWMA load, a failure's load penalty, retries
//!   elsewhere;
//! - `p2c + envoy`: the same with Envoy's outlier detection, the client's
//!   default (five 5xx in a row eject for 30 s);
//! - `p2c + a50`: the same with gRFC A50's (both rules at A50's defaults,
//!   a sweep every second so that a short run sees one).
//!
//! Printed per strategy: the share of calls that succeeded, attempts per
//! call, the share of all attempts that reached the bad replica, goodput
//! (successful calls a second) and the p99 latency of a call.
//!
//! ```sh
//! cargo bench -p steadfast-http --bench one_bad_replica   # knob: CALLS
//! ```
#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use futures::StreamExt;
use hdrhistogram::Histogram;
use steadfast::Backoff;
use steadfast::endpoint::{Endpoints, FailurePercentage, OutlierDetection, SuccessRate};

const IN_FLIGHT: usize = 16;
const REPLICAS: usize = 5;
const BAD: usize = 2;

#[derive(Debug, Clone, Copy)]
enum Bad {
    Always,
    Half,
    Slow,
}

impl Bad {
    fn name(self) -> &'static str {
        match self {
            Self::Always => "always 500",
            Self::Half => "half 500",
            Self::Slow => "slow (50 ms)",
        }
    }
}

/// A replica: its base URL and how many requests it got.
struct Replica {
    url: String,
    hits: Arc<AtomicU64>,
}

async fn replica(bad: Option<Bad>) -> Replica {
    let hits = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&hits);
    let router = Router::new().route(
        "/item",
        get(move || {
            let n = counted.fetch_add(1, Ordering::Relaxed);
            async move {
                let (delay, status) = match bad {
                    None => (1, StatusCode::OK),
                    Some(Bad::Always) => (1, StatusCode::INTERNAL_SERVER_ERROR),
                    Some(Bad::Half) if n.is_multiple_of(2) => {
                        (1, StatusCode::INTERNAL_SERVER_ERROR)
                    }
                    Some(Bad::Half) => (1, StatusCode::OK),
                    Some(Bad::Slow) => (50, StatusCode::OK),
                };
                tokio::time::sleep(Duration::from_millis(delay)).await;
                status
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Replica { url, hits }
}

#[derive(Clone, Copy)]
enum Strategy {
    RandomSame,
    P2c,
    Envoy,
    A50,
}

impl Strategy {
    const ALL: [Self; 4] = [Self::RandomSame, Self::P2c, Self::Envoy, Self::A50];

    fn name(self) -> &'static str {
        match self {
            Self::RandomSame => "random, retry same",
            Self::P2c => "p2c",
            Self::Envoy => "p2c + envoy",
            Self::A50 => "p2c + a50",
        }
    }

    fn client(self, urls: &[String]) -> steadfast_http::Client {
        let b = steadfast_http::Client::builder()
            .attempts(3)
            .backoff(Backoff::constant(Duration::from_millis(1)).build().unwrap());
        let set = |od: Option<OutlierDetection>| Endpoints::builder().outlier_detection(od);
        match self {
            Self::RandomSame => b,
            Self::P2c => b.endpoints(urls.to_vec()).endpoint_set(set(None)),
            Self::Envoy => b.endpoints(urls.to_vec()),
            Self::A50 => b.endpoints(urls.to_vec()).endpoint_set(set(Some(
                OutlierDetection::a50()
                    .interval(Duration::from_secs(1))
                    .success_rate(Some(SuccessRate::default()))
                    .failure_percentage(Some(FailurePercentage::default()))
                    .build()
                    .unwrap(),
            ))),
        }
        .build()
        .unwrap()
    }
}

struct Figures {
    success: f64,
    attempts: f64,
    on_bad: f64,
    goodput: f64,
    p99: f64,
}

async fn run(strategy: Strategy, bad: Bad, calls: usize) -> Figures {
    let mut replicas = Vec::new();
    for i in 0..REPLICAS {
        replicas.push(replica((i == BAD).then_some(bad)).await);
    }
    let urls: Vec<String> = replicas.iter().map(|r| r.url.clone()).collect();
    let client = strategy.client(&urls);
    let attempts = AtomicU64::new(0);
    let ok = AtomicU64::new(0);
    let start = Instant::now();
    let latencies: Vec<u64> = futures::stream::iter(0..calls)
        .map(|_| async {
            // The random strategy's replica; the set's requests are
            // written against the first and sent where it picks.
            let base = match strategy {
                Strategy::RandomSame => &urls[fastrand::usize(..REPLICAS)],
                _ => &urls[0],
            };
            let began = Instant::now();
            match client.get(format!("{base}/item")).send().await {
                Ok(response) => {
                    attempts.fetch_add(u64::from(response.ending().attempts), Ordering::Relaxed);
                    if response.status().is_success() {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    attempts.fetch_add(u64::from(e.ending().attempts), Ordering::Relaxed);
                }
            }
            u64::try_from(began.elapsed().as_micros()).unwrap()
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let elapsed = start.elapsed().as_secs_f64();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    for l in latencies {
        hist.record(l.max(1)).unwrap();
    }
    let total: u64 = replicas
        .iter()
        .map(|r| r.hits.load(Ordering::Relaxed))
        .sum();
    let on_bad = replicas[BAD].hits.load(Ordering::Relaxed);
    let ok = ok.load(Ordering::Relaxed) as f64;
    Figures {
        success: ok / calls as f64 * 100.0,
        attempts: attempts.load(Ordering::Relaxed) as f64 / calls as f64,
        on_bad: on_bad as f64 / total.max(1) as f64 * 100.0,
        goodput: ok / elapsed,
        p99: hist.value_at_quantile(0.99) as f64 / 1000.0,
    }
}

fn main() {
    let calls: usize = std::env::var("CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("{calls} calls, {IN_FLIGHT} in flight, {REPLICAS} replicas, one bad");
    println!(
        "{:<13} {:<19} {:>9} {:>9} {:>8} {:>10} {:>8}",
        "bad replica", "strategy", "success%", "attempts", "on bad%", "goodput/s", "p99 ms"
    );
    for bad in [Bad::Always, Bad::Half, Bad::Slow] {
        for strategy in Strategy::ALL {
            let f = rt.block_on(run(strategy, bad, calls));
            println!(
                "{:<13} {:<19} {:>9.2} {:>9.3} {:>8.2} {:>10.0} {:>8.2}",
                bad.name(),
                strategy.name(),
                f.success,
                f.attempts,
                f.on_bad,
                f.goodput,
                f.p99
            );
        }
    }
}
