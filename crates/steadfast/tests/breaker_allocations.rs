//! Proves what a circuit breaker allocates: nothing on a closed breaker's
//! success path (in the blocking executor), nothing to refuse a call or to
//! change state, and nothing for a call it refuses, in either executor: the
//! refusal's `RetryError` keeps its details inline.
//!
//! A counting global allocator sees every allocation of the process, so this
//! test runs without the parallel test harness (`harness = false`).

#![allow(clippy::print_stdout)] // a harness-less test reports its own result

use std::sync::Arc;
use std::time::Duration;

use std::future::IntoFuture;
use steadfast::clock::{Clock, VirtualClock};
use steadfast::control::{BreakerState, CircuitBreaker, Outcome, RetryControl, WindowKind};

use steadfast::retry::{BlockingRetryable, Retryable};
use steadfast::{Attempt, RetryPolicy};

mod counting;

use counting::allocations_during;

fn main() {
    let clock = VirtualClock::new();
    let breaker = Arc::new(
        CircuitBreaker::builder()
            .window(WindowKind::Time(Duration::from_secs(10)))
            .min_calls(10)
            .build_with_clock(clock.clone())
            .expect("valid breaker"),
    );
    let policy = RetryPolicy::builder()
        .control(breaker.clone())
        .build()
        .expect("valid policy");
    let mut checks = 0;

    // Warm up lazily initialised statics (tracing's callsite registry, ...).
    for _ in 0..3 {
        let _ = (|_: Attempt| Ok::<_, ()>(1))
            .retry_blocking(&policy)
            .clock(clock.clone())
            .call();
    }

    let n = allocations_during(|| {
        let r = (|a: Attempt| Ok::<_, &str>(a.number))
            .retry_blocking(&policy)
            .clock(clock.clone())
            .call();
        assert_eq!(r, Ok(1));
    });
    assert_eq!(n, 0, "closed breaker, success path: {n} allocations");
    checks += 1;

    let n = allocations_during(|| {
        for _ in 0..20 {
            breaker.record(Outcome::RetryableFailure);
        }
        assert_eq!(breaker.state(), BreakerState::Open);
    });
    assert_eq!(n, 0, "opening: {n} allocations");
    checks += 1;

    let n = allocations_during(|| {
        for _ in 0..100 {
            assert!(breaker.admit().is_err());
            assert!(breaker.allow_retry().is_err());
        }
        assert!(breaker.retry_after(breaker.name()).is_some());
    });
    assert_eq!(n, 0, "refusals: {n} allocations");
    checks += 1;

    let n = allocations_during(|| {
        let err = (|a: Attempt| Ok::<_, &str>(a.number))
            .retry_blocking(&policy)
            .clock(clock.clone())
            .call()
            .expect_err("the breaker refuses");
        assert_eq!(err.attempts(), 0);
    });
    assert_eq!(n, 0, "a refused call: {n} allocations");
    checks += 1;

    // The async executor refuses without allocating too (a first
    // `block_on` outside the count sets up its thread's waker).
    futures::executor::block_on(async {});
    let n = allocations_during(|| {
        let err = futures::executor::block_on(
            (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
                .retry(&policy)
                .clock(clock.clone())
                .into_future(),
        )
        .expect_err("the breaker refuses");
        assert_eq!(
            (err.attempts(), err.refused_by()),
            (0, Some("circuit breaker"))
        );
    });
    assert_eq!(n, 0, "a refused async call: {n} allocations");
    checks += 1;

    clock.sleep_blocking(Duration::from_secs(5));
    let n = allocations_during(|| {
        assert!(breaker.admit().is_ok());
        breaker.record(Outcome::Success);
        assert_eq!(breaker.state(), BreakerState::Closed);
    });
    assert_eq!(n, 0, "half-open and closed again: {n} allocations");
    checks += 1;

    println!("breaker_allocations: {checks} passed, 0 failed");
}
