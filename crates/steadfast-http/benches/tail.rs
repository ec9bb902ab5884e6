//! Tail latency of hedged GETs over loopback: `steadfast_http::Client`
//! with hedging against the same client without, calling one axum server
//! on 127.0.0.1 that answers 98 % of requests after 1 ms and 2 % after
//! 200 ms (a fresh draw per request, so a hedge copy draws again, as a copy
//! sent to another replica would). 8 calls in flight; `CALLS` measured
//! calls per variant (default 2,000) after 200 warm-up calls; the variants
//! take turns for `ROUNDS` rounds (default 3) and the median of each
//! figure is printed. "Extra" is what the server received beyond one
//! request per call.
//!
//! - `none`: no hedging (1 attempt);
//! - `hedge-fixed-10ms`: a second copy after 10 ms;
//! - `hedge-adaptive-p95`: a second copy once the call is slower than 95 %
//!   of recent calls (`AdaptiveDelay`, 10 ms until it has 100 samples).
//!
//! ```sh
//! cargo bench -p steadfast-http --bench tail   # knobs: ROUNDS, CALLS
//! ```
#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use futures::StreamExt;
use hdrhistogram::Histogram;
use steadfast::policy::AdaptiveDelay;

const IN_FLIGHT: usize = 8;

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Figures {
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
    extra: f64,
}

async fn measure(
    client: &steadfast_http::Client,
    url: &str,
    calls: usize,
    served: &AtomicU64,
) -> Figures {
    // Warm up the pool (and the adaptive delay's window).
    futures::stream::iter(0..200)
        .for_each_concurrent(IN_FLIGHT, |_| async {
            client.get(url).send().await.unwrap().bytes().await.unwrap();
        })
        .await;
    let before = served.load(Ordering::Relaxed);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let latencies: Vec<u64> = futures::stream::iter(0..calls)
        .map(|_| async {
            let start = Instant::now();
            client.get(url).send().await.unwrap().bytes().await.unwrap();
            u64::try_from(start.elapsed().as_micros()).unwrap()
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    for l in latencies {
        hist.record(l.max(1)).unwrap();
    }
    let sent = served.load(Ordering::Relaxed) - before;
    let ms = |us: u64| us as f64 / 1000.0;
    Figures {
        p50: ms(hist.value_at_quantile(0.5)),
        p99: ms(hist.value_at_quantile(0.99)),
        p999: ms(hist.value_at_quantile(0.999)),
        max: ms(hist.max()),
        extra: (sent as f64 - calls as f64) / calls as f64 * 100.0,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = setting("ROUNDS", 3);
    let calls: usize = setting("CALLS", 2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let served = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&served);
    let url = rt.block_on(async move {
        let router = Router::new().route(
            "/tail",
            get(move || {
                counter.fetch_add(1, Ordering::Relaxed);
                async move {
                    let slow = fastrand::f64() < 0.02;
                    let d = if slow {
                        Duration::from_millis(200)
                    } else {
                        Duration::from_millis(1)
                    };
                    tokio::time::sleep(d).await;
                    "ok"
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        format!("http://{addr}/tail")
    });

    let none = steadfast_http::Client::builder()
        .attempts(1)
        .build()
        .unwrap();
    let fixed = steadfast_http::Client::builder()
        .hedge(2, Duration::from_millis(10))
        .build()
        .unwrap();
    let adaptive = steadfast_http::Client::builder()
        .hedge(
            2,
            Arc::new(
                AdaptiveDelay::builder(Duration::from_millis(10))
                    .quantile(0.95)
                    .build()
                    .unwrap(),
            ),
        )
        .build()
        .unwrap();
    let variants = [
        ("none", &none),
        ("hedge-fixed-10ms", &fixed),
        ("hedge-adaptive-p95", &adaptive),
    ];
    let mut results: Vec<Vec<Figures>> = variants.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds {
        for (i, (_, client)) in variants.iter().enumerate() {
            results[i].push(rt.block_on(measure(client, &url, calls, &served)));
        }
    }
    println!("variant              p50 ms   p99 ms  p99.9 ms   max ms  extra %");
    for ((name, _), figures) in variants.iter().zip(results) {
        let m = |f: fn(&Figures) -> f64| median(figures.iter().map(f).collect());
        println!(
            "{name:<20} {:>6.2} {:>8.2} {:>9.2} {:>8.2} {:>8.2}",
            m(|f| f.p50),
            m(|f| f.p99),
            m(|f| f.p999),
            m(|f| f.max),
            m(|f| f.extra)
        );
    }
}
