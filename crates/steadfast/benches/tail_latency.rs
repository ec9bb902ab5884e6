//! Tail-latency experiment: hedged requests against a loopback server with
//! a heavy tail (98 % of requests take ~1 ms, 2 % take ~200 ms, chosen per
//! request by a seeded generator), with 50 requests in flight.
//!
//! Compares: no hedging; steadfast with a fixed delay; steadfast with the
//! adaptive delay (a running latency quantile); tower's `Hedge`. Prints p50,
//! p99, p99.9 and the extra requests each variant sent.
//!
//! ```sh
//! cargo bench -p steadfast --bench tail_latency
//! ```
//!
//! A measurement harness (a bench target of its own, not criterion): it
//! measures, it asserts nothing, and takes a minute or so. For a hedged call
//! to read, see `examples/hedged_call.rs`.
#![allow(clippy::print_stdout)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures::StreamExt;
use steadfast::policy::AdaptiveDelay;
use steadfast::{Attempt, HedgePolicy, Hedgeable};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const REQUESTS: usize = 10_000;
const WARMUP: usize = 2_000;
const WARMUP_TIME: Duration = Duration::from_millis(1500);
const IN_FLIGHT: usize = 50;
const SLOW_SHARE: f64 = 0.02;
const FAST: Duration = Duration::from_millis(1);
const SLOW: Duration = Duration::from_millis(200);
const SEED: u64 = 0x5EED_F00D;
/// The latency quantile both adaptive hedgers wait for (override with the
/// `QUANTILE` environment variable).
fn quantile_setting() -> f64 {
    std::env::var("QUANTILE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.9)
}

/// The fixed hedging delay in ms (override with `FIXED_MS`).
fn fixed_ms() -> u64 {
    std::env::var("FIXED_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

/// Copies per call for steadfast, counting the first (override with `ATTEMPTS`).
fn attempts() -> u32 {
    std::env::var("ATTEMPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// splitmix64: the server's per-request random draw, from the seed and the
/// request's arrival number.
fn draw(n: u64) -> f64 {
    let mut z = SEED.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A line-based server: for each request line, wait the drawn latency, then
/// echo. Stops a connection early when the client hangs up.
async fn serve(listener: TcpListener, received: Arc<AtomicU64>) {
    while let Ok((socket, _)) = listener.accept().await {
        let _ = socket.set_nodelay(true);
        let received = Arc::clone(&received);
        tokio::spawn(async move {
            let mut conn = BufReader::new(socket);
            let mut line = String::new();
            loop {
                line.clear();
                match conn.read_line(&mut line).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let n = received.fetch_add(1, Ordering::Relaxed);
                let latency = if draw(n) < SLOW_SHARE { SLOW } else { FAST };
                let mut probe = [0u8; 1];
                tokio::select! {
                    () = tokio::time::sleep(latency) => {}
                    _ = conn.read(&mut probe) => return, // the client gave up
                }
                if conn.get_mut().write_all(line.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Idle client connections, reused between requests; a cancelled request
/// drops (closes) its connection.
#[derive(Clone)]
struct Client {
    addr: std::net::SocketAddr,
    idle: Arc<Mutex<Vec<BufReader<TcpStream>>>>,
}

impl Client {
    async fn request(self, id: u64) -> std::io::Result<u64> {
        let pooled = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut conn = match pooled {
            Some(c) => c,
            None => {
                let s = TcpStream::connect(self.addr).await?;
                s.set_nodelay(true)?;
                BufReader::new(s)
            }
        };
        conn.get_mut()
            .write_all(format!("{id}\n").as_bytes())
            .await?;
        let mut line = String::new();
        if conn.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(conn);
        line.trim()
            .parse()
            .map_err(|_| std::io::ErrorKind::InvalidData.into())
    }
}

impl tower::Service<u64> for Client {
    type Response = u64;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<u64>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, id: u64) -> Self::Future {
        Box::pin(self.clone().request(id))
    }
}

#[derive(Clone)]
struct CloneAll;

impl tower::hedge::Policy<u64> for CloneAll {
    fn clone_request(&self, req: &u64) -> Option<u64> {
        Some(*req)
    }
    fn can_retry(&self, _: &u64) -> bool {
        true
    }
}

struct Report {
    name: String,
    p50: Duration,
    p95: Duration,
    p99: Duration,
    p999: Duration,
    extra: f64,
    errors: usize,
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Runs `count` requests, `IN_FLIGHT` at a time; `call(id)` makes one.
async fn run<F, Fut, E>(count: usize, first_id: u64, mut call: F) -> (Vec<Duration>, usize)
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<u64, E>>,
{
    let results: Vec<_> = futures::stream::iter(0..count as u64)
        .map(|i| {
            let fut = call(first_id + i);
            async move {
                let start = Instant::now();
                let ok = fut.await.is_ok();
                (start.elapsed(), ok)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let errors = results.iter().filter(|(_, ok)| !ok).count();
    (results.into_iter().map(|(d, _)| d).collect(), errors)
}

async fn measure<F, Fut, E>(name: &str, received: &AtomicU64, mut call: F) -> Report
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<u64, E>>,
{
    // Warm up (and let adaptive delays learn) for at least WARMUP requests
    // and WARMUP_TIME, so that tower's per-period histogram is full too.
    let warm = Instant::now();
    let mut warmed = 0;
    while warmed < WARMUP || warm.elapsed() < WARMUP_TIME {
        let _ = run(WARMUP, 0, &mut call).await;
        warmed += WARMUP;
    }
    let before = received.load(Ordering::Relaxed);
    let (mut latencies, errors) = run(REQUESTS, 1_000_000, &mut call).await;
    let sent = received.load(Ordering::Relaxed) - before;
    latencies.sort();
    Report {
        name: name.to_owned(),
        p50: quantile(&latencies, 0.50),
        p95: quantile(&latencies, 0.95),
        p99: quantile(&latencies, 0.99),
        p999: quantile(&latencies, 0.999),
        extra: (sent as f64 - REQUESTS as f64) / REQUESTS as f64,
        errors,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// The median of one metric across rounds.
fn median<T: Copy + PartialOrd>(mut values: Vec<T>) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values[values.len() / 2]
}

/// Rounds per variant (override with `ROUNDS`); the table shows medians.
fn rounds() -> usize {
    std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let received = Arc::new(AtomicU64::new(0));
    tokio::spawn(serve(listener, Arc::clone(&received)));
    let client = Client {
        addr,
        idle: Arc::default(),
    };

    let quantile_q = quantile_setting();
    let fixed_delay = fixed_ms();
    let copies = attempts();
    let fixed = HedgePolicy::builder(Duration::from_millis(fixed_delay))
        .max_attempts(copies)
        .build()?;
    let adaptive = Arc::new(
        AdaptiveDelay::builder(Duration::from_millis(10))
            .quantile(quantile_q)
            .window(1000)
            .min_samples(100)
            .build()?,
    );
    let adaptive_policy = HedgePolicy::builder(Arc::clone(&adaptive))
        .max_attempts(copies)
        .build()?;
    let mut tower_hedge = tower::hedge::Hedge::new(
        client.clone(),
        CloneAll,
        100,
        quantile_q as f32,
        Duration::from_millis(500),
    );
    let names = [
        "no hedging".to_owned(),
        format!("steadfast, fixed {fixed_delay} ms, {copies} copies"),
        format!("steadfast, adaptive q{quantile_q}, {copies} copies"),
        format!("tower::hedge::Hedge, q{quantile_q}"),
    ];
    let mut runs: Vec<Vec<Report>> = (0..names.len()).map(|_| Vec::new()).collect();
    let mut learned = Vec::new();

    // The variants take turns, round after round, so that a change in the
    // machine's load hits them all alike.
    for _ in 0..rounds() {
        runs[0].push(measure(&names[0], &received, |id| client.clone().request(id)).await);
        runs[1].push(
            measure(&names[1], &received, |id| {
                let client = client.clone();
                (move |_: Attempt| client.clone().request(id))
                    .hedge(&fixed)
                    .into_future()
            })
            .await,
        );
        runs[2].push(
            measure(&names[2], &received, |id| {
                let client = client.clone();
                (move |_: Attempt| client.clone().request(id))
                    .hedge(&adaptive_policy)
                    .into_future()
            })
            .await,
        );
        learned.push(adaptive.current());
        runs[3].push(
            measure(&names[3], &received, |id| {
                let mut cx = Context::from_waker(Waker::noop());
                // The client is always ready, so the hedge is too.
                let ready = tower::Service::poll_ready(&mut tower_hedge, &mut cx);
                assert!(matches!(ready, Poll::Ready(Ok(()))));
                tower::Service::call(&mut tower_hedge, id)
            })
            .await,
        );
    }

    let reports: Vec<Report> = runs
        .into_iter()
        .zip(&names)
        .map(|(r, name)| Report {
            name: name.clone(),
            p50: median(r.iter().map(|x| x.p50).collect()),
            p95: median(r.iter().map(|x| x.p95).collect()),
            p99: median(r.iter().map(|x| x.p99).collect()),
            p999: median(r.iter().map(|x| x.p999).collect()),
            extra: median(r.iter().map(|x| x.extra).collect()),
            errors: r.iter().map(|x| x.errors).sum(),
        })
        .collect();

    println!(
        "{REQUESTS} requests per variant and round, {} rounds (medians shown), {IN_FLIGHT} in flight, \
         {:.0} % take {} ms, the rest {} ms",
        learned.len(),
        SLOW_SHARE * 100.0,
        SLOW.as_millis(),
        FAST.as_millis()
    );
    let learned: Vec<String> = learned.into_iter().map(ms).collect();
    println!("adaptive delay after each round: {} ms", learned.join(", "));
    println!();
    println!("| variant | p50 (ms) | p95 (ms) | p99 (ms) | p99.9 (ms) | extra requests | errors |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in &reports {
        println!(
            "| {} | {} | {} | {} | {} | {:.2} % | {} |",
            r.name,
            ms(r.p50),
            ms(r.p95),
            ms(r.p99),
            ms(r.p999),
            r.extra * 100.0,
            r.errors
        );
    }
    println!();
    let base = &reports[0];
    for r in &reports[1..] {
        println!(
            "{}: p99.9 {:.1}x lower, p99 {:.1}x lower than no hedging",
            r.name,
            base.p999.as_secs_f64() / r.p999.as_secs_f64(),
            base.p99.as_secs_f64() / r.p99.as_secs_f64()
        );
    }
    Ok(())
}
