//! `steadfast proxy` end to end: the real binary between real clients (raw
//! TCP HTTP/1.1 clients, and `steadfast get`, a retrying steadfast client)
//! and a real axum server on 127.0.0.1. Each fault is observed at the
//! client at its configured rate (within five standard deviations), the
//! proxy's summary agrees with what the clients saw, and every connection
//! (the proxy's and the server's) is closed after the run.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

mod command;

use command::{STEADFAST, code, stderr, steadfast};

/// A listener that counts the server's open connections.
struct Counting {
    inner: TcpListener,
    open: Arc<AtomicUsize>,
}

/// A server connection, counted while it lives.
struct Counted {
    io: TcpStream,
    open: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl axum::serve::Listener for Counting {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Counted, SocketAddr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        self.open.fetch_add(1, Ordering::SeqCst);
        (
            Counted {
                io,
                open: Arc::clone(&self.open),
            },
            addr,
        )
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// The size of `/big`'s body.
const BIG: usize = 64 * 1024;

/// Starts the server: `/` answers `hello`, `/big` [`BIG`] bytes. Its
/// address and its count of open connections.
async fn server() -> (SocketAddr, Arc<AtomicUsize>) {
    let inner = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = inner.local_addr().unwrap();
    let open = Arc::new(AtomicUsize::new(0));
    let listener = Counting {
        inner,
        open: Arc::clone(&open),
    };
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/big", get(|| async { big() }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, open)
}

fn big() -> Vec<u8> {
    (0..BIG).map(|i| (i % 251) as u8).collect()
}

/// A running `steadfast proxy -v`, its standard error read by a thread.
struct Proxy {
    child: Child,
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Starts `steadfast proxy -v --to TARGET FLAGS...` on a port the
    /// system picks, and waits for its `listening on` line.
    fn start(target: SocketAddr, flags: &[&str]) -> Self {
        let mut child = Command::new(STEADFAST)
            .args(["proxy", "-v", "--listen", "127.0.0.1:0", "--to"])
            .arg(target.to_string())
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        let addr = first
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .parse()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let reader = std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Self {
            child,
            addr,
            lines,
            reader: Some(reader),
        }
    }

    /// Waits (up to a generous bound) until the proxy has logged `n`
    /// connections closed.
    async fn wait_closed(&self, n: usize) {
        let start = Instant::now();
        loop {
            let closed = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.ends_with(": closed"))
                .count();
            if closed >= n {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{closed} of {n} connections closed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the proxy with SIGINT (Ctrl-C); its exit code and summary.
    fn stop(mut self) -> (i32, String) {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(killed.success());
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        let text = self.lines.lock().unwrap().join("\n");
        (status.code().expect("exited"), text)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a client saw of one request through the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    /// An HTTP response with this status, and its body.
    Response(u16, Vec<u8>),
    /// End-of-file before a byte.
    Empty,
    /// The connection was reset.
    Reset,
    /// Nothing came within the client's patience.
    Stalled,
}

/// How long a client waits for an answer before it calls it a stall: far
/// beyond what a forwarded request over loopback takes.
const PATIENCE: Duration = Duration::from_secs(3);

/// One `GET path` over a connection of its own, as a raw HTTP/1.1 client.
async fn fetch(proxy: SocketAddr, path: &str) -> Seen {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return Seen::Reset;
    }
    let mut buf = Vec::new();
    match tokio::time::timeout(PATIENCE, stream.read_to_end(&mut buf)).await {
        Err(_) => Seen::Stalled,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => Seen::Reset,
        Ok(Err(e)) => panic!("unexpected error {e}"),
        Ok(Ok(_)) if buf.is_empty() => Seen::Empty,
        Ok(Ok(_)) => parse(&buf),
    }
}

/// The status and body of a whole HTTP/1.1 response (`Connection: close`,
/// so the body runs to the end).
fn parse(bytes: &[u8]) -> Seen {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = std::str::from_utf8(&bytes[..head_end]).unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let mut body = bytes[head_end + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = unchunk(&body);
    }
    Seen::Response(status, body)
}

fn unchunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = bytes.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&bytes[..line_end]).unwrap(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&bytes[line_end + 2..line_end + 2 + size]);
        bytes = &bytes[line_end + 2 + size + 2..];
    }
}

/// `n` requests at once, each over its own connection.
async fn fetch_many(proxy: SocketAddr, path: &str, n: usize) -> Vec<Seen> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let path = path.to_owned();
            tokio::spawn(async move { fetch(proxy, &path).await })
        })
        .collect();
    let mut seen = Vec::with_capacity(n);
    for task in tasks {
        seen.push(task.await.unwrap());
    }
    seen
}

/// Whether `hits` of `n` is within five standard deviations of rate `p`.
fn within(hits: usize, n: usize, p: f64) -> bool {
    let (hits, n) = (hits as f64, n as f64);
    (hits - n * p).abs() <= 5.0 * (n * p * (1.0 - p)).sqrt()
}

/// The number in the summary just before `label` (`"3 reset"` → 3).
fn summary_count(text: &str, label: &str) -> usize {
    // The summary is the end of standard error, after the `-v` lines.
    let summary = &text[text.rfind("stopped after").unwrap_or(0)..];
    let at = summary
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {summary}"));
    summary[..at]
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .unwrap()
}

/// Waits (up to a generous bound) until the server has no connection open.
async fn wait_zero(open: &AtomicUsize) {
    let start = Instant::now();
    while open.load(Ordering::SeqCst) != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "server connections stay open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_faults_reach_clients_at_their_rates_and_every_connection_closes() {
    const N: usize = 400;
    let (target, server_open) = server().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let json_path = dir.path().join("summary.json");
    let json_arg = json_path.to_str().expect("a UTF-8 path").to_owned();
    let proxy = Proxy::start(
        target,
        &[
            "--refuse",
            "0.2",
            "--stall",
            "20%",
            "--reset",
            "0.2",
            "--seed",
            "11",
            "--summary-json",
            &json_arg,
        ],
    );
    let seen = fetch_many(proxy.addr, "/", N).await;
    let count = |what: &dyn Fn(&Seen) -> bool| seen.iter().filter(|s| what(s)).count();
    let refused = count(&|s| *s == Seen::Empty);
    let stalled = count(&|s| *s == Seen::Stalled);
    let reset = count(&|s| *s == Seen::Reset);
    let ok = count(&|s| *s == Seen::Response(200, b"hello".to_vec()));
    assert_eq!(refused + stalled + reset + ok, N, "{seen:?}");
    // Refuse wins over stall, stall over reset; each drawn on its own.
    assert!(within(refused, N, 0.2), "refused {refused}");
    assert!(within(stalled, N, 0.8 * 0.2), "stalled {stalled}");
    assert!(within(reset, N, 0.8 * 0.8 * 0.2), "reset {reset}");
    proxy.wait_closed(N).await;
    wait_zero(&server_open).await;
    let (code, summary) = proxy.stop();
    assert_eq!(code, 0, "{summary}");
    // The proxy's own account agrees with the clients', exactly.
    assert!(summary.contains("stopped after"), "{summary}");
    assert!(summary.contains("(Ctrl-C)"), "{summary}");
    assert_eq!(summary_count(&summary, "accepted"), N);
    assert_eq!(summary_count(&summary, "open at the stop"), 0);
    assert_eq!(summary_count(&summary, "refused"), refused);
    assert_eq!(summary_count(&summary, "stalled"), stalled);
    assert_eq!(summary_count(&summary, "reset,"), reset);
    assert!(summary.contains("--seed 11"), "{summary}");
    // The JSON summary says the same, for a harness that will not parse text.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).expect("the JSON summary"))
            .expect("valid JSON");
    assert_eq!(json["connections"]["accepted"], N);
    assert_eq!(json["connections"]["open_at_stop"], 0);
    assert_eq!(json["injected"]["refused"], refused);
    assert_eq!(json["injected"]["stalled"], stalled);
    assert_eq!(json["injected"]["reset"], reset);
    assert_eq!(
        (json["seed"].as_u64(), json["mode"].as_str()),
        (Some(11), Some("tcp"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_is_added_to_its_share_of_connections() {
    const N: usize = 100;
    let latency = Duration::from_millis(400);
    let (target, server_open) = server().await;
    let proxy = Proxy::start(
        target,
        &[
            "--latency",
            "400ms",
            "--jitter",
            "100ms",
            "--latency-rate",
            "0.5",
            "--seed",
            "3",
        ],
    );
    let tasks: Vec<_> = (0..N)
        .map(|_| {
            let addr = proxy.addr;
            tokio::spawn(async move {
                let start = Instant::now();
                let seen = fetch(addr, "/").await;
                (seen, start.elapsed())
            })
        })
        .collect();
    let mut slow = 0;
    for task in tasks {
        let (seen, took) = task.await.unwrap();
        assert_eq!(seen, Seen::Response(200, b"hello".to_vec()));
        slow += usize::from(took >= latency);
    }
    assert!(within(slow, N, 0.5), "slow {slow}");
    proxy.wait_closed(N).await;
    wait_zero(&server_open).await;
    let (code, summary) = proxy.stop();
    assert_eq!(code, 0);
    // Every slowed connection took at least the latency; a few others may
    // have been slow on their own, never the other way round.
    assert!(summary_count(&summary, "slowed") <= slow, "{summary}");
    assert!(
        within(summary_count(&summary, "slowed"), N, 0.5),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bandwidth_paces_what_the_server_sends_and_keeps_every_byte() {
    let (target, server_open) = server().await;
    let proxy = Proxy::start(target, &["--bandwidth", "64KiB"]);
    let start = Instant::now();
    let seen = fetch(proxy.addr, "/big").await;
    let took = start.elapsed();
    assert_eq!(seen, Seen::Response(200, big()));
    // 64 KiB at 64 KiB a second: all but the first twentieth of a second's
    // worth waits for its turn.
    assert!(took >= Duration::from_millis(900), "took {took:?}");
    proxy.wait_closed(1).await;
    wait_zero(&server_open).await;
    let (_, summary) = proxy.stop();
    assert_eq!(summary_count(&summary, "throttled"), 1, "{summary}");
    assert!(summary_count(&summary, "to the clients") > BIG, "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_with_a_limit_is_closed_after_it() {
    let (target, _) = server().await;
    let proxy = Proxy::start(target, &["--stall", "1", "--stall-for", "300ms"]);
    let start = Instant::now();
    let seen = fetch(proxy.addr, "/").await;
    assert_eq!(seen, Seen::Empty);
    assert!(start.elapsed() >= Duration::from_millis(300));
    proxy.wait_closed(1).await;
    let (_, summary) = proxy.stop();
    assert_eq!(summary_count(&summary, "stalled"), 1, "{summary}");
    assert_eq!(summary_count(&summary, "failed to reach"), 0, "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_mode_injects_statuses_at_their_rate_with_retry_after() {
    const N: usize = 400;
    let (target, server_open) = server().await;
    let proxy = Proxy::start(
        target,
        &[
            "--http",
            "--status",
            "503",
            "--status-rate",
            "0.3",
            "--retry-after",
            "2s",
            "--seed",
            "5",
        ],
    );
    let seen = fetch_many(proxy.addr, "/", N).await;
    let injected = seen
        .iter()
        .filter(|s| matches!(s, Seen::Response(503, _)))
        .count();
    let ok = seen
        .iter()
        .filter(|s| **s == Seen::Response(200, b"hello".to_vec()))
        .count();
    assert_eq!(injected + ok, N, "{seen:?}");
    assert!(within(injected, N, 0.3), "injected {injected}");
    proxy.wait_closed(N).await;
    wait_zero(&server_open).await;
    let (code, summary) = proxy.stop();
    assert_eq!(code, 0);
    assert_eq!(
        summary_count(&summary, "answered with the injected status"),
        injected
    );
    assert_eq!(summary_count(&summary, "forwarded"), ok);
    assert_eq!(summary_count(&summary, "open at the stop"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_mode_sends_retry_after_and_never_follows_an_absolute_uri() {
    let (target, _) = server().await;
    let proxy = Proxy::start(
        target,
        &["--http", "--status", "429", "--retry-after", "1500ms"],
    );
    let mut stream = TcpStream::connect(proxy.addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 429"), "{text}");
    assert!(text.contains("retry-after: 2\r\n"), "{text}"); // rounded up
    drop(proxy);

    // Without faults: an absolute URI naming another host still goes to
    // the target (the only place the proxy forwards to).
    let proxy = Proxy::start(target, &["--http"]);
    let mut stream = TcpStream::connect(proxy.addr).await.unwrap();
    stream
        .write_all(b"GET http://203.0.113.9:9/ HTTP/1.1\r\nHost: 203.0.113.9:9\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf).await.unwrap();
    assert_eq!(parse(&buf), Seen::Response(200, b"hello".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_is_down_gets_502_in_http_mode() {
    // A port with no listener: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let proxy = Proxy::start(port, &["--http"]);
    let seen = fetch(proxy.addr, "/").await;
    let Seen::Response(502, body) = seen else {
        panic!("{seen:?}")
    };
    assert!(String::from_utf8_lossy(&body).contains("cannot reach the target"));
    proxy.wait_closed(1).await;
    let (_, summary) = proxy.stop();
    assert_eq!(summary_count(&summary, "failed to reach"), 1, "{summary}");
}

/// `steadfast get URL` retrying quickly: its exit code.
fn steadfast_get(url: &str) -> i32 {
    let out = steadfast(&[
        "get",
        "--attempts",
        "30",
        "--backoff",
        "constant:delay=1ms",
        url,
    ]);
    assert!(out.stdout == b"hello", "{}", stderr(&out));
    code(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steadfast_client_retries_through_injected_503s_and_resets_to_success() {
    let (target, server_open) = server().await;
    let statuses = Proxy::start(
        target,
        &[
            "--http",
            "--status",
            "503",
            "--status-rate",
            "0.5",
            "--seed",
            "9",
        ],
    );
    let resets = Proxy::start(
        target,
        &["--reset", "0.5", "--refuse", "0.2", "--seed", "9"],
    );
    for proxy in [&statuses, &resets] {
        let url = format!("http://{}/", proxy.addr);
        let urls: Vec<String> = (0..20).map(|_| url.clone()).collect();
        let codes = tokio::task::spawn_blocking(move || {
            urls.iter().map(|u| steadfast_get(u)).collect::<Vec<_>>()
        })
        .await
        .unwrap();
        assert!(codes.iter().all(|&c| c == 0), "{codes:?}");
    }
    wait_zero(&server_open).await;
    let (_, status_summary) = statuses.stop();
    assert!(summary_count(&status_summary, "answered with the injected status") > 0);
    assert_eq!(
        summary_count(&status_summary, "forwarded"),
        20,
        "{status_summary}"
    );
    let (_, reset_summary) = resets.stop();
    assert!(
        summary_count(&reset_summary, "reset,") > 0,
        "{reset_summary}"
    );
    assert_eq!(
        summary_count(&reset_summary, "open at the stop"),
        0,
        "{reset_summary}"
    );
}

#[test]
fn bad_flags_are_usage_errors_and_nothing_listens() {
    for args in [
        &["proxy"][..],
        &["proxy", "--to", "nowhere"],
        &["proxy", "--to", "127.0.0.1:9", "--refuse", "1.5"],
        &["proxy", "--to", "127.0.0.1:9", "--refuse", "often"],
        &["proxy", "--to", "127.0.0.1:9", "--status", "503"],
        &[
            "proxy",
            "--to",
            "127.0.0.1:9",
            "--http",
            "--bandwidth",
            "1KiB",
        ],
        &["proxy", "--to", "127.0.0.1:9", "--jitter", "5ms"],
        &["proxy", "--to", "127.0.0.1:9", "--http", "--status", "700"],
        &["proxy", "--to", "127.0.0.1:9", "--latency", "soon"],
        &["proxy", "--to", "127.0.0.1:9", "--listen", "localhost"],
        &["proxy", "--to", "127.0.0.1:9", "--max-connections", "0"],
    ] {
        let out = steadfast(args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("listening on"), "{args:?}");
    }
}

#[test]
fn an_address_in_use_is_an_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = steadfast(&[
        "proxy",
        "--listen",
        &addr,
        "--to",
        "127.0.0.1:9",
        "--duration",
        "1s",
    ]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("cannot listen on"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn duration_stops_the_proxy_with_a_summary() {
    let out = steadfast(&[
        "proxy",
        "--to",
        "127.0.0.1:9",
        "--duration",
        "200ms",
        "--seed",
        "4",
    ]);
    assert_eq!(code(&out), 0);
    let text = stderr(&out);
    assert!(text.contains("(--duration)"), "{text}");
    assert!(text.contains("0 accepted"), "{text}");
    assert!(text.contains("--seed 4"), "{text}");
}

#[test]
fn help_documents_every_fault_with_an_example() {
    let out = steadfast(&["proxy", "--help"]);
    assert_eq!(code(&out), 0);
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--refuse",
        "--reset",
        "--stall",
        "--latency",
        "--bandwidth",
        "--status",
    ] {
        let example = help
            .lines()
            .any(|l| l.trim_start().starts_with("steadfast proxy") && l.contains(flag));
        assert!(example, "no example of {flag}:\n{help}");
    }
    assert!(help.contains("Exit status"), "{help}");
}
