//! Simulator throughput: simulated attempts per second, every scenario, one
//! strategy at a time (criterion's "elements" are the attempts the run
//! simulates: connection attempts for `herd`, attempts sent to the server for
//! `storm` and `metastable`, requests (every hedged copy) for `tail`).
//!
//! Time is the **CPU time of the simulating thread** (`CLOCK_THREAD_CPUTIME_ID`),
//! not wall-clock time: the simulator is single-threaded, so this is its
//! speed per core, and it does not move with the load other processes put on
//! a shared machine (wall-clock time on a busy 2-core machine is up to twice
//! as long). `STEADFAST_BENCH_WALL=1` measures wall-clock time instead.
//!
//! `cargo bench -p steadfast-sim --bench scenarios`

use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{BenchmarkGroup, Criterion, Throughput};
use steadfast_sim::herd::{self, HerdConfig};
use steadfast_sim::metastable::{self, MetastableConfig};
use steadfast_sim::storm::{self, Incident, StormConfig, StormStrategy};
use steadfast_sim::tail::{self, TailConfig};

/// CPU time the calling thread has used, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    u64::try_from(cpu_time::ThreadTime::now().as_duration().as_nanos()).unwrap_or(u64::MAX)
}

/// Criterion measurement: the benchmark thread's CPU time.
struct ThreadCpu;

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

/// Formats CPU nanoseconds like wall time ("ms of CPU"), and throughput
/// as elements per CPU second.
struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, ns: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = if ns < 1e3 {
            (1.0, "ns cpu")
        } else if ns < 1e6 {
            (1e-3, "µs cpu")
        } else if ns < 1e9 {
            (1e-6, "ms cpu")
        } else {
            (1e-9, "s cpu")
        };
        for v in values {
            *v *= factor;
        }
        unit
    }

    fn scale_throughputs(
        &self,
        ns: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let elements = match *throughput {
            Throughput::Elements(n) | Throughput::ElementsAndBytes { elements: n, .. } => n as f64,
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) => n as f64,
            Throughput::Bits(n) => n as f64,
        };
        let per_sec = elements * 1e9 / ns;
        let (factor, unit) = if per_sec < 1e3 {
            (1.0, "elem/cpu-s")
        } else if per_sec < 1e6 {
            (1e-3, "Kelem/cpu-s")
        } else {
            (1e-6, "Melem/cpu-s")
        };
        for v in values {
            *v = elements * 1e9 / *v * factor;
        }
        unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

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
        // 10 s of calls, about 10 per client: building and dropping the
        // 100,000 clients' policies and controls (a retry budget is 768
        // bytes) is part of every run, and over 3 s it was a third of the
        // retry-budget row's time.
        duration: Duration::from_secs(10),
        incident: Incident::outage(Duration::from_secs(3), Duration::from_secs(3)),
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

fn bench<M: Measurement>(c: &mut Criterion<M>) {
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

fn main() {
    if std::env::var_os("STEADFAST_BENCH_WALL").is_some() {
        let mut c = Criterion::default()
            .with_measurement(WallTime)
            .configure_from_args();
        bench(&mut c);
        c.final_summary();
    } else {
        let mut c = Criterion::default()
            .with_measurement(ThreadCpu)
            .configure_from_args();
        bench(&mut c);
        c.final_summary();
    }
}
