//! The success path of a request through each layer against tower's own
//! middleware and no middleware, in one criterion run, as users run it:
//! `poll_ready` then `call`, the response future awaited on a tokio
//! current-thread runtime (criterion's `to_async`).
//!
//! ```sh
//! cargo bench -p steadfast-tower --bench layers
//! ```
#![allow(clippy::unwrap_used, missing_docs)]

use std::cell::RefCell;
use std::convert::Infallible;
use std::future::{IntoFuture, Ready, ready};
use std::hint::black_box;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::{Attempt, HedgePolicy, RetryPolicy, Retryable};
use steadfast_tower::{HedgeLayer, RetryLayer};
use tower::{Layer, Service, service_fn};

/// The backend: answers at once.
fn backend()
-> impl Service<u64, Response = u64, Error = Infallible, Future = Ready<Result<u64, Infallible>>> + Clone
{
    service_fn(|x: u64| ready(Ok::<_, Infallible>(black_box(x) + 1)))
}

/// `poll_ready` (answered at once by every contender here) then `call`; the
/// caller awaits the future. The service is borrowed only for the two calls.
fn call<S: Service<u64>>(service: &RefCell<S>, request: u64) -> S::Future {
    let mut service = service.borrow_mut();
    let mut cx = Context::from_waker(Waker::noop());
    match service.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => service.call(request),
        _ => panic!("the backend is always ready"),
    }
}

/// tower's retry needs a policy: this one retries errors, three attempts.
#[derive(Clone)]
struct TowerAttempts(usize);

impl<Req: Clone, Res, E> tower::retry::Policy<Req, Res, E> for TowerAttempts {
    type Future = Ready<()>;
    fn retry(&mut self, _: &mut Req, result: &mut Result<Res, E>) -> Option<Self::Future> {
        match result {
            Err(_) if self.0 > 1 => {
                self.0 -= 1;
                Some(ready(()))
            }
            _ => None,
        }
    }
    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
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

/// A service's future whose output is widened to the `Result` a steadfast
/// layer gives (`RetryError` is larger than `Infallible`): what returning
/// that output alone costs.
struct Widen<F>(F);

impl<F: std::future::Future<Output = Result<u64, Infallible>> + Unpin> std::future::Future
    for Widen<F>
{
    type Output = Result<u64, steadfast::RetryError<Infallible>>;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map_err(|e| match e {}))
    }
}

/// The least a retrying layer's success path must do, as a floor: read the
/// ambient deadline, keep what a retry would need (the policy, the call's
/// name and the request to send again), classify the outcome, and give the
/// result with a `RetryError`'s width. It retries nothing: a floor, not a
/// layer.
#[derive(Clone)]
struct LeastLayer<S> {
    inner: S,
    policy: &'static RetryPolicy,
    name: Option<&'static str>,
}

struct LeastFuture<F> {
    attempt: F,
    kept: Option<(&'static RetryPolicy, Option<&'static str>, u64)>,
}

impl<S: Service<u64, Response = u64, Error = Infallible>> Service<u64> for LeastLayer<S>
where
    S::Future: Unpin,
{
    type Response = u64;
    type Error = steadfast::RetryError<Infallible>;
    type Future = LeastFuture<S::Future>;
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(|e| match e {})
    }
    fn call(&mut self, request: u64) -> Self::Future {
        assert!(
            steadfast::deadline::current().is_none(),
            "a floor for the lean path"
        );
        LeastFuture {
            attempt: self.inner.call(request),
            kept: Some((self.policy, self.name, request)),
        }
    }
}

impl<F: std::future::Future<Output = Result<u64, Infallible>> + Unpin> std::future::Future
    for LeastFuture<F>
{
    type Output = Result<u64, steadfast::RetryError<Infallible>>;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        use steadfast::Classify;
        let outcome = std::task::ready!(std::pin::Pin::new(&mut self.attempt).poll(cx));
        assert!(self.kept.is_some(), "polled after it completed");
        let verdict = steadfast::classify::AnyError.classify(&outcome);
        self.kept = None;
        match outcome {
            Ok(value) if verdict == steadfast::Verdict::Success => Poll::Ready(Ok(value)),
            _ => unreachable!("the backend always succeeds"),
        }
    }
}

fn success(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("layer_success");

    let bare = RefCell::new(backend());
    g.bench_function("no layer", |b| {
        b.to_async(&rt).iter(|| call(&bare, black_box(1)));
    });

    // The floors of a steadfast layer, in the same run: the ambient deadline
    // every call must honour (one thread-local read, which tower's `Retry`
    // does not make), and the core's retry future over the same backend,
    // with no layer (what `RetryLayer` runs; its lean path).
    g.bench_function("floor: no layer + one ambient-deadline read", |b| {
        b.to_async(&rt).iter(|| {
            black_box(steadfast::deadline::current());
            call(&bare, black_box(1))
        });
    });
    g.bench_function(
        "floor: no layer, output as wide as a RetryError result",
        |b| {
            b.to_async(&rt).iter(|| Widen(call(&bare, black_box(1))));
        },
    );
    let core_policy: &'static RetryPolicy = Box::leak(Box::new(
        RetryPolicy::builder().max_attempts(3).build().unwrap(),
    ));
    let least = RefCell::new(LeastLayer {
        inner: backend(),
        policy: core_policy,
        name: None,
    });
    g.bench_function(
        "floor: the least a retrying layer does (retries nothing)",
        |b| {
            b.to_async(&rt).iter(|| call(&least, black_box(1)));
        },
    );
    g.bench_function("floor: the core's RetryFuture, no layer", |b| {
        b.to_async(&rt).iter(|| {
            (|_: Attempt| ready(Ok::<u64, Infallible>(black_box(1) + 1)))
                .retry(core_policy)
                .into_future()
        });
    });

    let tower_retry = RefCell::new(tower::retry::Retry::new(TowerAttempts(3), backend()));
    g.bench_function("tower::retry::Retry", |b| {
        b.to_async(&rt).iter(|| call(&tower_retry, black_box(1)));
    });

    // The policy lent three ways: in an `Arc` (`new`: two locked instructions
    // per call), by value (a 264-byte copy per call), or as a `&'static` (a pointer).
    let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
    let retry = RefCell::new(RetryLayer::lend(policy.clone()).layer(backend()));
    g.bench_function("steadfast RetryLayer (policy by value)", |b| {
        b.to_async(&rt).iter(|| call(&retry, black_box(1)));
    });
    let retry = RefCell::new(RetryLayer::new(policy.clone()).layer(backend()));
    g.bench_function("steadfast RetryLayer (Arc policy)", |b| {
        b.to_async(&rt).iter(|| call(&retry, black_box(1)));
    });
    let leaked: &'static RetryPolicy = Box::leak(Box::new(policy));
    let retry = RefCell::new(RetryLayer::lend(leaked).layer(backend()));
    g.bench_function("steadfast RetryLayer (&'static policy)", |b| {
        b.to_async(&rt).iter(|| call(&retry, black_box(1)));
    });

    let tower_hedge = rt.block_on(async {
        RefCell::new(tower::hedge::Hedge::new(
            backend(),
            CloneAll,
            10,
            0.9,
            Duration::from_secs(1),
        ))
    });
    g.bench_function("tower::hedge::Hedge", |b| {
        b.to_async(&rt).iter(|| call(&tower_hedge, black_box(1)));
    });

    let hedge_policy = HedgePolicy::builder(Duration::from_millis(10))
        .max_attempts(2)
        .build()
        .unwrap();
    let hedge = RefCell::new(HedgeLayer::new(hedge_policy).layer(backend()));
    g.bench_function("steadfast HedgeLayer", |b| {
        b.to_async(&rt).iter(|| call(&hedge, black_box(1)));
    });
    g.finish();
}

criterion_group!(benches, success);
criterion_main!(benches);
