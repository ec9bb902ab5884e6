//! A call through a rate-limit layer, as users run it: a tower stack over a
//! service that answers at once, readied and called on a current-thread
//! tokio runtime. steadfast's `RateLimitLayer` (shared quota, GCRA) against
//! tower's `RateLimit` (a count per service), with the bare service as the
//! floor. Every quota is far above what the loop spends: nothing is refused.
//!
//! ```text
//! cargo bench -p steadfast-tower --bench rate -- --warm-up-time 1 --measurement-time 3
//! ```
#![allow(missing_docs)]

mod support;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::rate::{Quota, RateLimit};
use steadfast_tower::RateLimitLayer;
use tower::{ServiceBuilder, service_fn};

const HUGE: u32 = 1_000_000_000;

fn layers(c: &mut Criterion) {
    let rt = support::runtime();
    let echo = || service_fn(|n: u64| std::future::ready(Ok::<_, std::convert::Infallible>(n)));
    let mut g = c.benchmark_group("rate/layer call, tokio");
    g.bench_function("steadfast RateLimitLayer", |b| {
        let limit = RateLimit::new(Quota::per_second(HUGE).expect("valid"));
        let mut svc = ServiceBuilder::new()
            .layer(RateLimitLayer::new(limit))
            .service(echo());
        b.iter(|| support::call(&rt, &mut svc));
    });
    g.bench_function("tower RateLimit", |b| {
        // tower's limit makes its sleep when it is built: inside the runtime.
        let _entered = rt.enter();
        let mut svc = ServiceBuilder::new()
            .rate_limit(u64::from(HUGE), Duration::from_secs(1))
            .service(echo());
        b.iter(|| support::call(&rt, &mut svc));
    });
    g.bench_function("no layer (the floor)", |b| {
        let mut svc = echo();
        b.iter(|| support::call(&rt, &mut svc));
    });
    g.finish();
}

criterion_group!(benches, layers);
criterion_main!(benches);
