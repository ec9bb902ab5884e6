//! Overload over loopback: a real axum server of capacity C (`WORKERS`
//! requests at once, each `WORK_MS` of work; what arrives beyond waits in
//! the server's queue) offered twice what it can serve by an open-loop
//! client (requests are sent on a fixed schedule, whatever the replies do),
//! through a real hyper client and each contender in turn:
//!
//! - `none`: no limit;
//! - `tower-C/2`, `tower-2C`: `tower::limit::ConcurrencyLimit` of C/2 and
//!   2C slots (it makes callers wait for a slot: the queue moves to the
//!   client);
//! - `steadfast-fixed-C`: a fixed `ConcurrencyLimit` of C slots that
//!   refuses at once when full;
//! - `steadfast-gradient2`, `steadfast-aimd`, `steadfast-vegas`: adaptive
//!   limits (the published defaults but min 1 — the published min of 20
//!   is above this server's capacity — starting at `INITIAL`, default the
//!   published 20; window 100 ms / 10 samples) that refuse at once above
//!   their limit.
//!
//! Each contender first runs `WARM_S` (default 2 s) at the same load,
//! unmeasured, so that an adaptive limit has found its level; its limit
//! path covers the warm-up and the run. Before them, `unloaded`: no limit at a quarter of the capacity, whose
//! p99 is the target's reference. Every call has a 2 s timeout (a call that
//! times out is neither goodput nor in the latency figures, which are of
//! successful calls, measured from the call's scheduled start). Printed per
//! contender: p50 and p99 of successful calls, goodput as a share of the
//! server's capacity, calls refused by a limit and timed out, and for the
//! adaptive limits their path over time (the limit ten times over the
//! warm-up, then ten times over the run).
//! The target (#24): p99 within 2x of the unloaded p99 while goodput stays
//! at or above 90 % of C.
//!
//! ```sh
//! cargo bench -p steadfast-tower --bench overload   # knobs: WORKERS, WORK_MS, RUN_S, WARM_S, LOAD, INITIAL
//! ```
#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use hdrhistogram::Histogram;
use http::Request;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use steadfast::call::LimitRefused;
use steadfast::clock::AsyncClock;
use steadfast::limit::{Aimd, Algorithm, ConcurrencyLimit, Gradient2, Vegas};
use steadfast_tower::{ConcurrencyLimitLayer, LimitError, PreciseClock};
use tower::util::BoxCloneService;
use tower::{BoxError, Layer, ServiceExt};

type Req = Request<Empty<Bytes>>;
type Svc = BoxCloneService<Req, http::StatusCode, BoxError>;

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The server, on its own thread and runtime: `workers` requests at once,
/// each `work` long (on `PreciseClock`, so 5 ms is 5 ms), the rest queued.
fn start_server(workers: usize, work: Duration) -> std::net::SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let clock = PreciseClock::new().unwrap();
            let pool = Arc::new(tokio::sync::Semaphore::new(workers));
            let router = Router::new().route(
                "/",
                get(move || {
                    let pool = Arc::clone(&pool);
                    async move {
                        let _worker = pool.acquire().await.unwrap();
                        clock.sleep(work).await;
                        "ok"
                    }
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// The hyper client as a service answering the status.
fn base() -> Svc {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    BoxCloneService::new(tower::service_fn(move |req: Req| {
        let client = client.clone();
        async move {
            let res = client.request(req).await?;
            Ok::<_, BoxError>(res.status())
        }
    }))
}

struct Run {
    hist: Histogram<u64>,
    ok: u64,
    refused: u64,
    timed_out: u64,
    path: Vec<u32>,
}

/// Offers `rate` calls a second for `run` through `svc`, each with a 2 s
/// timeout; samples `limit` ten times over the run.
async fn offer(
    svc: Svc,
    url: &str,
    rate: f64,
    run: Duration,
    limit: Option<ConcurrencyLimit>,
) -> Run {
    let hist = Arc::new(std::sync::Mutex::new(Histogram::<u64>::new(3).unwrap()));
    let (ok, refused, timed_out) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let start = tokio::time::Instant::now();
    let period = Duration::from_secs_f64(1.0 / rate);
    let total = (run.as_secs_f64() * rate) as u64;
    let mut path = Vec::new();
    let mut calls = Vec::with_capacity(total as usize);
    for n in 0..total {
        let at = start + period.mul_f64(n as f64);
        tokio::time::sleep_until(at).await;
        if let Some(limit) = &limit
            && n % (total / 10).max(1) == 0
        {
            path.push(limit.limit());
        }
        let req = Request::get(url).body(Empty::new()).unwrap();
        let svc = svc.clone();
        let (hist, ok, refused, timed_out) = (
            Arc::clone(&hist),
            Arc::clone(&ok),
            Arc::clone(&refused),
            Arc::clone(&timed_out),
        );
        calls.push(tokio::spawn(async move {
            match tokio::time::timeout(Duration::from_secs(2), svc.oneshot(req)).await {
                Ok(Ok(status)) if status.is_success() => {
                    let took = at.elapsed();
                    hist.lock()
                        .unwrap()
                        .record(u64::try_from(took.as_micros()).unwrap().max(1))
                        .unwrap();
                    ok.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Err(e)) if e.is::<LimitRefused>() => {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
                Ok(_) => {}
                Err(_) => {
                    timed_out.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for call in calls {
        call.await.unwrap();
    }
    let hist = hist.lock().unwrap().clone();
    Run {
        hist,
        ok: ok.load(Ordering::Relaxed),
        refused: refused.load(Ordering::Relaxed),
        timed_out: timed_out.load(Ordering::Relaxed),
        path,
    }
}

fn adaptive(algorithm: impl Algorithm) -> ConcurrencyLimit {
    ConcurrencyLimit::adaptive(algorithm)
        .window(Duration::from_millis(100), 10)
        .build()
        .unwrap()
}

fn steadfast(base: &Svc, limit: &ConcurrencyLimit) -> Svc {
    let layer = ConcurrencyLimitLayer::new(limit.clone());
    BoxCloneService::new(layer.layer(base.clone()).map_err(|e| match e {
        LimitError::Refused(refused) => BoxError::from(refused),
        LimitError::Inner(e) => e,
    }))
}

fn main() {
    let workers: u32 = setting("WORKERS", 8);
    let work = Duration::from_millis(setting("WORK_MS", 5));
    let run = Duration::from_secs(setting("RUN_S", 4));
    let load: f64 = setting("LOAD", 2.0);
    let initial: u32 = setting("INITIAL", 20);
    let warm = Duration::from_secs(setting("WARM_S", 2));
    let capacity = f64::from(workers) / work.as_secs_f64();
    let addr = start_server(workers as usize, work);
    let url = format!("http://{addr}/");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "server: {workers} workers x {} ms = {capacity:.0} calls/s; offered {:.0} calls/s for {} s per contender",
        work.as_millis(),
        capacity * load,
        run.as_secs()
    );
    println!(
        "| contender | p50 ms | p99 ms | goodput (share of C) | refused | timed out | limit over time |"
    );
    println!("|---|---|---|---|---|---|---|");
    rt.block_on(async {
        let base = base();
        let row = |name: &str, r: &Run, secs: f64| {
            let q = |q: f64| r.hist.value_at_quantile(q) as f64 / 1000.0;
            let path: Vec<String> = r.path.iter().map(u32::to_string).collect();
            println!(
                "| {name} | {:.2} | {:.2} | {:.0}/s ({:.0} %) | {} | {} | {} |",
                q(0.5),
                q(0.99),
                r.ok as f64 / secs,
                100.0 * r.ok as f64 / secs / capacity,
                r.refused,
                r.timed_out,
                path.join(" ")
            );
            q(0.99)
        };
        let secs = run.as_secs_f64();
        let unloaded = offer(base.clone(), &url, capacity / 4.0, run, None).await;
        let reference = row("unloaded (C/4, no limit)", &unloaded, secs);
        let contenders: Vec<(&str, Svc, Option<ConcurrencyLimit>)> = {
            let tower = |n: u32| BoxCloneService::new(tower::limit::ConcurrencyLimitLayer::new(n as usize).layer(base.clone()));
            let fixed = ConcurrencyLimit::fixed(workers).build().unwrap();
            let g2 = adaptive(Gradient2::builder().min_limit(1).initial_limit(initial).build().unwrap());
            let aimd = adaptive(Aimd::builder().min_limit(1).initial_limit(initial).build().unwrap());
            let vegas = adaptive(Vegas::builder().initial_limit(initial).seed(1).build().unwrap());
            vec![
                ("none", base.clone(), None),
                ("tower-C/2", tower(workers / 2), None),
                ("tower-2C", tower(workers * 2), None),
                ("steadfast-fixed-C", steadfast(&base, &fixed), Some(fixed)),
                ("steadfast-gradient2", steadfast(&base, &g2), Some(g2)),
                ("steadfast-aimd", steadfast(&base, &aimd), Some(aimd)),
                ("steadfast-vegas", steadfast(&base, &vegas), Some(vegas)),
            ]
        };
        for (name, svc, limit) in contenders {
            // A pause between contenders lets the server's queue drain.
            tokio::time::sleep(Duration::from_secs(1)).await;
            // Warm-up at the same load (an adaptive limit finds its level),
            // then the measured run; the limit's path covers both.
            let warmup = offer(svc.clone(), &url, capacity * load, warm, limit.clone()).await;
            let mut r = offer(svc, &url, capacity * load, run, limit).await;
            r.path = [warmup.path, std::mem::take(&mut r.path)].concat();
            let p99 = row(name, &r, secs);
            let goodput = r.ok as f64 / secs / capacity;
            if name.starts_with("steadfast") {
                println!(
                    "|   target: p99 {:.1}x unloaded (<= 2x: {}), goodput {:.0} % (>= 90 %: {}) | | | | | | |",
                    p99 / reference,
                    p99 <= 2.0 * reference,
                    100.0 * goodput,
                    goodput >= 0.9
                );
            }
        }
    });
}
