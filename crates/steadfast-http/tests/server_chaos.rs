//! #26: a server's chaos layer on a real axum server on 127.0.0.1: off
//! means off, Envoy-style headers ask for faults within the configured
//! caps, and a steadfast client retries through the injected 503s. Every
//! connection the server accepted is closed once the clients are gone.
#![allow(clippy::unwrap_used)]

mod support {
    pub mod server;
}

use std::time::Duration;

use steadfast::Backoff;
use steadfast::chaos::Chaos;
use steadfast_http::server::{ABORT_HEADER, ABORT_PERCENT_HEADER, ChaosLayer, DELAY_HEADER};
use support::server::OkServer;

async fn serve(chaos: Chaos) -> OkServer {
    OkServer::start(|router| {
        router.layer(
            ChaosLayer::new(chaos)
                .retry_after(Duration::ZERO)
                .max_asked_delay(Duration::from_millis(50)),
        )
    })
    .await
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
    let server = serve(chaos.clone()).await;
    let http = reqwest::Client::new();
    for _ in 0..50 {
        let r = http
            .get(&server.url)
            .header(ABORT_HEADER, "500")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    assert_eq!(server.served(), 50);
    assert_eq!(chaos.stats().drawn, 0);
    drop(http);
    assert!(server.all_closed().await, "a connection was left open");
}

#[tokio::test]
async fn asked_aborts_are_capped_by_the_configured_rate() {
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(7)
        .outcome(0.3, || ())
        .build()
        .unwrap();
    let server = serve(chaos.clone()).await;
    let url = &server.url;
    let http = reqwest::Client::new();
    let n = 400;
    let mut aborted = 0;
    for _ in 0..n {
        // Asks for 100 % (the header's default: the configured rate, 30 %).
        let r = http
            .get(url)
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
        server.served(),
        n - aborted,
        "an aborted request never reached the handler"
    );
    // A lower asked share is honoured, a higher one capped.
    let mut asked = 0;
    for _ in 0..n {
        let r = http
            .get(url)
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
            .get(url)
            .header(ABORT_HEADER, "a year")
            .header(DELAY_HEADER, "-5")
            .send()
            .await
            .unwrap();
        configured += u32::from(r.status() == 503);
    }
    assert!(within_bounds(configured, n, 0.3), "{configured} of {n}");
    drop(http);
    assert!(server.all_closed().await, "a connection was left open");
}

#[tokio::test]
async fn an_asked_delay_is_capped_and_needs_a_configured_latency() {
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(3)
        .latency(1.0, Duration::from_millis(1))
        .build()
        .unwrap();
    let server = serve(chaos.clone()).await;
    let http = reqwest::Client::new();
    let start = std::time::Instant::now();
    let r = http
        .get(&server.url)
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
    let other = serve(no_latency.clone()).await;
    http.get(&other.url)
        .header(DELAY_HEADER, "40")
        .send()
        .await
        .unwrap();
    assert_eq!(
        no_latency.stats().latencies,
        0,
        "a delay not configured cannot be asked for"
    );
    drop(http);
    assert!(server.all_closed().await, "a connection was left open");
    assert!(other.all_closed().await, "a connection was left open");
}

#[tokio::test]
async fn a_steadfast_client_retries_through_injected_503s() {
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(11)
        .outcome(0.5, || ())
        .build()
        .unwrap();
    let server = serve(chaos.clone()).await;
    let client = steadfast_http::Client::builder()
        .attempts(30)
        .backoff(Backoff::constant(Duration::from_millis(1)).build().unwrap())
        .build()
        .unwrap();
    for _ in 0..50 {
        let r = client.get(&server.url).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    assert_eq!(server.served(), 50);
    assert!(chaos.stats().outcomes >= 20, "{:?}", chaos.stats());
    drop(client);
    assert!(server.all_closed().await, "a connection was left open");
}
