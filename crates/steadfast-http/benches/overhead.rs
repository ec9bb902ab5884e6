//! The success-path overhead over a bare `reqwest::Client`, measured in
//! interleaved rounds so that every contender sees the same machine load
//! (the criterion groups in `client.rs` run one contender after another,
//! and on a shared machine the load moves between them).
//!
//! Each round runs `BATCH` sequential GETs (answered 200 at once by a
//! loopback axum server) with each contender in turn, the order rotating
//! from round to round; the figure per contender is the median over
//! `ROUNDS` of its per-round ratio to the bare client's time in the same
//! round, and the median per-call time.
//!
//! ```sh
//! cargo bench -p steadfast-http --bench overhead   # knobs: ROUNDS (30), BATCH (500)
//! ```
#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

type Layered = steadfast_tower::RetryService<
    reqwest::Client,
    std::sync::Arc<steadfast::RetryPolicy>,
    steadfast::classify::AnyError,
    steadfast_http::ReqwestReplay,
    steadfast::clock::DefaultClock,
>;

enum Contender {
    Bare(reqwest::Client),
    /// The bare client, with a `try_clone` of each request first (the
    /// replay copy's cost).
    BareCopy(reqwest::Client),
    /// `steadfast-tower`'s `RetryLayer` + `ReqwestReplay` straight over the
    /// `reqwest::Client` (no attempt service, no classification).
    Layer(Layered),
    Steadfast(steadfast_http::Client),
    Middleware(reqwest_middleware::ClientWithMiddleware),
}

impl Contender {
    async fn get(&self, url: &str) {
        let bytes = match self {
            Self::Bare(c) => c.get(url).send().await.unwrap().bytes().await.unwrap(),
            Self::BareCopy(c) => {
                let request = c.get(url).build().unwrap();
                let copy = request.try_clone().unwrap();
                drop(request);
                c.execute(copy).await.unwrap().bytes().await.unwrap()
            }
            Self::Layer(s) => {
                use tower::ServiceExt;
                let request = reqwest::Request::new(reqwest::Method::GET, url.parse().unwrap());
                s.clone()
                    .oneshot(request)
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap()
            }
            Self::Steadfast(c) => c.get(url).send().await.unwrap().bytes().await.unwrap(),
            Self::Middleware(c) => c.get(url).send().await.unwrap().bytes().await.unwrap(),
        };
        assert_eq!(&bytes[..], b"ok");
    }
}

fn main() {
    let rounds: usize = setting("ROUNDS", 30);
    let batch: usize = setting("BATCH", 500);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let url = rt.block_on(async {
        let router = Router::new().route("/ok", get(|| async { "ok" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        format!("http://{addr}/ok")
    });
    let bare = || {
        reqwest::Client::builder()
            .retry(reqwest::retry::never())
            .build()
            .unwrap()
    };
    let policy = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(10), Duration::from_secs(1))
        .jitter(reqwest_retry::Jitter::None)
        .build_with_max_retries(2);
    let builtin = reqwest::retry::for_host("127.0.0.1")
        .max_retries_per_request(2)
        .no_budget()
        .classify_fn(|rr| {
            if rr.status() == Some(reqwest::StatusCode::SERVICE_UNAVAILABLE) {
                rr.retryable()
            } else {
                rr.success()
            }
        });
    let contenders = [
        ("reqwest (bare)", Contender::Bare(bare())),
        (
            "steadfast-http",
            Contender::Steadfast(
                steadfast_http::Client::builder()
                    .attempts(3)
                    .build()
                    .unwrap(),
            ),
        ),
        (
            // The same client with a fallback and a chaos switched off: what
            // the two options cost a call that succeeds the first time.
            "steadfast +fb+chaos",
            Contender::Steadfast(
                steadfast_http::Client::builder()
                    .attempts(3)
                    .fallback(steadfast_http::fallback::static_response(
                        http::Response::new("fallback"),
                    ))
                    .chaos(
                        steadfast::chaos::Chaos::builder()
                            .latency(1.0, Duration::from_millis(100))
                            .outcome(1.0, || steadfast_http::chaos_response(503, None))
                            .build()
                            .unwrap(),
                    )
                    .build()
                    .unwrap(),
            ),
        ),
        ("reqwest + try_clone", Contender::BareCopy(bare())),
        (
            "tower RetryLayer",
            Contender::Layer(tower::Layer::layer(
                &steadfast_tower::RetryLayer::new(
                    steadfast::RetryPolicy::builder()
                        .max_attempts(3)
                        .build()
                        .unwrap(),
                )
                .replay(steadfast_http::ReqwestReplay),
                bare(),
            )),
        ),
        (
            "reqwest-retry",
            Contender::Middleware(
                reqwest_middleware::ClientBuilder::new(bare())
                    .with(RetryTransientMiddleware::new_with_policy(policy))
                    .build(),
            ),
        ),
        (
            "reqwest-builtin",
            Contender::Bare(reqwest::Client::builder().retry(builtin).build().unwrap()),
        ),
    ];
    // Warm up every pool.
    rt.block_on(async {
        for (_, c) in &contenders {
            for _ in 0..200 {
                c.get(&url).await;
            }
        }
    });
    let n = contenders.len();
    let mut per_call: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut ratio: Vec<Vec<f64>> = vec![Vec::new(); n];
    for round in 0..rounds {
        let mut took = vec![0.0; n];
        for k in 0..n {
            let i = (round + k) % n;
            let c = &contenders[i].1;
            let start = Instant::now();
            rt.block_on(async {
                for _ in 0..batch {
                    c.get(&url).await;
                }
            });
            took[i] = start.elapsed().as_secs_f64() / batch as f64;
        }
        for i in 0..n {
            per_call[i].push(took[i] * 1e6);
            ratio[i].push(took[i] / took[0]);
        }
    }
    println!("contender          per call (median µs)   vs bare (median of per-round ratios)");
    for (i, (name, _)) in contenders.iter().enumerate() {
        println!(
            "{name:<18} {:>10.2} {:>22.4}",
            median(per_call[i].clone()),
            median(ratio[i].clone())
        );
    }
}
