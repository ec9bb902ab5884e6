//! A real axum server on 127.0.0.1 (an OS-picked port) with per-test fault
//! injection, and the hyper client stacks the tests call it through.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use bytes::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// What the server saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// Requests per path.
    requests: Mutex<HashMap<String, u32>>,
    /// Handlers running now.
    pub in_flight: AtomicUsize,
    /// Handlers dropped before they finished (their client went away).
    pub cancelled: AtomicUsize,
    /// The deadline header of each request, in order.
    pub deadlines: Mutex<Vec<Option<String>>>,
}

impl Seen {
    pub fn requests(&self, path: &str) -> u32 {
        self.requests
            .lock()
            .expect("lock")
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    fn count(&self, path: &str) -> u32 {
        let mut all = self.requests.lock().expect("lock");
        let n = all.entry(path.to_owned()).or_default();
        *n += 1;
        *n
    }
}

/// Counts a handler in flight; counts it cancelled if dropped unfinished.
pub struct Handler {
    seen: Arc<Seen>,
    finished: bool,
}

impl Handler {
    pub fn start(seen: &Arc<Seen>) -> Self {
        seen.in_flight.fetch_add(1, Ordering::SeqCst);
        Self {
            seen: Arc::clone(seen),
            finished: false,
        }
    }

    pub fn finish<T>(mut self, value: T) -> T {
        self.finished = true;
        value
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        self.seen.in_flight.fetch_sub(1, Ordering::SeqCst);
        if !self.finished {
            self.seen.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// `/flaky/{fails}`: 503 for the first `fails` requests to that path, then 200.
async fn flaky(
    State(seen): State<Arc<Seen>>,
    Path(fails): Path<u32>,
    headers: axum::http::HeaderMap,
) -> (StatusCode, &'static str) {
    let handler = Handler::start(&seen);
    seen.deadlines.lock().expect("lock").push(
        headers
            .get("x-steadfast-timeout")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    );
    let n = seen.count(&format!("/flaky/{fails}"));
    handler.finish(if n <= fails {
        (StatusCode::SERVICE_UNAVAILABLE, "try again")
    } else {
        (StatusCode::OK, "ok")
    })
}

/// `/upload`: counts requests and their body sizes; always 503.
async fn upload(State(seen): State<Arc<Seen>>, body: Bytes) -> (StatusCode, String) {
    let handler = Handler::start(&seen);
    seen.count("/upload");
    handler.finish((StatusCode::SERVICE_UNAVAILABLE, body.len().to_string()))
}

/// `/hedge`: the first request hangs for a minute; the others answer at once.
async fn hedge(State(seen): State<Arc<Seen>>) -> &'static str {
    let handler = Handler::start(&seen);
    if seen.count("/hedge") == 1 {
        tokio::time::sleep(Duration::from_secs(60)).await;
        return handler.finish("slow");
    }
    handler.finish("fast")
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    pub seen: Arc<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub async fn start() -> Self {
        let seen = Arc::new(Seen::default());
        let router = Router::new()
            .route("/flaky/{fails}", get(flaky))
            .route("/upload", post(upload))
            .route("/hedge", get(hedge))
            .with_state(Arc::clone(&seen));
        Self::serve(router, seen).await
    }

    pub async fn serve(router: Router, seen: Arc<Seen>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { addr, seen, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A plain hyper client (HTTP/1, no TLS) for bodies of type `B`.
pub fn hyper_client<B>() -> Client<HttpConnector, B>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Client::builder(TokioExecutor::new()).build_http()
}

/// Waits (in real time, at most 10 s) until `done` holds.
pub async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..1000 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done()
}
