//! Circuit breakers on their hot path, in one criterion run: one iteration
//! is one call through a *closed* breaker, asked whether the call may go and
//! told that it succeeded (steadfast: `admit` + `record(Success)`; failsafe:
//! `is_call_permitted` + `on_success`; recloser: `call` with an operation
//! that returns `Ok`, which does the same two steps around it).
//!
//! Contenders, configured alike (open at 50 % failures over at least 100
//! calls, 5 s break):
//! - steadfast `CircuitBreaker` with a count window (the last 100 calls;
//!   no clock read), and with a 30 s time window on `CoarseClock` and on
//!   the system clock (one clock read per `record`);
//! - failsafe 1.3 `StateMachine` with `success_rate_over_time_window`
//!   (30 s; a `parking_lot` mutex around the policy);
//! - recloser 1.4 (a ring of the last 100 calls behind a crossbeam-epoch
//!   pointer).
//!
//! "2 threads": two threads share one breaker and each makes one call; the
//! time is the wall time per pair of calls.
//!
//! ```text
//! cargo bench -p steadfast --bench breaker -- --warm-up-time 1 --measurement-time 3
//! ```
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::clock::{Clock, CoarseClock, SystemClock};
use steadfast::control::{CircuitBreaker, Outcome, RetryControl, WindowKind};

/// One call through a closed breaker: may it go, then it succeeded.
trait Call: Send + Sync {
    fn call(&self) -> bool;
}

struct Ours<C: Clock>(CircuitBreaker<C>);

impl<C: Clock> Call for Ours<C> {
    #[inline]
    fn call(&self) -> bool {
        let ok = self.0.admit().is_ok();
        self.0.record(Outcome::Success);
        ok
    }
}

type FailsafePolicy =
    failsafe::failure_policy::SuccessRateOverTimeWindow<failsafe::backoff::Constant>;

struct Failsafe(failsafe::StateMachine<FailsafePolicy, ()>);

impl Call for Failsafe {
    #[inline]
    fn call(&self) -> bool {
        let ok = self.0.is_call_permitted();
        self.0.on_success();
        ok
    }
}

struct Recloser(recloser::Recloser);

impl Call for Recloser {
    #[inline]
    fn call(&self) -> bool {
        self.0.call(|| Ok::<(), ()>(())).is_ok()
    }
}

fn ours<C: Clock>(window: WindowKind, clock: C) -> Arc<dyn Call> {
    Arc::new(Ours(
        CircuitBreaker::builder()
            .window(window)
            .min_calls(100)
            .failure_ratio(0.5)
            .break_duration(Duration::from_secs(5))
            .build_with_clock(clock)
            .expect("valid"),
    ))
}

fn subjects(coarse: &CoarseClock) -> Vec<(&'static str, Arc<dyn Call>)> {
    let thirty = Duration::from_secs(30);
    vec![
        (
            "steadfast, count window",
            ours(WindowKind::Count(100), SystemClock),
        ),
        (
            "steadfast, time window, coarse clock",
            ours(WindowKind::Time(thirty), coarse.clone()),
        ),
        (
            "steadfast, time window, system clock",
            ours(WindowKind::Time(thirty), SystemClock),
        ),
        (
            "failsafe",
            Arc::new(Failsafe(
                failsafe::Config::new()
                    .failure_policy(failsafe::failure_policy::success_rate_over_time_window(
                        0.5,
                        100,
                        thirty,
                        failsafe::backoff::constant(Duration::from_secs(5)),
                    ))
                    .build(),
            )),
        ),
        (
            "recloser",
            Arc::new(Recloser(
                recloser::Recloser::custom()
                    .error_rate(0.5)
                    .closed_len(100)
                    .half_open_len(1)
                    .open_wait(Duration::from_secs(5))
                    .build(),
            )),
        ),
    ]
}

fn closed(c: &mut Criterion) {
    let coarse = CoarseClock::new(Duration::from_millis(1)).expect("the ticker thread starts");
    let mut g = c.benchmark_group("closed breaker/1 thread");
    for (name, subject) in subjects(&coarse) {
        g.bench_function(name, |b| b.iter(|| black_box(subject.call())));
    }
    g.finish();
    let mut g = c.benchmark_group("closed breaker/2 threads");
    for (name, subject) in subjects(&coarse) {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                std::thread::scope(|s| {
                    for _ in 0..2 {
                        let subject = Arc::clone(&subject);
                        s.spawn(move || {
                            for _ in 0..iters {
                                black_box(subject.call());
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

criterion_group!(benches, closed);
criterion_main!(benches);
