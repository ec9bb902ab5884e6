//! A concurrency limit's success path, against tower's static limit and an
//! adaptive peer (congestion-limiter), in one criterion run:
//!
//! - `limit/slot`: take a slot and give it back, on one thread (the
//!   primitive: steadfast's fixed and adaptive limits, the tokio semaphore
//!   under `tower::limit::ConcurrencyLimit`, congestion-limiter's AIMD
//!   `try_acquire` + `release`, awaited; its Gradient panics in `release`
//!   here, on a `Duration` subtraction that overflows for a latency below
//!   its estimate, so it is left out);
//! - `limit/slot_2_threads`: the same on two threads sharing one limit;
//! - `limit/service`: a request through each as a layer, as users run it:
//!   `poll_ready`, `call`, the response future awaited on a tokio
//!   current-thread runtime.
//!
//! ```sh
//! cargo bench -p steadfast-tower --bench limit
//! ```
#![allow(clippy::unwrap_used, missing_docs)]

use std::cell::RefCell;
use std::convert::Infallible;
use std::future::{Ready, ready};
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use congestion_limiter::limiter::{DefaultLimiter, Limiter, Outcome};
use congestion_limiter::limits::Aimd as PeerAimd;
use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::limit::{ConcurrencyLimit, Gradient2, Signal};
use steadfast_tower::ConcurrencyLimitLayer;
use tokio::sync::Semaphore;
use tower::{Layer, Service, service_fn};

const SLOTS: u32 = 1000;

fn fixed() -> ConcurrencyLimit {
    ConcurrencyLimit::fixed(SLOTS).build().unwrap()
}

fn adaptive() -> ConcurrencyLimit {
    let g = Gradient2::builder()
        .initial_limit(SLOTS)
        .max_limit(SLOTS)
        .min_limit(1)
        .build()
        .unwrap();
    ConcurrencyLimit::adaptive(g).build().unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn slot(c: &mut Criterion) {
    let mut g = c.benchmark_group("limit/slot");
    let limit = fixed();
    g.bench_function("steadfast_fixed", |b| {
        b.iter(|| black_box(limit.try_acquire().unwrap()).finish(Signal::Success));
    });
    let limit = adaptive();
    g.bench_function("steadfast_gradient2", |b| {
        b.iter(|| black_box(limit.try_acquire().unwrap()).finish(Signal::Success));
    });
    let semaphore = Arc::new(Semaphore::new(SLOTS as usize));
    g.bench_function("tokio_semaphore_owned", |b| {
        b.iter(|| {
            drop(black_box(
                Arc::clone(&semaphore).try_acquire_owned().unwrap(),
            ));
        });
    });
    let rt = runtime();
    let peer = DefaultLimiter::new(
        PeerAimd::new_with_initial_limit(SLOTS as usize).with_max_limit(SLOTS as usize),
    );
    g.bench_function("congestion_limiter_aimd", |b| {
        b.to_async(&rt).iter(|| async {
            let token = peer.try_acquire().await.unwrap();
            black_box(peer.release(token, Some(Outcome::Success)).await);
        });
    });
    g.finish();
}

/// `iters` takes and gives back, split over two threads that start
/// together; the time of the slower.
fn two_threads(iters: u64, work: impl Fn() + Send + Sync + 'static) -> Duration {
    let work = Arc::new(work);
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (work, barrier) = (Arc::clone(&work), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                for _ in 0..iters / 2 {
                    work();
                }
                start.elapsed()
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .max()
        .unwrap()
}

fn slot_2_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("limit/slot_2_threads");
    let limit = fixed();
    g.bench_function("steadfast_fixed", |b| {
        b.iter_custom(|iters| {
            let limit = limit.clone();
            two_threads(iters, move || {
                black_box(limit.try_acquire().unwrap()).finish(Signal::Success);
            })
        });
    });
    let limit = adaptive();
    g.bench_function("steadfast_gradient2", |b| {
        b.iter_custom(|iters| {
            let limit = limit.clone();
            two_threads(iters, move || {
                black_box(limit.try_acquire().unwrap()).finish(Signal::Success);
            })
        });
    });
    let semaphore = Arc::new(Semaphore::new(SLOTS as usize));
    g.bench_function("tokio_semaphore_owned", |b| {
        b.iter_custom(|iters| {
            let semaphore = Arc::clone(&semaphore);
            two_threads(iters, move || {
                drop(black_box(
                    Arc::clone(&semaphore).try_acquire_owned().unwrap(),
                ));
            })
        });
    });
    g.finish();
}

/// The backend: answers at once.
fn backend()
-> impl Service<u64, Response = u64, Error = Infallible, Future = Ready<Result<u64, Infallible>>> + Clone
{
    service_fn(|x: u64| ready(Ok::<_, Infallible>(black_box(x) + 1)))
}

/// `poll_ready` (answered at once by every contender) then `call`.
fn call<S: Service<u64>>(service: &RefCell<S>, request: u64) -> S::Future {
    let mut service = service.borrow_mut();
    let mut cx = Context::from_waker(Waker::noop());
    match service.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => service.call(request),
        _ => panic!("every contender is ready at once here"),
    }
}

fn service(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("limit/service");
    let svc = RefCell::new(backend());
    g.bench_function("no_limit", |b| b.to_async(&rt).iter(|| call(&svc, 1)));
    let svc = RefCell::new(ConcurrencyLimitLayer::new(fixed()).layer(backend()));
    g.bench_function("steadfast_fixed", |b| {
        b.to_async(&rt).iter(|| call(&svc, 1));
    });
    let svc = RefCell::new(ConcurrencyLimitLayer::new(adaptive()).layer(backend()));
    g.bench_function("steadfast_gradient2", |b| {
        b.to_async(&rt).iter(|| call(&svc, 1));
    });
    let svc =
        RefCell::new(tower::limit::ConcurrencyLimitLayer::new(SLOTS as usize).layer(backend()));
    g.bench_function("tower_concurrency_limit", |b| {
        b.to_async(&rt).iter(|| call(&svc, 1));
    });
    g.finish();
}

criterion_group!(benches, slot, slot_2_threads, service);
criterion_main!(benches);
