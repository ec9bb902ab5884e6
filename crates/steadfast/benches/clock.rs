//! What a read of the time costs, side by side in one criterion run: the
//! candidates for every per-call reader of time in the core (the rate
//! limits, the breaker's time window, the budgets, the adaptive limits'
//! samples).
//!
//! - `Instant::now` (CLOCK_MONOTONIC through the vDSO);
//! - `SystemClock::ticks` (Linux's CLOCK_MONOTONIC_COARSE: a tick of 1 to
//!   4 ms, what the windowed controls read);
//! - `quanta::Clock::now` (the TSC, governor's clock) and its `recent`
//!   (a value refreshed by an upkeep thread);
//! - `CoarseClock::ticks` (steadfast's: an atomic load of a value a timer
//!   thread refreshes every millisecond);
//! - `Instant::now` sampled once every 16 calls (an atomic counter and a
//!   cached value otherwise): what "read the clock every n calls" costs.
//!
//! ```text
//! cargo bench -p steadfast --bench clock -- --warm-up-time 1 --measurement-time 3
//! ```
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::clock::{Clock, CoarseClock, SystemClock};

/// `Instant::now` once every 16 calls, a cached reading otherwise.
struct Sampled {
    base: Instant,
    calls: AtomicU64,
    cached: AtomicU64,
}

impl Sampled {
    #[inline]
    fn nanos(&self) -> u64 {
        if self
            .calls
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(16)
        {
            let n = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.cached.store(n, Ordering::Relaxed);
            n
        } else {
            self.cached.load(Ordering::Relaxed)
        }
    }
}

fn reads(c: &mut Criterion) {
    let mut g = c.benchmark_group("clock/read");
    g.bench_function("Instant::now", |b| b.iter(|| black_box(Instant::now())));
    let system = SystemClock;
    g.bench_function("SystemClock::ticks (coarse monotonic)", |b| {
        b.iter(|| black_box(system.ticks()));
    });
    let quanta = quanta::Clock::new();
    g.bench_function("quanta::Clock::now (TSC)", |b| {
        b.iter(|| black_box(quanta.now()));
    });
    let upkeep = quanta::Upkeep::new(Duration::from_millis(1)).start();
    g.bench_function("quanta::Clock::recent (upkeep thread)", |b| {
        b.iter(|| black_box(quanta.recent()));
    });
    let coarse = CoarseClock::new(Duration::from_millis(1)).expect("a ticker thread");
    g.bench_function("CoarseClock::ticks (timer thread, 1 ms)", |b| {
        b.iter(|| black_box(coarse.ticks()));
    });
    let sampled = Sampled {
        base: Instant::now(),
        calls: AtomicU64::new(0),
        cached: AtomicU64::new(0),
    };
    g.bench_function("Instant::now every 16 calls", |b| {
        b.iter(|| black_box(sampled.nanos()));
    });
    g.finish();
    drop(upkeep);
}

criterion_group!(benches, reads);
criterion_main!(benches);
