//! A hyper client that keeps a small server from drowning: one adaptive
//! concurrency limit shared by every clone of the stack, which waits for a
//! slot in `poll_ready` (backpressure) rather than piling requests onto the
//! server. It starts its own server on 127.0.0.1 with 4 workers of 20 ms
//! each, and sends it 200 requests at once.
//!
//! ```sh
//! cargo run -p steadfast-tower --example limit_stack
//! ```
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use steadfast::limit::{ConcurrencyLimit, Gradient2};
use steadfast_tower::ConcurrencyLimitLayer;
use tower::{ServiceBuilder, ServiceExt};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = format!("http://{}/", small_server().await?);

    // Gradient2 with its published defaults, but free to go as low as one
    // slot and starting at 4; windows of 100 ms / 10 calls. Callers beyond
    // the limit wait in its queue (up to 500 of them, 10 s each).
    let gradient = Gradient2::builder().min_limit(1).initial_limit(4).build()?;
    let limit = ConcurrencyLimit::adaptive(gradient)
        .name("small-server")
        .window(Duration::from_millis(100), 10)
        .queue(500, Duration::from_secs(10))
        .build()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let stack = ServiceBuilder::new()
        .layer(ConcurrencyLimitLayer::waiting(limit.clone()))
        .service(client);

    let start = Instant::now();
    let calls: Vec<_> = (0..200)
        .map(|_| {
            // Each clone of the stack shares the one limit.
            let stack = stack.clone();
            let request = Request::get(url.as_str()).body(Empty::new());
            tokio::spawn(async move { stack.oneshot(request?).await.map_err(Error::from) })
        })
        .collect();
    let mut ok = 0;
    for call in calls {
        if call.await??.status().is_success() {
            ok += 1;
        }
    }
    let s = limit.snapshot();
    println!(
        "{ok} of 200 answered in {:?}; limit now {}, {} in flight, {} refused",
        start.elapsed(),
        s.limit,
        s.in_flight,
        s.refused
    );
    assert_eq!((ok, s.in_flight, s.refused), (200, 0, 0));
    Ok(())
}

/// A server that can work on 4 requests at once, 20 ms each; the rest wait.
async fn small_server() -> Result<std::net::SocketAddr, Error> {
    let workers = Arc::new(tokio::sync::Semaphore::new(4));
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let workers = Arc::clone(&workers);
            async move {
                let _worker = workers.acquire().await.map_err(|_| "closed")?;
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<_, &'static str>("done")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}
