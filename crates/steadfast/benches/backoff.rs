//! Producing 10 delays from a fresh exponential schedule with jitter:
//! steadfast against backon, tokio-retry and backoff, in one criterion group,
//! plus a plain loop without randomness as a floor.
//!
//! Every contender is configured alike: initial 100 ms, factor 2, max 10 s,
//! a jitter drawn per delay, no attempt or time limit. Each iteration makes a
//! fresh schedule (and its random source) and takes 10 delays.
//!
//! Run: `cargo bench -p steadfast --bench backoff -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::Duration;

use backoff::backoff::Backoff as _;
use backon::BackoffBuilder as _;
use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::Backoff;
use steadfast::backoff::{Rng, Schedule, ScheduleState};

const N: usize = 10;

fn ten_delays(c: &mut Criterion) {
    let mut group = c.benchmark_group("backoff: 10 delays, fresh exponential schedule with jitter");

    let schedule = Backoff::exponential()
        .initial(Duration::from_millis(100))
        .multiplier(2.0)
        .max_delay(Duration::from_secs(10))
        .jitter(steadfast::Jitter::Full)
        .build()
        .expect("valid configuration");
    group.bench_function("steadfast", |b| {
        b.iter(|| {
            let schedule = black_box(&schedule);
            let mut state = ScheduleState::new();
            let mut rng = Rng::from_entropy();
            for _ in 0..N {
                black_box(schedule.next_delay(&mut state, &mut rng));
            }
        });
    });

    let builder = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_factor(2.0)
        .with_max_delay(Duration::from_secs(10))
        .without_max_times()
        .with_jitter();
    group.bench_function("backon", |b| {
        b.iter(|| {
            let mut delays = black_box(builder).build();
            for _ in 0..N {
                black_box(delays.next());
            }
        });
    });

    group.bench_function("tokio-retry", |b| {
        b.iter(|| {
            let mut delays = tokio_retry::strategy::ExponentialBackoff::from_millis(black_box(2))
                .factor(50)
                .max_delay(Duration::from_secs(10))
                .map(tokio_retry::strategy::jitter);
            for _ in 0..N {
                black_box(delays.next());
            }
        });
    });

    group.bench_function("backoff", |b| {
        b.iter(|| {
            let mut delays = backoff::ExponentialBackoffBuilder::new()
                .with_initial_interval(black_box(Duration::from_millis(100)))
                .with_multiplier(2.0)
                .with_max_interval(Duration::from_secs(10))
                .with_max_elapsed_time(None)
                .build();
            for _ in 0..N {
                black_box(delays.next_backoff());
            }
        });
    });

    group.bench_function("floor: plain loop, no randomness", |b| {
        b.iter(|| {
            let (mut d, max) = (black_box(100_000_000u64), 10_000_000_000u64);
            for _ in 0..N {
                black_box(Duration::from_nanos(d));
                d = (d * 2).min(max);
            }
        });
    });

    group.finish();
}

criterion_group!(benches, ten_delays);
criterion_main!(benches);
