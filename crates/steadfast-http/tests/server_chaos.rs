//! #26: a server's chaos layer on a real axum server on 127.0.0.1: off
//! means off, Envoy-style headers ask for faults within the configured
//! caps, and a steadfast client retries through the injected 503s.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use steadfast::Backoff;
use steadfast::chaos::Chaos;
use steadfast_http::server::{ABORT_HEADER, ABORT_PERCENT_HEADER, ChaosLayer, DELAY_HEADER};

async fn serve(chaos: Chaos) -> (String, Arc<AtomicU32>) {
    let served = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&served);
    let app = Router::new()
        .route(
            "/",
            get(move || {
                let counter = Arc::clone(&counter);
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    "ok"
                }
            }),
        )
        .layer(
            ChaosLayer::new(chaos)
                .retry_after(Duration::ZERO)
                .max_asked_delay(Duration::from_millis(50)),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/"), served)
}

/// 5 standard deviations of a binomial around `n · p`.
fn within_bounds(count: u32, n: u32, p: f64) -> bool {
    let (n, c) = (f64::from(n), f64::from(count));
    (c - n * p).abs() <= 5.0 * (n * p * (1.0 - p)).sqrt() + 1.0
}

#[tokio::test]
async fn switched_off_it_ignores_even_a_request_that_asks() {
    let chaos = Chaos::builder()
        .seed(1)
        .outcome(1.0, || ())
        .build()
        .unwrap();
    let (url, served) = serve(chaos.clone()).await;
    let http = reqwest::Client::new();
    for _ in 0..50 {
        let r = http
            .get(&url)
            .header(ABORT_HEADER, "500")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    assert_eq!(served.load(Ordering::SeqCst), 50);
    assert_eq!(chaos.stats().drawn, 0);
}

#[tokio::test]
async fn asked_aborts_are_capped_by_the_configured_rate() {
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(7)
        .outcome(0.3, || ())
        .build()
        .unwrap();
    let (url, served) = serve(chaos.clone()).await;
    let http = reqwest::Client::new();
    let n = 400;
    let mut aborted = 0;
    for _ in 0..n {
        // Asks for 100 % (the header's default: the configured rate, 30 %).
        let r = http
            .get(&url)
            .header(ABORT_HEADER, "429")
            .send()
            .await
            .unwrap();
        match r.status().as_u16() {
            429 => {
                assert_eq!(r.headers()["retry-after"], "0");
                aborted += 1;
            }
            200 => {}
            other => panic!("status {other}"),
        }
    }
    assert!(within_bounds(aborted, n, 0.3), "{aborted} of {n}");
    assert_eq!(
        served.load(Ordering::SeqCst),
        n - aborted,
        "an aborted request never reached the handler"
    );
    // A lower asked share is honoured, a higher one capped.
    let mut asked = 0;
    for _ in 0..n {
        let r = http
            .get(&url)
            .header(ABORT_HEADER, "500")
            .header(ABORT_PERCENT_HEADER, "5")
            .send()
            .await
            .unwrap();
        asked += u32::from(r.status() == 500);
    }
    assert!(within_bounds(asked, n, 0.05), "{asked} of {n}");
    // Garbage asks nothing: the configured fault (a 503) applies.
    let mut configured = 0;
    for _ in 0..n {
        let r = http
            .get(&url)
            .header(ABORT_HEADER, "a year")
            .header(DELAY_HEADER, "-5")
            .send()
            .await
            .unwrap();
        configured += u32::from(r.status() == 503);
    }
    assert!(within_bounds(configured, n, 0.3), "{configured} of {n}");
}

#[tokio::test]
async fn an_asked_delay_is_capped_and_needs_a_configured_latency() {
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(3)
        .latency(1.0, Duration::from_millis(1))
        .build()
        .unwrap();
    let (url, _) = serve(chaos.clone()).await;
    let http = reqwest::Client::new();
    let start = std::time::Instant::now();
    let r = http
        .get(&url)
        .header(DELAY_HEADER, "3600000")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        start.elapsed() >= Duration::from_millis(50),
        "the asked delay, capped at 50 ms, was slept"
    );
    assert_eq!(chaos.stats().latencies, 1);
    let no_latency = Chaos::builder()
        .enabled(true)
        .seed(3)
        .outcome(0.0, || ())
        .build()
        .unwrap();
    let (url, _) = serve(no_latency.clone()).await;
    http.get(&url)
        .header(DELAY_HEADER, "40")
        .send()
        .await
        .unwrap();
    assert_eq!(
        no_latency.stats().latencies,
        0,
        "a delay not configured cannot be asked for"
    );
}

#[tokio::test]
async fn a_steadfast_client_retries_through_injected_503s() {
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(11)
        .outcome(0.5, || ())
        .build()
        .unwrap();
    let (url, served) = serve(chaos.clone()).await;
    let client = steadfast_http::Client::builder()
        .attempts(30)
        .backoff(Backoff::constant(Duration::from_millis(1)).build().unwrap())
        .build()
        .unwrap();
    for _ in 0..50 {
        let r = client.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    assert_eq!(served.load(Ordering::SeqCst), 50);
    assert!(chaos.stats().outcomes >= 20, "{:?}", chaos.stats());
}
