//! Adaptive retry control against its peers, in one criterion run.
//!
//! Each iteration is one "record the outcome + ask for a retry" pair (for
//! the budgets: one deposit + one withdrawal), with the same outcome pattern
//! for every implementation (one failure in 16 attempts). Three rules, each
//! in three forms: steadfast's lock-free control, the same rule behind a
//! `Mutex` (what grpc-go does for its throttle), and, for the budget, tower's
//! `TpsBudget`. Measured on one thread and on two threads sharing one object.
//! The budgets run on three clocks, the mutex version always on the same one
//! as steadfast's: the system clock, a frozen clock (their own cost alone)
//! and a `CoarseClock` (an atomic load refreshed every millisecond). The
//! frozen and the coarse clock have `Clock::ticks`, which both budgets read
//! instead of subtracting `Instant`s.
//! The window group also times a bare `fetch_add` on a shared counter: the
//! floor of any design that claims a position per report.
//!
//! ```text
//! cargo bench -p steadfast --bench control -- --warm-up-time 1 --measurement-time 3
//! ```
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::clock::{Clock, CoarseClock, SystemClock};
use steadfast::control::{FailureWindow, Outcome, RetryBudget, RetryControl, TokenBucket};
use tower::retry::budget::{Budget, TpsBudget};

/// One failure in 16 attempts.
#[inline]
fn outcome(i: u64) -> Outcome {
    if i.is_multiple_of(16) {
        Outcome::RetryableFailure
    } else {
        Outcome::Success
    }
}

/// The operation under test, on any of the implementations.
trait Op: Send + Sync {
    fn op(&self, i: u64) -> bool;
}

/// A steadfast control: record, then ask.
struct Ours<C>(C);

impl<C: RetryControl> Op for Ours<C> {
    #[inline]
    fn op(&self, i: u64) -> bool {
        self.0.record(outcome(i));
        self.0.allow_retry().is_ok()
    }
}

/// A steadfast budget: deposit, then withdraw.
struct OursBudget<C: Clock>(RetryBudget<C>);

/// A clock that never moves: isolates the budgets' own cost from the cost
/// of reading the system clock (about 36 ns a read on the bench machine).
#[derive(Debug, Clone, Copy)]
struct Frozen(Instant);

impl Clock for Frozen {
    fn now(&self) -> Instant {
        self.0
    }
    fn sleep_blocking(&self, _: Duration) {}
    fn ticks(&self) -> Option<u64> {
        Some(0)
    }
}

impl<C: Clock> Op for OursBudget<C> {
    #[inline]
    fn op(&self, _i: u64) -> bool {
        let _ = self.0.admit();
        self.0.allow_retry().is_ok()
    }
}

/// tower's budget: deposit, then withdraw.
struct Tower(TpsBudget);

impl Op for Tower {
    #[inline]
    fn op(&self, _i: u64) -> bool {
        self.0.deposit();
        self.0.withdraw()
    }
}

/// The floor of any window that claims a shared position per report: one
/// `fetch_add` on a shared counter and nothing else. Not a contender: it
/// shows what a single locked instruction costs on the machine at hand.
struct OneFetchAdd(AtomicU64);

impl Op for OneFetchAdd {
    #[inline]
    fn op(&self, i: u64) -> bool {
        self.0.fetch_add(1, Ordering::Relaxed) != i
    }
}

// ---- The same rules behind a mutex (comparison implementations) ----

/// The failure window's rule, under a lock.
struct MutexWindow(Mutex<WindowState>);

struct WindowState {
    bits: Vec<u64>,
    len: u64,
    cursor: u64,
    failures: u32,
    threshold: u32,
}

impl MutexWindow {
    fn new(bytes: u64, threshold: u32) -> Self {
        let len = bytes * 8;
        Self(Mutex::new(WindowState {
            bits: vec![0; len.div_ceil(64) as usize],
            len,
            cursor: 0,
            failures: 0,
            threshold,
        }))
    }
}

impl Op for MutexWindow {
    #[inline]
    fn op(&self, i: u64) -> bool {
        let failed = outcome(i) == Outcome::RetryableFailure;
        {
            let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let pos = s.cursor % s.len;
            s.cursor += 1;
            let (word, mask) = ((pos / 64) as usize, 1u64 << (pos % 64));
            let was = s.bits[word] & mask != 0;
            if was != failed {
                s.bits[word] ^= mask;
                if failed {
                    s.failures += 1;
                } else {
                    s.failures -= 1;
                }
            }
        }
        let s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        s.failures <= s.threshold
    }
}

/// gRFC A6 under a lock, as grpc-go keeps its throttler.
struct MutexBucket {
    tokens: Mutex<u64>,
    max: u64,
    ratio: u64,
}

impl Op for MutexBucket {
    #[inline]
    fn op(&self, i: u64) -> bool {
        {
            let mut t = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
            *t = match outcome(i) {
                Outcome::RetryableFailure => t.saturating_sub(1000),
                Outcome::Success => (*t + self.ratio).min(self.max),
            };
        }
        *self.tokens.lock().unwrap_or_else(PoisonError::into_inner) > self.max / 2
    }
}

/// The retry budget's rule (10 slots over the ttl) under a lock, on the
/// same clock as the steadfast budget it is compared with.
struct MutexBudget<C: Clock> {
    clock: C,
    start: Instant,
    start_ticks: Option<u64>,
    width_nanos: u64,
    state: Mutex<[(u64, i64, i64); 10]>,
    reserve: i64,
    deposit: i64,
}

impl<C: Clock> MutexBudget<C> {
    /// Finagle's / tower's defaults (ttl 10 s, 10 retries/s, 20 %).
    fn new(clock: C) -> Self {
        Self {
            start: clock.now(),
            start_ticks: clock.ticks(),
            clock,
            width_nanos: 1_000_000_000,
            state: Mutex::new([(0, 0, 0); 10]),
            reserve: 10 * 10 * 100_000,
            deposit: 20_000,
        }
    }

    /// The slot number, read like steadfast's budget reads it: from the
    /// clock's ticks when it has them, else from `Instant`s.
    fn epoch(&self) -> u64 {
        let nanos = match (self.start_ticks, self.clock.ticks()) {
            (Some(start), Some(now)) => now.saturating_sub(start),
            _ => {
                let since = self.clock.now().saturating_duration_since(self.start);
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
            }
        };
        nanos / self.width_nanos
    }

    fn with_slot(&self, f: impl FnOnce(&mut [(u64, i64, i64); 10], usize)) {
        let epoch = self.epoch();
        let mut slots = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let i = (epoch % 10) as usize;
        if slots[i].0 != epoch {
            slots[i] = (epoch, 0, 0);
        }
        f(&mut slots, i);
    }
}

impl<C: Clock> Op for MutexBudget<C> {
    #[inline]
    fn op(&self, _i: u64) -> bool {
        self.with_slot(|s, i| s[i].1 += 1);
        let epoch = self.epoch();
        let mut slots = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (req, ret) = slots
            .iter()
            .filter(|s| epoch - s.0 < 10)
            .fold((0, 0), |(a, b), s| (a + s.1, b + s.2));
        if self.reserve + self.deposit * req - 100_000 * ret >= 100_000 {
            let i = (epoch % 10) as usize;
            if slots[i].0 != epoch {
                slots[i] = (epoch, 0, 0);
            }
            slots[i].2 += 1;
            true
        } else {
            false
        }
    }
}

// ---- Drivers ----

fn uncontended(c: &mut Criterion, group: &str, subjects: Vec<(&str, Arc<dyn Op>)>) {
    let mut g = c.benchmark_group(format!("{group}/1 thread"));
    for (name, subject) in subjects {
        let mut i = 0u64;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(subject.op(black_box(i)))
            });
        });
    }
    g.finish();
}

fn contended(c: &mut Criterion, group: &str, subjects: Vec<(&str, Arc<dyn Op>)>) {
    let mut g = c.benchmark_group(format!("{group}/2 threads"));
    for (name, subject) in subjects {
        // Each iteration: one op on each of two threads at once; the time is
        // the wall time of the pair, so lower is higher throughput.
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for t in 0..2u64 {
                        let subject = Arc::clone(&subject);
                        s.spawn(move || {
                            for i in 0..iters {
                                black_box(subject.op(i.wrapping_mul(2) + t));
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

fn window(c: &mut Criterion) {
    let subjects = || -> Vec<(&str, Arc<dyn Op>)> {
        vec![
            (
                "steadfast",
                Arc::new(Ours(
                    FailureWindow::builder()
                        .bytes(16)
                        .threshold(16)
                        .build()
                        .expect("valid"),
                )),
            ),
            ("mutex", Arc::new(MutexWindow::new(16, 16))),
            (
                "floor: one fetch_add",
                Arc::new(OneFetchAdd(AtomicU64::new(0))),
            ),
        ]
    };
    uncontended(c, "failure window", subjects());
    contended(c, "failure window", subjects());
}

fn bucket(c: &mut Criterion) {
    let subjects = || -> Vec<(&str, Arc<dyn Op>)> {
        vec![
            (
                "steadfast",
                Arc::new(Ours(
                    TokenBucket::builder()
                        .max_tokens(10)
                        .token_ratio(0.1)
                        .build()
                        .expect("valid"),
                )),
            ),
            (
                "mutex",
                Arc::new(MutexBucket {
                    tokens: Mutex::new(10_000),
                    max: 10_000,
                    ratio: 100,
                }),
            ),
        ]
    };
    uncontended(c, "token bucket", subjects());
    contended(c, "token bucket", subjects());
}

fn budget(c: &mut Criterion) {
    // Finagle's / tower's defaults: ttl 10 s, 10 retries/s minimum, 20 %.
    let coarse = CoarseClock::new(Duration::from_millis(1)).expect("the ticker starts");
    let subjects = || -> Vec<(&str, Arc<dyn Op>)> {
        let frozen = Frozen(Instant::now());
        vec![
            (
                "steadfast",
                Arc::new(OursBudget(RetryBudget::builder().build().expect("valid"))),
            ),
            ("mutex", Arc::new(MutexBudget::new(SystemClock))),
            (
                "steadfast, frozen clock",
                Arc::new(OursBudget(
                    RetryBudget::builder()
                        .build_with_clock(frozen)
                        .expect("valid"),
                )),
            ),
            ("mutex, frozen clock", Arc::new(MutexBudget::new(frozen))),
            (
                "steadfast, coarse clock",
                Arc::new(OursBudget(
                    RetryBudget::builder()
                        .build_with_clock(coarse.clone())
                        .expect("valid"),
                )),
            ),
            (
                "mutex, coarse clock",
                Arc::new(MutexBudget::new(coarse.clone())),
            ),
            (
                "tower TpsBudget",
                Arc::new(Tower(TpsBudget::new(Duration::from_secs(10), 10, 0.2))),
            ),
        ]
    };
    uncontended(c, "retry budget", subjects());
    contended(c, "retry budget", subjects());
}

criterion_group!(benches, window, bucket, budget);
criterion_main!(benches);
