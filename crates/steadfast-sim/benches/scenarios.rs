//! Simulator throughput: simulated attempts per second, every scenario, one
//! strategy at a time (criterion's "elements" are the attempts the run
//! simulates: connection attempts for `herd`, attempts sent to the server for
//! `storm` and `metastable`, requests (every hedged copy) for `tail`).
//!
//! `cargo bench -p steadfast-sim --bench scenarios`

use std::time::Duration;

use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use steadfast_sim::herd::{self, HerdConfig};
use steadfast_sim::metastable::{self, MetastableConfig};
use steadfast_sim::storm::{self, Incident, StormConfig, StormStrategy};
use steadfast_sim::tail::{self, TailConfig};

/// Times `run` with the attempts it simulates as the throughput.
fn bench_one<M: criterion::measurement::Measurement>(
    group: &mut BenchmarkGroup<'_, M>,
    name: &str,
    run: impl Fn() -> u64,
) {
    group.throughput(Throughput::Elements(run()));
    group.bench_function(name, |b| b.iter(&run));
}

fn storm_config(strategy: &StormStrategy) -> StormConfig {
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
        strategies: vec![strategy.clone()],
        ..StormConfig::default()
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("storm_100k_clients");
    group.sample_size(10);
    for strategy in StormStrategy::standard() {
        let config = storm_config(&strategy);
        bench_one(&mut group, &strategy.name, || {
            storm::run(&config).map_or(0, |r| r.strategies[0].attempts)
        });
    }
    group.finish();

    let mut group = c.benchmark_group("metastable_default");
    group.sample_size(10);
    let all = MetastableConfig::default();
    for strategy in &all.strategies {
        let config = MetastableConfig {
            strategies: vec![strategy.clone()],
            ..all.clone()
        };
        bench_one(&mut group, &strategy.name, || {
            metastable::run(&config).map_or(0, |r| r.strategies[0].attempts)
        });
    }
    group.finish();

    let mut group = c.benchmark_group("herd_100k_clients");
    group.sample_size(10);
    let all = HerdConfig {
        clients: 100_000,
        ..HerdConfig::default()
    };
    for strategy in &all.strategies {
        let config = HerdConfig {
            strategies: vec![strategy.clone()],
            ..all.clone()
        };
        bench_one(&mut group, &strategy.name, || {
            herd::run(&config).map_or(0, |r| r.strategies[0].total_attempts)
        });
    }
    group.finish();

    let mut group = c.benchmark_group("tail_default");
    group.sample_size(10);
    let all = TailConfig::default();
    for strategy in &all.strategies {
        let config = TailConfig {
            strategies: vec![strategy.clone()],
            ..all.clone()
        };
        bench_one(&mut group, &strategy.name, || {
            tail::run(&config).map_or(0, |r| r.strategies[0].requests)
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
