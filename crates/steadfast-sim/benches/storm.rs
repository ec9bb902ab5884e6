//! Simulator throughput: simulated attempts per second for the `storm`
//! scenario at 100,000 clients (each with its own retry policy and control).
//!
//! `cargo bench -p steadfast-sim --bench storm`

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use steadfast_sim::storm::{self, Incident, StormConfig, StormStrategy};

fn config(strategy: &str) -> StormConfig {
    StormConfig {
        clients: 100_000,
        call_rate: 100_000.0,
        duration: Duration::from_secs(3),
        incident: Incident::outage(Duration::from_secs(1), Duration::from_secs(1)),
        server: steadfast_sim::server::ServerConfig {
            concurrency: 1_500,
            queue_limit: 1_500,
            latency: steadfast_sim::Latency::Exponential {
                mean: Duration::from_millis(10),
            },
        },
        strategies: StormStrategy::standard()
            .into_iter()
            .filter(|s| s.name == strategy)
            .collect(),
        ..StormConfig::default()
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("storm_100k_clients");
    group.sample_size(10);
    for name in [storm::PLAIN, storm::RETRY_BUDGET] {
        let config = config(name);
        let attempts = match storm::run(&config) {
            Ok(r) => r.strategies.iter().map(|s| s.attempts).sum::<u64>(),
            Err(e) => panic!("bench config refused: {e}"),
        };
        group.throughput(Throughput::Elements(attempts));
        group.bench_function(name, |b| b.iter(|| storm::run(&config)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
