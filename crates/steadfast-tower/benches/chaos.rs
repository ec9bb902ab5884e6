//! A call through a chaos layer switched off, as users run it (a tower
//! stack over a service that answers at once, readied and called on a
//! current-thread tokio runtime), beside the bare service: what a chaos
//! layer left in a build costs when it is off. A fallback layer over a
//! retry layer whose call succeeds is measured beside the retry layer
//! alone. The success path is all these measure.
//!
//! ```text
//! cargo bench -p steadfast-tower --bench chaos -- --warm-up-time 1 --measurement-time 3
//! ```
#![allow(missing_docs)]

mod support;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::chaos::Chaos;
use steadfast::fallback;
use steadfast::{Backoff, RetryPolicy};
use steadfast_tower::{ChaosLayer, FallbackLayer, RetryLayer};
use tower::{Service, ServiceBuilder, service_fn};

type Error = std::io::Error;

fn echo()
-> impl Service<u64, Response = u64, Error = Error, Future = std::future::Ready<Result<u64, Error>>>
+ Clone {
    service_fn(|n: u64| std::future::ready(Ok::<_, Error>(n)))
}

fn layers(c: &mut Criterion) {
    let rt = support::runtime();
    let mut g = c.benchmark_group("chaos/layer call, tokio");
    g.bench_function("ChaosLayer, switched off", |b| {
        let chaos: Chaos<u64, Error> = Chaos::builder()
            .latency(0.5, Duration::from_millis(100))
            .error(0.5, || Error::other("injected"))
            .build()
            .expect("valid");
        let mut svc = ServiceBuilder::new()
            .layer(ChaosLayer::new(chaos))
            .service(echo());
        b.iter(|| support::call(&rt, &mut svc));
    });
    g.bench_function("no layer (the floor)", |b| {
        let mut svc = echo();
        b.iter(|| support::call(&rt, &mut svc));
    });
    g.finish();

    let policy = RetryPolicy::builder()
        .backoff(
            Backoff::constant(Duration::from_millis(10))
                .build()
                .expect("valid"),
        )
        .build()
        .expect("valid");
    let mut g = c.benchmark_group("fallback/layer call, tokio");
    g.bench_function("FallbackLayer over RetryLayer", |b| {
        let mut svc = ServiceBuilder::new()
            .layer(FallbackLayer::new(fallback::value(0_u64)))
            .layer(RetryLayer::new(policy.clone()))
            .service(echo());
        b.iter(|| support::call(&rt, &mut svc));
    });
    g.bench_function("RetryLayer alone", |b| {
        let mut svc = ServiceBuilder::new()
            .layer(RetryLayer::new(policy.clone()))
            .service(echo());
        b.iter(|| support::call(&rt, &mut svc));
    });
    g.finish();
}

criterion_group!(benches, layers);
criterion_main!(benches);
