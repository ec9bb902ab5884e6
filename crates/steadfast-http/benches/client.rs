//! `steadfast_http::Client` against its peers on one loopback axum server,
//! in the same run:
//!
//! - `reqwest`: a bare `reqwest::Client` (its retries off), the floor;
//! - `steadfast-http`: our client (3 attempts, exponential 10 ms x2, no jitter);
//! - `reqwest-retry`: `reqwest-middleware` + `RetryTransientMiddleware`
//!   (2 retries, exponential 10 ms x2, no jitter);
//! - `reqwest-builtin`: reqwest's own `retry` (2 retries of a 503 on this
//!   host, no budget; it cannot wait between attempts).
//!
//! `success`: one GET answered 200 at once (the overhead over the bare client).
//! `recover_two_503s`: one GET answered 503, 503, 200 (a fresh path per
//! iteration), so the time is the two waits plus three round trips.
//!
//! ```sh
//! cargo bench -p steadfast-http --bench client
//! ```
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use criterion::{Criterion, criterion_group, criterion_main};
use reqwest_middleware::ClientWithMiddleware;
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;
use steadfast::{Backoff, Jitter};

type Hits = Arc<Mutex<HashMap<u64, u32>>>;

async fn flaky(State(hits): State<Hits>, Path(id): Path<u64>) -> (StatusCode, &'static str) {
    let n = {
        let mut all = hits.lock().unwrap();
        let n = all.entry(id).or_default();
        *n += 1;
        *n
    };
    if n <= 2 {
        (StatusCode::SERVICE_UNAVAILABLE, "later")
    } else {
        hits.lock().unwrap().remove(&id);
        (StatusCode::OK, "ok")
    }
}

fn server(rt: &tokio::runtime::Runtime) -> SocketAddr {
    rt.block_on(async {
        let hits = Hits::default();
        let router = Router::new()
            .route("/ok", get(|| async { "ok" }))
            .route("/flaky/{id}", get(flaky))
            .with_state(hits);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        addr
    })
}

fn bare() -> reqwest::Client {
    reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .build()
        .unwrap()
}

fn steadfast_client() -> steadfast_http::Client {
    steadfast_http::Client::builder()
        .attempts(3)
        .backoff(
            Backoff::exponential()
                .initial(Duration::from_millis(10))
                .jitter(Jitter::None)
                .build()
                .unwrap(),
        )
        .build()
        .unwrap()
}

fn reqwest_retry() -> ClientWithMiddleware {
    let policy = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(10), Duration::from_secs(1))
        .jitter(reqwest_retry::Jitter::None)
        .base(2)
        .build_with_max_retries(2);
    reqwest_middleware::ClientBuilder::new(bare())
        .with(RetryTransientMiddleware::new_with_policy(policy))
        .build()
}

fn reqwest_builtin() -> reqwest::Client {
    let policy = reqwest::retry::for_host("127.0.0.1")
        .max_retries_per_request(2)
        .no_budget()
        .classify_fn(|rr| {
            if rr.status() == Some(reqwest::StatusCode::SERVICE_UNAVAILABLE) || rr.error().is_some()
            {
                rr.retryable()
            } else {
                rr.success()
            }
        });
    reqwest::Client::builder().retry(policy).build().unwrap()
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = server(&rt);
    let ok = format!("http://{addr}/ok");

    let bare = bare();
    let ours = steadfast_client();
    let retry_mw = reqwest_retry();
    let builtin = reqwest_builtin();

    let mut g = c.benchmark_group("http/success");
    g.bench_function("reqwest", |b| {
        b.to_async(&rt).iter(|| async {
            let r = bare.get(&ok).send().await.unwrap();
            assert!(r.status().is_success());
            r.bytes().await.unwrap()
        });
    });
    g.bench_function("steadfast-http", |b| {
        b.to_async(&rt).iter(|| async {
            let r = ours.get(&ok).send().await.unwrap();
            assert!(r.status().is_success());
            r.bytes().await.unwrap()
        });
    });
    g.bench_function("reqwest-retry", |b| {
        b.to_async(&rt).iter(|| async {
            let r = retry_mw.get(&ok).send().await.unwrap();
            assert!(r.status().is_success());
            r.bytes().await.unwrap()
        });
    });
    g.bench_function("reqwest-builtin", |b| {
        b.to_async(&rt).iter(|| async {
            let r = builtin.get(&ok).send().await.unwrap();
            assert!(r.status().is_success());
            r.bytes().await.unwrap()
        });
    });
    g.finish();

    let ids = AtomicU64::new(0);
    let flaky = |id: u64| format!("http://{addr}/flaky/{id}");
    let mut g = c.benchmark_group("http/recover_two_503s");
    g.sample_size(20);
    g.bench_function("steadfast-http", |b| {
        b.to_async(&rt).iter(|| async {
            let r = ours
                .get(flaky(ids.fetch_add(1, Ordering::Relaxed)))
                .send()
                .await
                .unwrap();
            assert_eq!(r.ending().attempts, 3);
        });
    });
    g.bench_function("reqwest-retry", |b| {
        b.to_async(&rt).iter(|| async {
            let r = retry_mw
                .get(flaky(ids.fetch_add(1, Ordering::Relaxed)))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
        });
    });
    g.bench_function("reqwest-builtin (no wait)", |b| {
        b.to_async(&rt).iter(|| async {
            let r = builtin
                .get(flaky(ids.fetch_add(1, Ordering::Relaxed)))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
        });
    });
    g.finish();
}

criterion_group! {
    name = client;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = benches
}
criterion_main!(client);
