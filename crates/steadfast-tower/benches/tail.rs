//! Tail latency of hedged HTTP requests over loopback: `HedgeLayer` against
//! `tower::hedge::Hedge` and no hedging, on a real hyper client calling a
//! real axum server.
//!
//! The server answers 98 % of requests after 1 ms and 2 % after 200 ms (a
//! splitmix64 draw from a fixed seed and the request's arrival number, so a
//! hedge copy draws again, as a copy sent to another replica would); it
//! sleeps on `PreciseClock`, so "1 ms" is 1 ms and not tokio's next tick.
//! 8 calls are in flight at once; each variant makes 10,000 measured calls
//! per round; the variants take turns for `ROUNDS` rounds (default 3) and
//! the median of each figure is printed. "Extra" is what the server
//! received beyond one request per call.
//!
//! - `none`: the hyper client alone;
//! - `tower-warm`: `tower::hedge::Hedge` at the same quantile, measured
//!   after a warm-up long enough for its histogram to rotate;
//! - `steadfast-cold`: `HedgeLayer` with an `AdaptiveDelay` at the same
//!   quantile (over its default window for that quantile, 1024 latencies at
//!   0.97, or `WINDOW`; a 2 ms fallback until 100 samples), on `PreciseClock`,
//!   measured from its very first call; up to `COPIES` copies (default 3:
//!   a copy that itself draws a slow reply gets a copy too);
//! - `steadfast-tokio`: the same on tokio's clock, to show what the 1 ms
//!   timer tick costs;
//! - `floor (all fast, none)`: the hyper client alone against a route whose
//!   every reply takes 1 ms: the tail the machine gives a 1 ms call by
//!   itself, below which no hedging can go.
//!
//! Also printed: the CPU time of the `steadfast-timer` thread over the run,
//! and the machine's own stalls, measured before the run: a thread that
//! does nothing but read the clock for `SPIN_S` seconds (default 3) and
//! counts the gaps of over 1 ms between reads. With `WORST=n`, each
//! variant's `n` slowest calls are printed with their call numbers (calls
//! in flight together have neighbouring numbers) and, for `steadfast-cold`
//! (then run reported), `(copies sent/winning copy/delay at the start in
//! ms)`.
//!
//! With `HTTP2=1`, every variant's client speaks HTTP/2 to the server (prior
//! knowledge, one connection): a cancelled copy then resets its stream
//! instead of closing an HTTP/1 connection that the next calls would have
//! to open again.
//!
//! ```sh
//! cargo bench -p steadfast-tower --bench tail   # knobs: ROUNDS, QUANTILE, CALLS, COPIES, WINDOW, HTTP2, WORST, SPIN_S
//! ```
#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use futures::StreamExt;
use hdrhistogram::Histogram;
use http::Request;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use steadfast::HedgePolicy;
use steadfast::clock::AsyncClock;
use steadfast::policy::AdaptiveDelay;
use steadfast_tower::replay::HttpReplay;
use steadfast_tower::{HedgeLayer, PreciseClock};
use tower::{Layer, ServiceExt};

const IN_FLIGHT: usize = 8;
const SLOW_SHARE: f64 = 0.02;
const FAST: Duration = Duration::from_millis(1);
const SLOW: Duration = Duration::from_millis(200);
const SEED: u64 = 0x5EED_F00D;

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A hyper client over plain TCP: HTTP/1, or HTTP/2 only.
fn client<B>(http2: bool) -> Client<HttpConnector, B>
where
    B: http_body::Body + Send,
    B::Data: Send,
{
    let mut builder = Client::builder(TokioExecutor::new());
    if http2 {
        builder.http2_only(true);
    }
    builder.build_http()
}

/// splitmix64 of the seed and the request's arrival number, in [0, 1).
fn draw(n: u64) -> f64 {
    let mut z = SEED.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The server, on its own thread and runtime; returns its address and its
/// request counter.
fn start_server() -> (std::net::SocketAddr, Arc<AtomicU64>) {
    let received = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&received);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let clock = PreciseClock::new().unwrap();
            let fast_counter = Arc::clone(&counter);
            let router = Router::new()
                .route(
                    "/",
                    get(move || {
                        let n = counter.fetch_add(1, Ordering::Relaxed);
                        let latency = if draw(n) < SLOW_SHARE { SLOW } else { FAST };
                        async move {
                            clock.sleep(latency).await;
                            "ok"
                        }
                    }),
                )
                // Every reply fast: the floor variant's server.
                .route(
                    "/fast",
                    get(move || {
                        fast_counter.fetch_add(1, Ordering::Relaxed);
                        async move {
                            clock.sleep(FAST).await;
                            "ok"
                        }
                    }),
                );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router).await.unwrap();
        });
    });
    (rx.recv().unwrap(), received)
}

fn request(url: &str) -> Request<Full<Bytes>> {
    Request::get(url).body(Full::default()).unwrap()
}

#[derive(Clone)]
struct CloneGet;

impl tower::hedge::Policy<Request<Full<Bytes>>> for CloneGet {
    fn clone_request(&self, req: &Request<Full<Bytes>>) -> Option<Request<Full<Bytes>>> {
        Some(request(&req.uri().to_string()))
    }
    fn can_retry(&self, _: &Request<Full<Bytes>>) -> bool {
        true
    }
}

/// Calls a service that is always ready (tower's `Hedge` over a hyper
/// client, which is not `Clone`): its `poll_ready` is answered at once.
fn call_now<S: tower::Service<R>, R>(service: &mut S, request: R) -> S::Future {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match service.poll_ready(&mut cx) {
        std::task::Poll::Ready(Ok(())) => service.call(request),
        _ => panic!("the hyper client is always ready"),
    }
}

thread_local! {
    /// With `WORST`, what the steadfast hedger's report said of each call:
    /// `sent/winner/delay at the start`.
    static DETAILS: std::cell::RefCell<Vec<Option<String>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `calls` calls, `IN_FLIGHT` at a time, and records their latencies.
async fn run<F, Fut, T, E>(calls: usize, mut call: F) -> (Histogram<u64>, usize)
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut hist = Histogram::<u64>::new(3).unwrap();
    let mut errors = 0;
    let mut worst: Vec<(Duration, usize)> = Vec::new();
    let show = setting("WORST", 0usize);
    let mut results = futures::stream::iter(0..calls)
        .map(|i| {
            let fut = call(i);
            async move {
                let start = Instant::now();
                let ok = fut.await.is_ok();
                (start.elapsed(), ok, i)
            }
        })
        .buffer_unordered(IN_FLIGHT);
    while let Some((took, ok, i)) = results.next().await {
        hist.record(u64::try_from(took.as_micros()).unwrap_or(u64::MAX))
            .unwrap();
        errors += usize::from(!ok);
        if show > 0 {
            worst.push((took, i));
        }
    }
    if show > 0 {
        worst.sort_by(|a, b| b.cmp(a));
        let list: Vec<String> = worst
            .iter()
            .take(show)
            .map(|(took, i)| {
                let detail = DETAILS.with_borrow(|d| d.get(*i).cloned().flatten());
                format!(
                    "#{i}:{:.2}{}",
                    took.as_secs_f64() * 1e3,
                    detail.map(|d| format!("({d})")).unwrap_or_default()
                )
            })
            .collect();
        println!("  worst of {calls}: {}", list.join(" "));
        DETAILS.with_borrow_mut(Vec::clear);
    }
    (hist, errors)
}

/// One variant's figures for one round.
#[derive(Clone, Copy, Default)]
struct Figures {
    p50: f64,
    p99: f64,
    p999: f64,
    extra: f64,
    errors: usize,
}

fn figures(hist: &Histogram<u64>, errors: usize, calls: usize, received: u64) -> Figures {
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    Figures {
        p50: ms(0.5),
        p99: ms(0.99),
        p999: ms(0.999),
        extra: (received as f64 - calls as f64) / calls as f64 * 100.0,
        errors,
    }
}

/// CPU time (user + system) of the process's `steadfast-timer` thread.
fn timer_thread_cpu() -> Option<Duration> {
    let tick = 100.0; // USER_HZ on Linux
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let path = task.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).ok()?;
        if comm.trim() == "steadfast-timer" {
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            let after = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = after.split_whitespace().collect();
            let ticks: f64 =
                fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
            return Some(Duration::from_secs_f64(ticks / tick));
        }
    }
    None
}

/// The machine's own stalls: a thread that only reads the clock, for
/// `spin`, and every gap of over 1 ms between two reads (time it was not
/// running). No hedger can hide a stall of the whole machine.
fn stalls(spin: Duration) -> Vec<Duration> {
    let start = Instant::now();
    let mut last = start;
    let mut gaps = Vec::new();
    while last - start < spin {
        let now = Instant::now();
        if now - last > Duration::from_millis(1) {
            gaps.push(now - last);
        }
        last = now;
    }
    gaps
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo test --benches` runs bench targets with `--bench`; only a real
    // `cargo bench` (which passes `--bench` too) should take a minute, so
    // the harness also honours criterion's `--test` quick mode.
    let quick = std::env::args().any(|a| a == "--test");
    let rounds: usize = if quick { 1 } else { setting("ROUNDS", 3) };
    let calls: usize = if quick { 200 } else { setting("CALLS", 10_000) };
    let quantile: f64 = setting("QUANTILE", 0.97);
    // Copies per call for steadfast, counting the first (tower's sends at
    // most one extra).
    let copies: u32 = setting("COPIES", 3);
    // The adaptive delay's window (default: the default for the quantile,
    // 1024 at 0.97). With `WINDOW=256` (the default of earlier versions) the
    // window holds 5 slow replies on average and 8 (over 3 %) one window in
    // seven, and each such window sends the delay climbing into the slow
    // mode.
    let window: Option<usize> = std::env::var("WINDOW").ok().and_then(|v| v.parse().ok());
    let http2 = setting("HTTP2", 0u8) == 1;
    let worst = setting("WORST", 0usize);
    let spin = if quick {
        Duration::ZERO
    } else {
        Duration::from_secs(setting("SPIN_S", 3))
    };
    let gaps = stalls(spin);
    let (addr, received) = start_server();
    let url = format!("http://{addr}/");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cpu_before = timer_thread_cpu();
    let fast_url = format!("http://{addr}/fast");
    let names = [
        "none",
        "tower-warm",
        "steadfast-cold",
        "steadfast-tokio",
        "floor (all fast, none)",
    ];
    let mut all: Vec<Vec<Figures>> = vec![Vec::new(); names.len()];
    let started = Instant::now();
    rt.block_on(async {
        for _ in 0..rounds {
            for (i, name) in names.iter().enumerate() {
                let before;
                let (hist, errors) = match *name {
                    "none" => {
                        let client = client::<Full<Bytes>>(http2);
                        before = received.load(Ordering::Relaxed);
                        run(calls, |_| client.clone().oneshot(request(&url))).await
                    }
                    // No slow replies and no hedging: the tail this machine
                    // gives a 1 ms call by itself, below which no hedger
                    // can bring the p99.9.
                    "floor (all fast, none)" => {
                        let client = client::<Full<Bytes>>(http2);
                        before = received.load(Ordering::Relaxed);
                        run(calls, |_| client.clone().oneshot(request(&fast_url))).await
                    }
                    "tower-warm" => {
                        let client = client::<Full<Bytes>>(http2);
                        let hedge = std::cell::RefCell::new(tower::hedge::Hedge::new(
                            client,
                            CloneGet,
                            100,
                            quantile as f32,
                            Duration::from_millis(500),
                        ));
                        // Warm: more than two histogram periods of traffic.
                        let warm = Instant::now();
                        while warm.elapsed() < Duration::from_millis(1200) {
                            run(200, |_| call_now(&mut *hedge.borrow_mut(), request(&url))).await;
                        }
                        before = received.load(Ordering::Relaxed);
                        run(calls, |_| call_now(&mut *hedge.borrow_mut(), request(&url))).await
                    }
                    cold => {
                        let client = client(http2);
                        let mut delay = AdaptiveDelay::builder(Duration::from_millis(2))
                            .quantile(quantile)
                            .min_samples(100);
                        if let Some(window) = window {
                            delay = delay.window(window);
                        }
                        let delay = Arc::new(delay.build().unwrap());
                        let policy = HedgePolicy::builder(Arc::clone(&delay))
                            .max_attempts(copies)
                            .build()
                            .unwrap();
                        before = received.load(Ordering::Relaxed);
                        if cold == "steadfast-cold" {
                            let layer = HedgeLayer::new(policy)
                                .replay(HttpReplay::default())
                                .clock(PreciseClock::new().unwrap());
                            if worst > 0 {
                                // The same calls, reported, to say what the
                                // slowest of them did.
                                DETAILS.with_borrow_mut(|d| *d = vec![None; calls]);
                                run(calls, |i| {
                                    let at_start = delay.current();
                                    let call = layer.run_reported(client.clone(), request(&url));
                                    async move {
                                        let report = call.await;
                                        let s = report.hedge.unwrap_or_default();
                                        let detail = format!(
                                            "{}/{}/{:.2}",
                                            s.sent,
                                            s.winner.unwrap_or(0),
                                            at_start.as_secs_f64() * 1e3
                                        );
                                        DETAILS.with_borrow_mut(|d| d[i] = Some(detail));
                                        report.result
                                    }
                                })
                                .await
                            } else {
                                let hedged = layer.layer(client);
                                run(calls, |_| hedged.clone().oneshot(request(&url))).await
                            }
                        } else {
                            let layer = HedgeLayer::new(policy).replay(HttpReplay::default());
                            let hedged = layer.layer(client);
                            run(calls, |_| hedged.clone().oneshot(request(&url))).await
                        }
                    }
                };
                let got = received.load(Ordering::Relaxed) - before;
                all[i].push(figures(&hist, errors, calls, got));
            }
        }
    });
    let elapsed = started.elapsed();
    println!(
        "tail: {calls} calls x {rounds} rounds, {IN_FLIGHT} in flight, quantile {quantile}, HTTP/{}; medians across rounds",
        if http2 { 2 } else { 1 }
    );
    println!("| variant | p50 (ms) | p99 (ms) | p99.9 (ms) | extra requests | errors |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, rounds) in names.iter().zip(&all) {
        let m = |f: fn(&Figures) -> f64| median(rounds.iter().map(f).collect());
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} % | {} |",
            m(|f| f.p50),
            m(|f| f.p99),
            m(|f| f.p999),
            m(|f| f.extra),
            rounds.iter().map(|f| f.errors).sum::<usize>()
        );
    }
    let p999 = |i: usize| median(all[i].iter().map(|f| f.p999).collect());
    println!(
        "steadfast-cold p99.9 / tower-warm p99.9 = {:.2}x (target <= 0.7x)",
        p999(2) / p999(1)
    );
    let longest = gaps.iter().max().copied().unwrap_or_default();
    println!(
        "machine stalls before the run: a thread reading the clock for {:.0} s was off the CPU {} times for over 1 ms, at most {:.2} ms",
        spin.as_secs_f64(),
        gaps.len(),
        longest.as_secs_f64() * 1e3
    );
    if let (Some(before), Some(after)) = (cpu_before.or(Some(Duration::ZERO)), timer_thread_cpu()) {
        println!(
            "steadfast-timer thread CPU: {:.3} s over a {:.1} s run",
            (after - before).as_secs_f64(),
            elapsed.as_secs_f64()
        );
    }
}
