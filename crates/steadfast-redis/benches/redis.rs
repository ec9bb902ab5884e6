//! A Redis-backed admit on loopback, as a fleet runs it: the round trip of
//! `FleetRateLimit::check` over `RedisQuota` (median, p99, p99.9, on a
//! multi-threaded tokio runtime), beside the floor of the same connection
//! (`PING` through the same `ConnectionManager`); then a hot key over its
//! quota hammered by concurrent callers, and the share of their checks the
//! over-quota cache answers without asking Redis.
//!
//! Starts its own `redis-server` on a port the OS picked (127.0.0.1) and
//! stops it by PID. A harness of its own (latency distributions, not
//! criterion's means): `cargo bench -p steadfast-redis --bench redis`;
//! `-- --quick` for a short run.

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use steadfast::rate::{FleetRateLimit, Quota};
use steadfast_redis::RedisQuota;

struct Server(Child, u16);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start() -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (apt-get install redis-server)");
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "redis-server did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Server(child, port)
}

fn report(name: &str, h: &Histogram<u64>) {
    println!(
        "{name:<44} n={:>7}  median {:>6.1} µs  p99 {:>6.1} µs  p99.9 {:>7.1} µs",
        h.len(),
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
        h.value_at_quantile(0.999) as f64 / 1e3,
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 2_000 } else { 50_000 };
    let server = start();
    let url = format!("redis://127.0.0.1:{}/", server.1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = redis::Client::open(url.as_str()).unwrap();
        let mut ping_conn = client.get_connection_manager().await.unwrap();
        let roomy = FleetRateLimit::builder(RedisQuota::open(&url).unwrap())
            .name("bench")
            .quota(Quota::per_second(1_000_000_000).unwrap())
            .fail_closed()
            .build()
            .unwrap();
        let combined = FleetRateLimit::builder(RedisQuota::open(&url).unwrap())
            .name("bench2")
            .quota(Quota::per_second(1_000_000_000).unwrap())
            .quota(Quota::per_minute(1_000_000_000).unwrap())
            .fail_closed()
            .build()
            .unwrap();
        // Warm up: connections made, the script loaded.
        for _ in 0..500 {
            roomy.check("k").await.unwrap();
            combined.check("k").await.unwrap();
            let _: String = redis::cmd("PING").query_async(&mut ping_conn).await.unwrap();
        }
        let mut ping = Histogram::<u64>::new(3).unwrap();
        let mut admit = Histogram::<u64>::new(3).unwrap();
        let mut admit2 = Histogram::<u64>::new(3).unwrap();
        // Interleaved, so the three see the same machine.
        for i in 0..n {
            let t = Instant::now();
            let _: String = redis::cmd("PING").query_async(&mut ping_conn).await.unwrap();
            ping.record(t.elapsed().as_nanos() as u64).unwrap();
            let key = format!("tenant-{}", i % 64);
            let t = Instant::now();
            roomy.check(&key).await.unwrap();
            admit.record(t.elapsed().as_nanos() as u64).unwrap();
            let t = Instant::now();
            combined.check(&key).await.unwrap();
            admit2.record(t.elapsed().as_nanos() as u64).unwrap();
        }
        println!("one caller, sequential, loopback:");
        report("PING, same client (the floor)", &ping);
        report("FleetRateLimit::check, one quota", &admit);
        report("FleetRateLimit::check, two quotas combined", &admit2);
        assert_eq!(roomy.stats().backend_errors, 0);

        // A hot key over its quota: 100 a second, 16 callers without pause.
        let hot = Arc::new(
            FleetRateLimit::builder(RedisQuota::open(&url).unwrap())
                .name("hot")
                .quota(Quota::per_second(100).unwrap())
                .fail_closed()
                .build()
                .unwrap(),
        );
        let run = if quick { Duration::from_millis(500) } else { Duration::from_secs(3) };
        let until = Instant::now() + run;
        let callers: Vec<_> = (0..16)
            .map(|_| {
                let hot = Arc::clone(&hot);
                tokio::spawn(async move {
                    let mut checks = 0_u64;
                    while Instant::now() < until {
                        let _ = hot.check("hot-key").await;
                        checks += 1;
                        if checks.is_multiple_of(64) {
                            tokio::task::yield_now().await;
                        }
                    }
                    checks
                })
            })
            .collect();
        let mut checks = 0;
        for c in callers {
            checks += c.await.unwrap();
        }
        let s = hot.stats();
        println!(
            "hot key, 100/s, 16 callers for {run:?}: {checks} checks, {} admitted, {} asked of redis, \
             {} refused from the cache: {:.4} of checks answered without redis",
            s.admitted,
            s.asked,
            s.cached_refusals,
            s.cached_refusals as f64 / checks as f64
        );
    });
    drop(server);
}
