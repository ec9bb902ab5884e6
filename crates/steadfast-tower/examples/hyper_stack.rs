//! A hyper client that survives a flaky server: a `ServiceBuilder` stack
//! with an overall deadline, retries with backoff, and the time left sent on
//! every attempt. It starts its own server on 127.0.0.1, whose `/flaky` route
//! answers 503 twice before it answers 200.
//!
//! ```sh
//! cargo run -p steadfast-tower --example hyper_stack
//! ```
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use steadfast::deadline::DeadlineHeader;
use steadfast::{Backoff, RetryPolicy, Verdict};
use steadfast_tower::replay::HttpReplay;
use steadfast_tower::{DeadlineLayer, RetryLayer, SetDeadlineHeaderLayer};
use tower::{ServiceBuilder, ServiceExt};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = format!("http://{}/flaky", flaky_server().await?);

    // Up to 4 attempts (counting the first), 50 ms then 100 ms then 200 ms
    // apart (with full jitter), all within 5 s.
    let policy = RetryPolicy::builder()
        .max_attempts(4)
        .backoff(
            Backoff::exponential()
                .initial(Duration::from_millis(50))
                .build()?,
        )
        .max_elapsed(Duration::from_secs(5))
        .build()?;
    let client = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(5)))
        .layer(
            RetryLayer::new(policy)
                .replay(HttpReplay::default()) // bodies up to 64 KiB are sent again
                .classify(|outcome: &Result<Response<Incoming>, _>| match outcome {
                    Ok(r) if r.status() == StatusCode::SERVICE_UNAVAILABLE => Verdict::Retry,
                    Ok(_) => Verdict::Success,
                    Err(_) => Verdict::Retry, // connection refused, reset, ...
                })
                .name("flaky"),
        )
        .layer(SetDeadlineHeaderLayer::new(DeadlineHeader::DEFAULT)?)
        .service(Client::builder(TokioExecutor::new()).build_http());

    let response = client
        .oneshot(Request::get(url).body(Full::<Bytes>::default())?)
        .await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    println!("{status}: {}", String::from_utf8_lossy(&body));
    Ok(())
}

/// A server on 127.0.0.1 whose `/flaky` route answers 503 twice, then 200;
/// it prints the time left each request said it had.
async fn flaky_server() -> Result<std::net::SocketAddr, Error> {
    let calls = Arc::new(AtomicU32::new(0));
    let app = axum::Router::new().route(
        "/flaky",
        axum::routing::get(move |headers: HeaderMap| {
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            let left = headers.get("x-steadfast-timeout").cloned();
            async move {
                println!("server: request {n}, time left {left:?}");
                if n <= 2 {
                    (StatusCode::SERVICE_UNAVAILABLE, "busy, try again")
                } else {
                    (StatusCode::OK, "hello")
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}
