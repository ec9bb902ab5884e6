//! The cost of a balanced call on its success path: `poll_ready` then
//! `call` on a balancer over 10 endpoints that answer at once, the response
//! awaited on a tokio current-thread runtime (criterion's `to_async`), as
//! users run it, beside tower's own power-of-two-choices balancer with its
//! two load measures, in one criterion run.
//!
//! ```sh
//! cargo bench -p steadfast-tower --bench balance
//! ```
//!
//! What each does per call: steadfast's `Balance` asks every endpoint that
//! is not ready (the one the last call used), picks two of the ready ones
//! from the shared set (a read of its list, two loads under their locks),
//! and finishes the pick when the response is ready (the round trip, a
//! tally for outlier detection); tower's `p2c::Balance` keeps a ready cache,
//! picks two of it and reads their `Load` (`PeakEwma`: a lock per read and
//! an instant per call; `PendingRequests`: a reference count).
#![allow(clippy::unwrap_used, missing_docs)]

use std::cell::RefCell;
use std::convert::Infallible;
use std::future::{Ready, ready};
use std::hint::black_box;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::endpoint::Endpoints;
use steadfast_tower::balance::Balance;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PeakEwmaDiscover, PendingRequestsDiscover};
use tower::{Service, service_fn};

type Backend = tower::util::ServiceFn<fn(u64) -> Ready<Result<u64, Infallible>>>;

fn answer(x: u64) -> Ready<Result<u64, Infallible>> {
    ready(Ok(black_box(x) + 1))
}

/// Ten endpoints that answer at once.
fn endpoints() -> Vec<Backend> {
    (0..10)
        .map(|_| service_fn(answer as fn(u64) -> _))
        .collect()
}

/// `poll_ready` (every contender here is ready at once) then `call`.
fn call<S: Service<u64>>(service: &RefCell<S>, request: u64) -> S::Future
where
    S::Error: std::fmt::Debug,
{
    let mut service = service.borrow_mut();
    let mut cx = Context::from_waker(Waker::noop());
    match service.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => service.call(request),
        other => panic!("an endpoint is always ready: {other:?}"),
    }
}

fn balance(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("balance_10");
    {
        let _guard = rt.enter();
        let set = Endpoints::builder().build().unwrap();
        let steadfast = RefCell::new(Balance::new(ServiceList::new(endpoints()), set));
        g.bench_function("steadfast p2c peak-ewma", |b| {
            b.to_async(&rt).iter(|| call(&steadfast, 1));
        });
        let ewma = RefCell::new(tower::balance::p2c::Balance::new(PeakEwmaDiscover::new(
            ServiceList::new(endpoints()),
            Duration::from_millis(30),
            Duration::from_secs(10),
            CompleteOnResponse::default(),
        )));
        g.bench_function("tower p2c peak-ewma", |b| {
            b.to_async(&rt).iter(|| call(&ewma, 1));
        });
        let pending = RefCell::new(tower::balance::p2c::Balance::new(
            PendingRequestsDiscover::new(
                ServiceList::new(endpoints()),
                CompleteOnResponse::default(),
            ),
        ));
        g.bench_function("tower p2c pending", |b| {
            b.to_async(&rt).iter(|| call(&pending, 1));
        });
        let one = RefCell::new(service_fn(answer as fn(u64) -> _));
        g.bench_function("one endpoint, no balancer", |b| {
            b.to_async(&rt).iter(|| call(&one, 1));
        });
    }
    g.finish();
}

criterion_group!(benches, balance);
criterion_main!(benches);
