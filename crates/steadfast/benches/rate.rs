//! Rate limits against their peers, in one criterion run: one admission
//! (a call the limit has room for: the success path) by steadfast's GCRA
//! and by governor's, direct and keyed, on one thread and on two threads
//! sharing one limiter. (A call through steadfast's `RateLimitLayer` and
//! through tower's `RateLimit`, awaited as users run them, is
//! steadfast-tower's `rate` benchmark.)
//!
//! steadfast runs on two clocks: the system clock (its cheap read is
//! Linux's coarse monotonic clock) and `Instant::now` (a clock with no
//! ticks); governor on its default, quanta. Every quota is far above what
//! the loop can spend, so nothing is refused.
//!
//! ```text
//! cargo bench -p steadfast --bench rate -- --warm-up-time 1 --measurement-time 3
//! ```
#![allow(missing_docs)]

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::clock::{Clock, CoarseClock, SystemClock};
use steadfast::rate::{KeyedRateLimit, Quota, RateLimit};

/// `Instant::now` with no coarse ticks: the precise reader.
#[derive(Debug, Clone, Copy)]
struct Precise;

impl Clock for Precise {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// The TSC through quanta, as governor reads time: the candidate reader.
#[derive(Debug, Clone)]
struct Tsc(quanta::Clock, u64);

impl Tsc {
    fn new() -> Self {
        let clock = quanta::Clock::new();
        let start = clock.raw();
        Self(clock, start)
    }
}

impl Clock for Tsc {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_blocking(&self, duration: Duration) {
        std::thread::sleep(duration);
    }

    fn ticks(&self) -> Option<u64> {
        Some(self.0.delta_as_nanos(self.1, self.0.raw()))
    }
}

const HUGE: u32 = 1_000_000_000;

fn quota() -> Quota {
    Quota::per_second(HUGE).expect("valid")
}

fn governor_quota() -> governor::Quota {
    governor::Quota::per_second(NonZeroU32::new(HUGE).expect("non-zero"))
}

/// One admission, on any of the implementations.
trait Admit: Send + Sync {
    fn admit(&self, i: u64) -> bool;
}

impl Admit for RateLimit {
    #[inline]
    fn admit(&self, _: u64) -> bool {
        self.check().is_ok()
    }
}

struct Keyed(KeyedRateLimit<u64>);

impl Admit for Keyed {
    #[inline]
    fn admit(&self, i: u64) -> bool {
        self.0.check(&(i % 1024)).is_ok()
    }
}

struct GovernorDirect(governor::DefaultDirectRateLimiter);

impl Admit for GovernorDirect {
    #[inline]
    fn admit(&self, _: u64) -> bool {
        self.0.check().is_ok()
    }
}

struct GovernorKeyed(governor::DefaultKeyedRateLimiter<u64>);

impl Admit for GovernorKeyed {
    #[inline]
    fn admit(&self, i: u64) -> bool {
        self.0.check_key(&(i % 1024)).is_ok()
    }
}

fn subjects() -> Vec<(&'static str, Arc<dyn Admit>)> {
    vec![
        (
            "steadfast, system clock",
            Arc::new(
                RateLimit::builder()
                    .quota(quota())
                    .build_with_clock(SystemClock)
                    .expect("valid"),
            ),
        ),
        (
            "steadfast, Instant::now",
            Arc::new(
                RateLimit::builder()
                    .quota(quota())
                    .build_with_clock(Precise)
                    .expect("valid"),
            ),
        ),
        (
            "steadfast, TSC (quanta)",
            Arc::new(
                RateLimit::builder()
                    .quota(quota())
                    .build_with_clock(Tsc::new())
                    .expect("valid"),
            ),
        ),
        (
            "steadfast, CoarseClock (timer thread, 1 ms)",
            Arc::new(
                RateLimit::builder()
                    .quota(quota())
                    .build_with_clock(
                        CoarseClock::new(Duration::from_millis(1)).expect("a ticker thread"),
                    )
                    .expect("valid"),
            ),
        ),
        (
            "steadfast, two quotas",
            Arc::new(
                RateLimit::builder()
                    .quota(quota())
                    .quota(Quota::per_minute(HUGE).expect("valid"))
                    .build()
                    .expect("valid"),
            ),
        ),
        (
            "governor, direct",
            Arc::new(GovernorDirect(governor::RateLimiter::direct(
                governor_quota(),
            ))),
        ),
        (
            "steadfast, keyed (1024 keys)",
            Arc::new(Keyed(
                KeyedRateLimit::builder()
                    .quota(quota())
                    .build()
                    .expect("valid"),
            )),
        ),
        (
            "governor, keyed (1024 keys)",
            Arc::new(GovernorKeyed(
                governor::RateLimiter::keyed(governor_quota()),
            )),
        ),
    ]
}

fn admission(c: &mut Criterion) {
    let mut g = c.benchmark_group("rate/admit, 1 thread");
    for (name, subject) in subjects() {
        g.bench_function(name, |b| {
            let mut i = 0_u64;
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(subject.admit(i))
            });
        });
    }
    g.finish();
    let mut g = c.benchmark_group("rate/admit, 2 threads, one limiter");
    for (name, subject) in subjects() {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for t in 0..2_u64 {
                        let subject = Arc::clone(&subject);
                        s.spawn(move || {
                            for i in 0..iters {
                                black_box(subject.admit(i.wrapping_mul(2) + t));
                            }
                        });
                    }
                });
                start.elapsed()
            });
        });
    }
    g.finish();
}

criterion_group!(benches, admission);
criterion_main!(benches);
