//! Proves a retry layer's success path allocates nothing: a call whose first
//! attempt succeeds, through `RetryLayer` over a service that answers at
//! once, makes no heap allocation with the policy lent as a `&'static`, in
//! an `Arc` or by value, in either output form. A call that is not lean (a
//! policy with a time limit) is run by the core from the start: two
//! allocations, the layer's boxed stages and the core's running stage.
//!
//! A counting global allocator sees every allocation of the process, so this
//! test runs without the parallel test harness (`harness = false`).

#![allow(clippy::print_stdout)] // a harness-less test reports its own result

use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use steadfast::RetryPolicy;
use steadfast_tower::RetryLayer;
use tower::{Layer, Service, service_fn};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn allocations_during(f: impl FnOnce()) -> usize {
    let region = Region::new(GLOBAL);
    f();
    let stats = region.change();
    stats.allocations + stats.reallocations
}

fn poll_once<F: Future>(fut: F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    pin!(fut).poll(&mut cx)
}

fn backend()
-> impl Service<u64, Response = u64, Error = Infallible, Future = Ready<Result<u64, Infallible>>> + Clone
{
    service_fn(|x: u64| ready(Ok::<_, Infallible>(x + 1)))
}

/// `poll_ready` then `call`, and the future polled once: it must be ready.
fn one_call<S: Service<u64>>(service: &mut S) -> Poll<Result<S::Response, S::Error>> {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(service.poll_ready(&mut cx).is_ready());
    poll_once(service.call(1))
}

fn main() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .build()
        .expect("valid policy");
    let leaked: &'static RetryPolicy = Box::leak(Box::new(policy.clone()));
    let mut lent = RetryLayer::lend(leaked).layer(backend());
    let mut shared = RetryLayer::new(policy.clone()).layer(backend());
    let mut by_value = RetryLayer::lend(policy.clone()).layer(backend());
    let timed = RetryPolicy::builder()
        .max_elapsed(Duration::from_secs(5))
        .build()
        .expect("valid policy");
    let mut not_lean = RetryLayer::new(timed).layer(backend());
    let reported = RetryLayer::lend(leaked);
    let mut checks = 0;

    // The call that is not lean arms a timer for its deadline: on tokio's.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let _runtime = rt.enter();

    // Warm up lazily initialised statics.
    for _ in 0..3 {
        let _ = one_call(&mut lent);
        let _ = one_call(&mut not_lean);
    }

    let n = allocations_during(|| assert!(matches!(one_call(&mut lent), Poll::Ready(Ok(2)))));
    assert_eq!(
        n, 0,
        "RetryLayer::lend(&'static), success path: {n} allocations"
    );
    checks += 1;

    let n = allocations_during(|| assert!(matches!(one_call(&mut shared), Poll::Ready(Ok(2)))));
    assert_eq!(n, 0, "RetryLayer::new (Arc), success path: {n} allocations");
    checks += 1;

    let n = allocations_during(|| assert!(matches!(one_call(&mut by_value), Poll::Ready(Ok(2)))));
    assert_eq!(
        n, 0,
        "RetryLayer::lend(policy), success path: {n} allocations"
    );
    checks += 1;

    let n = allocations_during(|| {
        let mut cx = Context::from_waker(Waker::noop());
        let mut service = backend();
        assert!(service.poll_ready(&mut cx).is_ready());
        let report = match poll_once(reported.run_reported(service, 1)) {
            Poll::Ready(report) => report,
            Poll::Pending => panic!("the backend answers at once"),
        };
        assert_eq!((report.attempts, report.stop), (1, None));
    });
    assert_eq!(
        n, 0,
        "RetryLayer::run_reported, success path: {n} allocations"
    );
    checks += 1;

    let n = allocations_during(|| assert!(matches!(one_call(&mut not_lean), Poll::Ready(Ok(2)))));
    assert_eq!(
        n, 2,
        "a call that is not lean: the stages and the running stage, got {n}"
    );
    checks += 1;

    println!("success_path_allocations: {checks} checks passed");
}
