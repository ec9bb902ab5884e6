//! The client against a local server that fails: `cargo run -p steadfast-http --example flaky`.
//!
//! The server answers 503 twice (the second time with `Retry-After: 1`),
//! then 200; a POST to it is sent once; and a one-year `Retry-After` under
//! a 2 s deadline gives up at once.
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::any;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let hits = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&hits);
    let router = Router::new()
        .route(
            "/flaky",
            any(move || {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                async move {
                    match n {
                        0 => StatusCode::SERVICE_UNAVAILABLE.into_response(),
                        1 => (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "1")])
                            .into_response(),
                        _ => "hello".into_response(),
                    }
                }
            }),
        )
        .route(
            "/busy",
            any(|| async { (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "31536000")]) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });

    let client = steadfast_http::Client::builder()
        .attempts(4)
        .deadline(Duration::from_secs(2))
        .build()?;

    let response = client.get(format!("http://{addr}/flaky")).send().await?;
    let report = response.report();
    println!(
        "GET /flaky: {} after {} attempts, {:?} waiting (Retry-After honoured)",
        response.status(),
        report.attempts,
        report.total_wait
    );
    println!("body: {}", response.text().await?);

    hits.store(0, Ordering::SeqCst);
    let err = client
        .post(format!("http://{addr}/flaky"))
        .body("pay 42")
        .send()
        .await
        .expect_err("a POST is not retried");
    println!("POST /flaky: {err}");

    let err = client
        .get(format!("http://{addr}/busy"))
        .send()
        .await
        .expect_err("cannot wait a year");
    println!("GET /busy: {err}");
    Ok(())
}
