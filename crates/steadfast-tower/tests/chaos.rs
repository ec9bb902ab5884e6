//! The chaos layer: off means the service sees every request; on, its
//! faults replace or delay requests as the chaos draws them.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use steadfast::chaos::Chaos;
use steadfast::clock::{Clock, VirtualClock};
use steadfast_tower::ChaosLayer;
use tower::{Service, ServiceBuilder, ServiceExt};

fn counted(
    calls: &Arc<AtomicU64>,
) -> impl Service<u32, Response = u32, Error = std::io::Error> + use<> {
    let calls = calls.clone();
    tower::service_fn(move |n: u32| {
        calls.fetch_add(1, Ordering::Relaxed);
        async move { Ok(n) }
    })
}

#[tokio::test]
async fn switched_off_it_passes_every_request_and_draws_nothing() {
    let chaos: Chaos<u32, std::io::Error> = Chaos::builder()
        .seed(1)
        .latency(1.0, Duration::from_secs(3600))
        .error(1.0, || std::io::Error::other("injected"))
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let mut svc = ServiceBuilder::new()
        .layer(ChaosLayer::new(chaos.clone()))
        .service(counted(&calls));
    for n in 0..1000 {
        assert_eq!(svc.ready().await.unwrap().call(n).await.unwrap(), n);
    }
    assert_eq!(calls.load(Ordering::Relaxed), 1000);
    assert_eq!(chaos.stats().drawn, 0);
}

#[tokio::test]
async fn substituted_outcomes_never_reach_the_service_and_latencies_run_on_the_clock() {
    let clock = VirtualClock::new();
    let chaos: Chaos<u32, std::io::Error> = Chaos::builder()
        .enabled(true)
        .seed(21)
        .latency(0.5, Duration::from_millis(100))
        .outcome(0.3, || 503)
        .build()
        .unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let mut svc = ServiceBuilder::new()
        .layer(ChaosLayer::new(chaos.clone()).clock(clock.clone()))
        .service(counted(&calls));
    let start = clock.now();
    let mut substituted = 0;
    for n in 0..10_000 {
        // The service echoes 1000 and up, so 503 is only ever substituted.
        substituted += u64::from(svc.ready().await.unwrap().call(n + 1000).await.unwrap() == 503);
    }
    let stats = chaos.stats();
    assert_eq!(stats.outcomes, substituted);
    assert_eq!(calls.load(Ordering::Relaxed), 10_000 - substituted);
    assert!((2_800..3_200).contains(&substituted), "{substituted}");
    let slept = u32::try_from(stats.latencies).unwrap();
    assert_eq!(clock.now() - start, Duration::from_millis(100) * slept);
    assert_eq!(stats.active, 0);
}
