//! tower's own balancer scenario (`tower/examples/tower-balance.rs`: ten
//! endpoints whose latencies are drawn uniformly below 1, 5, 10, 10, 10,
//! 100, 100, 100, 500 and 1000 ms; 100,000 requests, 500 in flight at once;
//! a default round trip of 30 ms and a decay of 10 s), run with steadfast's
//! `Balance` beside tower's P2C with PeakEwma and with PendingRequests, in
//! one process, on real time: each balancer's latency percentiles and each
//! endpoint's share.
//!
//! ```sh
//! cargo bench -p steadfast-tower --bench balance_scenario            # 100,000 requests
//! REQUESTS=20000 cargo bench -p steadfast-tower --bench balance_scenario
//! ```
//!
//! Every endpoint answers whatever it drew: what separates the balancers is
//! where they send each request. (Not a criterion bench: its output is a
//! table, recorded in BENCHMARKS.md.)
#![allow(clippy::unwrap_used, clippy::print_stdout, missing_docs)]

use std::convert::Infallible;
use std::time::{Duration, Instant};

use futures::StreamExt;
use hdrhistogram::Histogram;
use steadfast::backoff::Rng;
use steadfast::endpoint::Endpoints;
use steadfast_tower::balance::Balance;
use tower::discover::ServiceList;
use tower::limit::ConcurrencyLimit;
use tower::load::{CompleteOnResponse, PeakEwmaDiscover, PendingRequestsDiscover};
use tower::{Service, ServiceExt};

const MAX_LATENCY_MS: [u64; 10] = [1, 5, 10, 10, 10, 100, 100, 100, 500, 1000];
const IN_FLIGHT: usize = 500;
const DEFAULT_RTT: Duration = Duration::from_millis(30);
const DECAY: Duration = Duration::from_secs(10);

/// Which endpoint answered, and how long it took.
#[derive(Debug, Clone, Copy)]
struct Answered {
    endpoint: usize,
    took: Duration,
}

/// The ten endpoints: each sleeps a latency drawn uniformly below its
/// maximum (seeded per endpoint), then answers.
fn endpoints()
-> Vec<impl Service<(), Response = Answered, Error = Infallible, Future = impl Send> + Send> {
    MAX_LATENCY_MS
        .iter()
        .enumerate()
        .map(|(endpoint, &max)| {
            let mut rng = Rng::with_seed(endpoint as u64 + 1);
            tower::service_fn(move |()| {
                let latency = Duration::from_millis(rng.next_u64() % max);
                let start = Instant::now();
                async move {
                    tokio::time::sleep(latency).await;
                    Ok::<_, Infallible>(Answered {
                        endpoint,
                        took: start.elapsed(),
                    })
                }
            })
        })
        .collect()
}

/// Sends `requests` through `balancer`, `IN_FLIGHT` at a time, and prints
/// what came back.
async fn run<S>(name: &str, balancer: S, requests: usize)
where
    S: Service<(), Response = Answered> + Send + 'static,
    S::Error: std::fmt::Debug,
    S::Future: Send,
{
    let start = Instant::now();
    let front = ConcurrencyLimit::new(balancer, IN_FLIGHT);
    let mut answers = front
        .call_all(futures::stream::repeat(()).take(requests))
        .unordered();
    let mut latencies = Histogram::<u64>::new_with_max(3_000, 3).unwrap();
    let mut shares = [0usize; 10];
    while let Some(answer) = answers.next().await {
        let answer = answer.unwrap();
        latencies += u64::try_from(answer.took.as_millis())
            .unwrap_or(u64::MAX)
            .min(3_000);
        shares[answer.endpoint] += 1;
    }
    let total = shares.iter().sum::<usize>().max(1) as f64;
    let share: Vec<String> = shares
        .iter()
        .map(|&n| format!("{:4.1}", n as f64 / total * 100.0))
        .collect();
    println!(
        "| {name} | {} | {} | {} | {} | {:.1} s | {} |",
        latencies.value_at_quantile(0.5),
        latencies.value_at_quantile(0.9),
        latencies.value_at_quantile(0.99),
        latencies.value_at_quantile(0.999),
        start.elapsed().as_secs_f64(),
        share.join(" "),
    );
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // cargo bench's discovery: nothing to list
    }
    let requests = std::env::var("REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    println!("{requests} requests, {IN_FLIGHT} in flight, endpoint maxima {MAX_LATENCY_MS:?} ms");
    println!("| balancer | p50 ms | p90 ms | p99 ms | p99.9 ms | wall | share per endpoint, % |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    let set = Endpoints::builder()
        .default_rtt(DEFAULT_RTT)
        .decay(DECAY)
        .build()
        .unwrap();
    run(
        "steadfast P2C + peak EWMA",
        Balance::new(ServiceList::new(endpoints()), set),
        requests,
    )
    .await;
    let ewma = tower::balance::p2c::Balance::new(PeakEwmaDiscover::new(
        ServiceList::new(endpoints()),
        DEFAULT_RTT,
        DECAY,
        CompleteOnResponse::default(),
    ));
    run("tower P2C + PeakEwma", ewma, requests).await;
    let pending = tower::balance::p2c::Balance::new(PendingRequestsDiscover::new(
        ServiceList::new(endpoints()),
        CompleteOnResponse::default(),
    ));
    run("tower P2C + PendingRequests", pending, requests).await;
}
