//! A server that breaks on purpose, to test a client's resilience against:
//! an axum app under `steadfast_http::server::ChaosLayer`, switched on,
//! seeded, injecting a 200 ms latency into 20 % of the requests and a 503
//! with `Retry-After: 1` into 30 %, and honouring Envoy's fault headers
//! within those rates. It prints what it injected when stopped (Ctrl-C).
//!
//! ```text
//! cargo run -p steadfast-http --example chaos_server -- 127.0.0.1:8080
//! ```
#![allow(clippy::print_stdout)]

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use steadfast::chaos::Chaos;
use steadfast_http::server::ChaosLayer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let chaos = Chaos::builder()
        .enabled(true) // a chaos is off unless turned on
        .seed(7)
        .latency(0.2, Duration::from_millis(200))
        .outcome(0.3, || ())
        .build()?;
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(ChaosLayer::new(chaos.clone()).retry_after(Duration::from_secs(1)));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "serving on http://{}/ with faults on; Ctrl-C stops",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    let s = chaos.stats();
    println!(
        "{} requests drew: {} latencies, {} injected statuses, {} at the ceiling",
        s.drawn, s.latencies, s.outcomes, s.at_ceiling
    );
    Ok(())
}
