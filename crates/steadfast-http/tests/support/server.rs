//! A real axum server on 127.0.0.1 (an OS-picked port) with per-test fault
//! injection, counting requests per path, open connections and cancelled
//! handlers, and recording each request's deadline header; a server of one
//! `GET /` under a layer of the test's (chaos, rate limit), counting the
//! requests it served and its open connections; and a raw TCP server that
//! resets connections mid-response.

#![allow(dead_code)] // each test file uses a part

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// What the server saw.
#[derive(Debug, Default)]
pub struct Seen {
    requests: Mutex<HashMap<String, u32>>,
    /// Connections open now.
    pub open_connections: AtomicUsize,
    /// Connections accepted so far.
    pub accepted: AtomicUsize,
    /// Handlers dropped before they finished (their client went away).
    pub cancelled: AtomicUsize,
    /// The `x-steadfast-timeout` header of each request, in order.
    pub deadlines: Mutex<Vec<Option<String>>>,
    /// The method of each request, in order.
    pub methods: Mutex<Vec<Method>>,
    /// The headers of each request, in order.
    pub headers: Mutex<Vec<HeaderMap>>,
}

impl Seen {
    /// Requests to `path` so far.
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

    pub fn deadlines(&self) -> Vec<Option<String>> {
        self.deadlines.lock().expect("lock").clone()
    }
}

/// Counts a handler cancelled if it is dropped unfinished.
struct Handler {
    seen: Arc<Seen>,
    finished: bool,
}

impl Handler {
    fn finish<T>(mut self, value: T) -> T {
        self.finished = true;
        value
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        if !self.finished {
            self.seen.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// `/{kind}/{n}/{arg}` (any method):
/// - `fail/N/STATUS`: STATUS for the first N requests to this path, then 200 `ok`;
/// - `fail-echo/N/_`: 503 for the first N requests, then 200 with the request body;
/// - `retry-after-secs/N/VALUE`: 503 with `Retry-After: VALUE` N times, then 200;
/// - `retry-after-date/N/SECS`: 503 with `Retry-After:` the date SECS from now, N times, then 200;
/// - `random/PERCENT/_`: 503 with probability PERCENT %, else 200;
/// - `hedge/_/_`: the first request hangs for a minute, the others answer `fast` at once;
/// - `hang/_/_`: hangs for a minute;
/// - `echo/_/_`: 200 with the request body.
async fn handle(
    State(seen): State<Arc<Seen>>,
    Path((kind, n, arg)): Path<(String, u32, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let handler = Handler {
        seen: Arc::clone(&seen),
        finished: false,
    };
    seen.deadlines.lock().expect("lock").push(
        headers
            .get("x-steadfast-timeout")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    );
    seen.methods.lock().expect("lock").push(method);
    seen.headers.lock().expect("lock").push(headers.clone());
    let count = seen.count(uri.path());
    let response = match kind.as_str() {
        "fail" if count <= n => {
            let status = arg
                .parse::<u16>()
                .ok()
                .and_then(|s| StatusCode::from_u16(s).ok());
            (
                status.unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                "failure",
            )
                .into_response()
        }
        "fail-echo" if count <= n => (StatusCode::SERVICE_UNAVAILABLE, "failure").into_response(),
        "fail-echo" => body.into_response(),
        "retry-after-secs" if count <= n => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", arg)],
            "later",
        )
            .into_response(),
        "retry-after-date" if count <= n => {
            let secs = arg.parse::<u64>().unwrap_or(0);
            let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(secs));
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [("retry-after", at)],
                "later",
            )
                .into_response()
        }
        "random" if fastrand::u32(0..100) < n => {
            (StatusCode::SERVICE_UNAVAILABLE, "unlucky").into_response()
        }
        "hedge" if count == 1 => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            "slow".into_response()
        }
        "hedge" => "fast".into_response(),
        "hang" => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            "late".into_response()
        }
        "echo" => body.into_response(),
        _ => "ok".into_response(),
    };
    handler.finish(response)
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
            .route("/{kind}/{n}/{arg}", any(handle))
            .with_state(Arc::clone(&seen));
        let (addr, task) = serve_counting(router, Arc::clone(&seen)).await;
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

/// Serves `router` on 127.0.0.1 (an OS-picked port), counting its
/// connections in `seen`.
async fn serve_counting(
    router: Router,
    seen: Arc<Seen>,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("local address");
    let counting = Counting {
        inner: listener,
        seen,
    };
    let task = tokio::spawn(async move {
        let _ = axum::serve(counting, router).await;
    });
    (addr, task)
}

/// A running server of one route, `GET /` answering `ok`, under the
/// layers of the test's choosing.
pub struct OkServer {
    /// `http://127.0.0.1:PORT/`.
    pub url: String,
    served: Arc<AtomicU32>,
    seen: Arc<Seen>,
    task: tokio::task::JoinHandle<()>,
}

impl OkServer {
    /// Serves `GET /` under what `wrap` adds to its router (a
    /// `.layer(...)`, or nothing), counting the requests that reached the
    /// handler and the open connections.
    pub async fn start(wrap: impl FnOnce(Router) -> Router) -> Self {
        let served = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&served);
        let router = Router::new().route(
            "/",
            get(move || {
                let counter = Arc::clone(&counter);
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    "ok"
                }
            }),
        );
        let seen = Arc::new(Seen::default());
        let (addr, task) = serve_counting(wrap(router), Arc::clone(&seen)).await;
        Self {
            url: format!("http://{addr}/"),
            served,
            seen,
            task,
        }
    }

    /// Requests that reached the handler.
    pub fn served(&self) -> u32 {
        self.served.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.seen.accepted.load(Ordering::SeqCst)
    }

    /// Whether it accepted connections and every one of them has closed,
    /// waiting for that as [`eventually`] does (drop the clients first:
    /// they pool theirs). `false` if it never accepted one: then there is
    /// nothing to prove.
    pub async fn all_closed(&self) -> bool {
        self.accepted() > 0
            && eventually(|| self.seen.open_connections.load(Ordering::SeqCst) == 0).await
    }
}

impl Drop for OkServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A listener that counts open connections.
struct Counting {
    inner: TcpListener,
    seen: Arc<Seen>,
}

impl axum::serve::Listener for Counting {
    type Io = CountedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Ok((stream, addr)) = self.inner.accept().await {
                self.seen.accepted.fetch_add(1, Ordering::SeqCst);
                self.seen.open_connections.fetch_add(1, Ordering::SeqCst);
                return (
                    CountedStream {
                        inner: stream,
                        seen: Arc::clone(&self.seen),
                    },
                    addr,
                );
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

struct CountedStream {
    inner: TcpStream,
    seen: Arc<Seen>,
}

impl Drop for CountedStream {
    fn drop(&mut self) {
        self.seen.open_connections.fetch_sub(1, Ordering::SeqCst);
    }
}

impl AsyncRead for CountedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A raw HTTP/1.1 server whose first `resets` connections are reset in the
/// middle of the response head; later ones get `200 ok`.
pub struct ResettingServer {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl ResettingServer {
    pub async fn start(resets: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&connections);
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0_u8; 4096];
                    let _ = stream.read(&mut buf).await;
                    if n < resets {
                        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Le").await;
                        let _ = stream.flush().await;
                        // A zero linger turns the close into a reset (RST).
                        let _ = stream.set_zero_linger();
                        drop(stream);
                    } else {
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
                            .await;
                    }
                });
            }
        });
        Self {
            addr,
            connections,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for ResettingServer {
    fn drop(&mut self) {
        self.task.abort();
    }
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

/// A base URL on 127.0.0.1 nothing listens on (a port the OS picked, then
/// freed): connections to it are refused.
pub async fn refusing() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    drop(listener);
    url
}
