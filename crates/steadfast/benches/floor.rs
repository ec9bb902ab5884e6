//! The success path at its floor: a first attempt that succeeds, through
//! steadfast's executors beside the peers the targets are set against
//! (backon's blocking retry; tower's `Retry` awaited on a runtime), in one
//! criterion run, as users run them:
//!
//! - `blocking`: the call on the bench's thread;
//! - `runtime`: each contender's future awaited inside a tokio
//!   current-thread runtime's `block_on` (criterion's `to_async`).
//!
//! Beside each plain steadfast row, the same call with a feature a caller
//! may configure and not need on this call: `+fb` (a fallback, which a
//! success never reaches), `+chaos` (a chaos switched off) and `+limits` (a
//! concurrency limit and a rate limit, both with room: one slot taken and
//! given back, one turn taken, on every call).
//!
//! Beside them, `floor_runtime/by hand`: a future written for this bench
//! that does only what a lean first attempt must (see [`ByHand`]), with the
//! same output type: the floor any retry future with steadfast's options
//! can reach in this harness, measured in the same run.
//!
//! The same file builds against an earlier commit (it uses only API that
//! has not changed since the concurrency limits), so `bash
//! crates/steadfast/benches/floor-vs REV` runs this commit's and REV's
//! binaries alternately. Ratios go to BENCHMARKS.md.
#![allow(
    clippy::unwrap_used,
    clippy::semicolon_if_nothing_returned,
    missing_docs
)]

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::call::LimitRefused;
use steadfast::cancel::CancelToken;
use steadfast::chaos::Chaos;
use steadfast::clock::TokioClock;
use steadfast::deadline::Deadline;
use steadfast::fallback;
use steadfast::limit::ConcurrencyLimit;
use steadfast::rate::{Quota, RateLimit};
use steadfast::retry::{BlockingRetryable, Retryable};
use steadfast::{Attempt, Classify, RetryError, RetryPolicy, Verdict};

fn op(x: u64) -> Result<u64, std::io::Error> {
    Ok(x.wrapping_add(1))
}

async fn op_async(x: u64) -> Result<u64, std::io::Error> {
    Ok(x.wrapping_add(1))
}

/// Four attempts, the default backoff: the policy of record.
fn plain() -> RetryPolicy {
    RetryPolicy::builder().max_attempts(4).build().unwrap()
}

/// The same, with a concurrency limit and a rate limit that always have room.
fn limited() -> RetryPolicy {
    // A turn every nanosecond, a million at once: never short on this machine.
    let quota = Quota::per_second(1_000_000_000)
        .unwrap()
        .with_burst(1_000_000)
        .unwrap();
    RetryPolicy::builder()
        .max_attempts(4)
        .concurrency_limit(ConcurrencyLimit::fixed(1 << 20).build().unwrap())
        .rate_limit(RateLimit::new(quota))
        .build()
        .unwrap()
}

/// A chaos that injects a latency and an error into every call once turned
/// on, and is not.
fn chaos_off() -> Chaos<u64, std::io::Error> {
    Chaos::builder()
        .latency(1.0, Duration::from_millis(5))
        .error(1.0, || std::io::Error::other("injected"))
        .build()
        .unwrap()
}

pin_project_lite::pin_project! {
    #[project = ByHandProj]
    enum Stage<Fut> {
        Unpolled,
        Polling { #[pin] attempt: Fut },
        Over,
    }
}

pin_project_lite::pin_project! {
    /// The least a retry future with steadfast's options does for a first
    /// attempt that succeeds, written for this bench: it borrows the policy
    /// and asks whether the call is lean and under no limit, checks the
    /// call's deadline and the ambient one and the cancellation token, makes
    /// the attempt on first poll (futures are lazy), classifies the outcome
    /// and answers the executors' `Result`. Anything else (a failure, a
    /// limit, a deadline) ends it with an error: it never retries.
    struct ByHand<'a, Op, Fut> {
        op: Op,
        policy: &'a RetryPolicy,
        cancel: Option<CancelToken>,
        deadline: Option<Deadline>,
        #[pin]
        stage: Stage<Fut>,
    }
}

impl<'a, Op, Fut> ByHand<'a, Op, Fut> {
    fn new(op: Op, policy: &'a RetryPolicy) -> Self {
        Self {
            op,
            policy,
            cancel: None,
            deadline: None,
            stage: Stage::Unpolled,
        }
    }
}

/// What `ByHand` answers when it would have to do more than the floor.
#[cold]
fn beyond_the_floor<E>() -> RetryError<E> {
    RetryError::limited(LimitRefused {
        by: "beyond the floor",
        in_flight: 0,
        limit: 0,
        waited: Duration::ZERO,
    })
}

impl<Op, Fut, T, E> Future for ByHand<'_, Op, Fut>
where
    Op: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    type Output = Result<T, RetryError<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.stage.as_mut().project() {
                ByHandProj::Unpolled => {
                    let limits = this.policy.limits();
                    let lean = this.policy.is_lean()
                        && limits.rate_limit().is_none()
                        && limits.concurrency_limit().is_none()
                        && this.deadline.is_none()
                        && steadfast::deadline::current().is_none()
                        && !this.cancel.as_ref().is_some_and(CancelToken::is_cancelled);
                    if !lean {
                        this.stage.set(Stage::Over);
                        return Poll::Ready(Err(beyond_the_floor()));
                    }
                    let attempt = (this.op)(Attempt::new(1));
                    this.stage.set(Stage::Polling { attempt });
                }
                ByHandProj::Polling { attempt } => {
                    let outcome = std::task::ready!(attempt.poll(cx));
                    let verdict = steadfast::classify::AnyError.classify(&outcome);
                    this.stage.set(Stage::Over);
                    return Poll::Ready(match outcome {
                        Ok(value) if verdict == Verdict::Success => Ok(value),
                        _ => Err(beyond_the_floor()),
                    });
                }
                ByHandProj::Over => panic!("polled after it completed"),
            }
        }
    }
}

/// tower's retry policy: up to `n` attempts of any error.
#[derive(Clone)]
struct TowerAttempts(u32);

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

fn blocking(c: &mut Criterion) {
    let policy = plain();
    let limited = limited();
    let mut g = c.benchmark_group("floor_blocking");
    g.bench_function("direct", |b| b.iter(|| op(black_box(1))));
    g.bench_function("steadfast", |b| {
        b.iter(|| {
            (|_: Attempt| op(black_box(1)))
                .retry_blocking(&policy)
                .call()
        })
    });
    g.bench_function("steadfast +fb", |b| {
        b.iter(|| {
            (|_: Attempt| op(black_box(1)))
                .retry_blocking(&policy)
                .fallback(fallback::value(0))
                .call()
        })
    });
    g.bench_function("steadfast +limits", |b| {
        b.iter(|| {
            (|_: Attempt| op(black_box(1)))
                .retry_blocking(&limited)
                .call()
        })
    });
    g.bench_function("backon", |b| {
        b.iter(|| {
            backon::BlockingRetryable::retry(
                || op(black_box(1)),
                backon::ExponentialBuilder::default().with_max_times(3),
            )
            .call()
        })
    });
    g.finish();
}

fn runtime(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let policy = plain();
    let limited = limited();
    let chaos = chaos_off();
    let (policy, limited, chaos) = (&policy, &limited, &chaos);
    let mut g = c.benchmark_group("floor_runtime");
    g.bench_function("direct", |b| {
        b.to_async(&rt)
            .iter(|| async { op_async(black_box(1)).await })
    });
    g.bench_function("steadfast", |b| {
        b.to_async(&rt)
            .iter(|| async { (|_: Attempt| op_async(black_box(1))).retry(policy).await })
    });
    g.bench_function("by hand", |b| {
        b.to_async(&rt)
            .iter(|| async { ByHand::new(|_: Attempt| op_async(black_box(1)), policy).await })
    });
    g.bench_function("steadfast +fb", |b| {
        b.to_async(&rt).iter(|| async {
            (|_: Attempt| op_async(black_box(1)))
                .retry(policy)
                .fallback(fallback::value(0))
                .await
        })
    });
    g.bench_function("steadfast +chaos", |b| {
        b.to_async(&rt).iter(|| async {
            chaos
                .wrap(|_: Attempt| op_async(black_box(1)), TokioClock)
                .retry(policy)
                .await
        })
    });
    g.bench_function("steadfast +limits", |b| {
        b.to_async(&rt)
            .iter(|| async { (|_: Attempt| op_async(black_box(1))).retry(limited).await })
    });
    g.bench_function("tower", |b| {
        use tower::Service;
        let svc = std::cell::RefCell::new(tower::retry::Retry::new(
            TowerAttempts(4),
            tower::service_fn(|x: u64| op_async(x)),
        ));
        // The call's future owns what it needs; the service is not borrowed across it.
        b.to_async(&rt).iter(|| svc.borrow_mut().call(black_box(1)))
    });
    g.bench_function("backon", |b| {
        b.to_async(&rt).iter(|| async {
            backon::Retryable::retry(
                || op_async(black_box(1)),
                backon::ExponentialBuilder::default().with_max_times(3),
            )
            .await
        })
    });
    g.finish();
}

criterion_group!(benches, blocking, runtime);
criterion_main!(benches);
