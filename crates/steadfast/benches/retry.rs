//! The retry executors against their peers, in one criterion run:
//! - the success path (the first attempt succeeds), async and blocking;
//! - one failed attempt, a zero-length wait, then success.
//!
//! Run: `cargo bench -p steadfast --bench retry`. Ratios go to BENCHMARKS.md.
#![allow(
    clippy::unwrap_used,
    clippy::semicolon_if_nothing_returned,
    missing_docs
)]

use std::future::{Future, IntoFuture};
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::backoff::Backoff;
use steadfast::retry::{BlockingRetryable, Retryable};
use steadfast::{Attempt, RetryPolicy};

/// Polls a future that is expected to be ready at once (the success path
/// of every contender), so no runtime overhead is in the measurement.
///
/// The future is pinned where it is made ([`in_place!`]), as `.await`
/// does; passing it by value into a helper would measure a copy of the
/// whole future that real code does not make (see BENCHMARKS.md).
#[inline(always)]
fn ready<F: Future>(fut: Pin<&mut F>) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match fut.poll(&mut cx) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("expected the success path to complete in one poll"),
    }
}

/// The same, for a future moved into the poll helper by value (what an
/// executor's `block_on` or `spawn` does): the copy is part of the cost.
#[inline(never)]
fn ready_moved<F: Future>(fut: F) -> F::Output {
    ready(pin!(fut))
}

/// Makes the future and polls it where it was made.
macro_rules! in_place {
    ($fut:expr) => {
        ready(pin!($fut))
    };
}

/// Makes the future and moves it into [`ready_moved`].
macro_rules! moved {
    ($fut:expr) => {
        ready_moved($fut)
    };
}

/// The async success-path contenders in one group, each future made and
/// polled by `$poll!` ([`in_place!`] or [`moved!`]).
macro_rules! success_async_group {
    ($c:expr, $name:literal, $policy:expr, $poll:ident) => {{
        let policy = $policy;
        let mut g = $c.benchmark_group($name);
        g.bench_function("direct", |b| b.iter(|| $poll!(op_async(black_box(1)))));
        g.bench_function("steadfast", |b| {
            b.iter(|| {
                $poll!(
                    (|_: Attempt| op_async(black_box(1)))
                        .retry(policy)
                        .into_future()
                )
            })
        });
        g.bench_function("backon", |b| {
            b.iter(|| {
                $poll!(backon::Retryable::retry(
                    || op_async(black_box(1)),
                    backon::ExponentialBuilder::default().with_max_times(2),
                ))
            })
        });
        g.bench_function("tokio-retry", |b| {
            b.iter(|| {
                $poll!(tokio_retry::Retry::start(
                    tokio_retry::strategy::ExponentialBackoff::from_millis(10).take(2),
                    || op_async(black_box(1)),
                ))
            })
        });
        g.bench_function("tower", |b| {
            use tower::Service;
            let mut svc =
                tower::retry::Retry::new(TowerAttempts(3), tower::service_fn(|x: u64| op_async(x)));
            b.iter(|| $poll!(svc.call(black_box(1))));
        });
        g.finish();
    }};
}

#[inline(never)]
fn op(x: u64) -> Result<u64, std::io::Error> {
    Ok(black_box(x) + 1)
}

/// The failure path's operation: fails on its first attempt, then succeeds.
#[inline]
fn fail_first(first: bool, x: u64) -> Result<u64, std::io::Error> {
    if first {
        Err(std::io::Error::other("x"))
    } else {
        op(x)
    }
}

#[inline(never)]
async fn op_async(x: u64) -> Result<u64, std::io::Error> {
    Ok(black_box(x) + 1)
}

/// tower's retry needs a policy; this one retries every error, three times.
#[derive(Clone)]
struct TowerAttempts(usize);

impl<Req: Clone, Res, E> tower::retry::Policy<Req, Res, E> for TowerAttempts {
    type Future = std::future::Ready<()>;
    fn retry(&mut self, _: &mut Req, result: &mut Result<Res, E>) -> Option<Self::Future> {
        match result {
            Ok(_) => None,
            Err(_) if self.0 > 1 => {
                self.0 -= 1;
                Some(std::future::ready(()))
            }
            Err(_) => None,
        }
    }
    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

fn success_async(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
    success_async_group!(c, "success_async", &policy, in_place);
    // The same contenders, each future moved into a non-inlined poll helper.
    success_async_group!(c, "success_async_moved", &policy, moved);
}

/// The success path as users run it: each contender's future awaited in an
/// `async` block that criterion runs on a tokio current-thread runtime (the
/// runtime's own cost, the same for every contender, is in every figure).
fn success_async_runtime(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
    let policy = &policy;
    let mut g = c.benchmark_group("success_async_runtime");
    g.bench_function("direct", |b| {
        b.to_async(&rt)
            .iter(|| async { op_async(black_box(1)).await })
    });
    g.bench_function("steadfast", |b| {
        b.to_async(&rt)
            .iter(|| async { (|_: Attempt| op_async(black_box(1))).retry(policy).await })
    });
    g.bench_function("backon", |b| {
        b.to_async(&rt).iter(|| async {
            backon::Retryable::retry(
                || op_async(black_box(1)),
                backon::ExponentialBuilder::default().with_max_times(2),
            )
            .await
        })
    });
    g.bench_function("tokio-retry", |b| {
        b.to_async(&rt).iter(|| async {
            tokio_retry::Retry::start(
                tokio_retry::strategy::ExponentialBackoff::from_millis(10).take(2),
                || op_async(black_box(1)),
            )
            .await
        })
    });
    g.bench_function("tower", |b| {
        use tower::Service;
        let svc = std::cell::RefCell::new(tower::retry::Retry::new(
            TowerAttempts(3),
            tower::service_fn(|x: u64| op_async(x)),
        ));
        // The call's future owns what it needs; the service is not borrowed across it.
        b.to_async(&rt).iter(|| svc.borrow_mut().call(black_box(1)))
    });
    g.finish();
}

fn success_blocking(c: &mut Criterion) {
    let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
    let mut g = c.benchmark_group("success_blocking");
    g.bench_function("direct", |b| b.iter(|| op(black_box(1))));
    g.bench_function("steadfast", |b| {
        b.iter(|| {
            (|_: Attempt| op(black_box(1)))
                .retry_blocking(&policy)
                .call()
        })
    });
    g.bench_function("backon", |b| {
        b.iter(|| {
            backon::BlockingRetryable::retry(
                || op(black_box(1)),
                backon::ExponentialBuilder::default().with_max_times(2),
            )
            .call()
        })
    });
    g.bench_function("backoff", |b| {
        b.iter(|| {
            backoff::retry(backoff::ExponentialBackoff::default(), || {
                op(black_box(1)).map_err(backoff::Error::transient)
            })
        })
    });
    g.finish();
}

/// Three attempts, no wait between them.
fn zero_wait_policy() -> RetryPolicy {
    let zero = Backoff::constant(Duration::ZERO).build().unwrap();
    RetryPolicy::builder()
        .max_attempts(3)
        .backoff(zero)
        .build()
        .unwrap()
}

/// One failure, a zero-length wait, then success: the cost of the retry
/// machinery itself (classification, decision, delay, timer handling).
fn one_failure_async(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let policy = zero_wait_policy();
    let mut g = c.benchmark_group("one_failure_async");
    g.bench_function("steadfast", |b| {
        b.iter(|| {
            rt.block_on(
                (|a: Attempt| async move { fail_first(a.is_first(), 1) })
                    .retry(&policy)
                    .into_future(),
            )
        })
    });
    g.bench_function("backon", |b| {
        b.iter(|| {
            let mut n = 0;
            rt.block_on(backon::Retryable::retry(
                move || {
                    n += 1;
                    let first = n == 1;
                    async move { fail_first(first, 1) }
                },
                backon::ConstantBuilder::default()
                    .with_delay(Duration::ZERO)
                    .with_max_times(2),
            ))
        })
    });
    g.bench_function("tokio-retry", |b| {
        b.iter(|| {
            let mut n = 0;
            rt.block_on(tokio_retry::Retry::start(
                std::iter::repeat_n(Duration::ZERO, 2),
                move || {
                    n += 1;
                    let first = n == 1;
                    async move { fail_first(first, 1) }
                },
            ))
        })
    });
    g.bench_function("tower", |b| {
        use tower::Service;
        b.iter(|| {
            let mut n = 0;
            let mut svc = tower::retry::Retry::new(
                TowerAttempts(3),
                tower::service_fn(move |x: u64| {
                    n += 1;
                    let first = n == 1;
                    async move { fail_first(first, x) }
                }),
            );
            rt.block_on(svc.call(1))
        })
    });
    g.finish();
}

fn one_failure_blocking(c: &mut Criterion) {
    let policy = zero_wait_policy();
    let mut g = c.benchmark_group("one_failure_blocking");
    g.bench_function("steadfast", |b| {
        b.iter(|| {
            (|a: Attempt| fail_first(a.is_first(), 1))
                .retry_blocking(&policy)
                .call()
        })
    });
    g.bench_function("backon", |b| {
        b.iter(|| {
            let mut n = 0;
            backon::BlockingRetryable::retry(
                move || {
                    n += 1;
                    fail_first(n == 1, 1)
                },
                backon::ConstantBuilder::default()
                    .with_delay(Duration::ZERO)
                    .with_max_times(2),
            )
            .call()
        })
    });
    g.bench_function("backoff", |b| {
        b.iter(|| {
            let mut n = 0;
            backoff::retry(backoff::backoff::Constant::new(Duration::ZERO), move || {
                n += 1;
                fail_first(n == 1, 1).map_err(backoff::Error::transient)
            })
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    success_async,
    success_async_runtime,
    success_blocking,
    one_failure_async,
    one_failure_blocking
);
criterion_main!(benches);
