//! The hedging executor's success path against a direct call and tower's
//! `Hedge`, in the same criterion run: a copy that answers on its first poll
//! (no timer is armed), and one that is pending once (the hedge timer is
//! armed, then dropped).
//!
//! `cargo bench -p steadfast --bench hedge`
#![allow(missing_docs)]

use std::convert::Infallible;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast::{Attempt, HedgePolicy, Hedgeable};
use tower::{Service, ServiceExt};

async fn ready_op(a: Attempt) -> Result<u32, Infallible> {
    Ok(black_box(a.number))
}

async fn pending_once_op(a: Attempt) -> Result<u32, Infallible> {
    tokio::task::yield_now().await;
    Ok(black_box(a.number))
}

#[derive(Clone)]
struct CloneAll;

impl tower::hedge::Policy<u32> for CloneAll {
    fn clone_request(&self, req: &u32) -> Option<u32> {
        Some(*req)
    }
    fn can_retry(&self, _: &u32) -> bool {
        true
    }
}

/// Times `iters` sequential awaits of `work()` inside one `block_on`.
macro_rules! timed {
    ($rt:expr, $iters:expr, $work:expr) => {
        $rt.block_on(async {
            let start = Instant::now();
            for _ in 0..$iters {
                let _ = black_box($work.await);
            }
            start.elapsed()
        })
    };
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let policy = HedgePolicy::builder(Duration::from_millis(10))
        .max_attempts(3)
        .build()
        .expect("policy");
    let mut tower_hedge = rt.block_on(async {
        tower::hedge::Hedge::new(
            tower::service_fn(|a: u32| ready_op(Attempt::new(a))),
            CloneAll,
            10,
            0.9,
            Duration::from_secs(1),
        )
    });
    let mut tower_pending = rt.block_on(async {
        tower::hedge::Hedge::new(
            tower::service_fn(|a: u32| pending_once_op(Attempt::new(a))),
            CloneAll,
            10,
            0.9,
            Duration::from_secs(1),
        )
    });

    let mut g = c.benchmark_group("hedge success, first poll ready");
    g.bench_function("direct call", |b| {
        b.iter_custom(|n| timed!(rt, n, ready_op(Attempt::new(1))));
    });
    g.bench_function("steadfast hedge", |b| {
        b.iter_custom(|n| timed!(rt, n, ready_op.hedge(&policy).into_future()));
    });
    g.bench_function("tower hedge", |b| {
        b.iter_custom(|n| {
            timed!(rt, n, async {
                tower_hedge.ready().await.expect("ready").call(1).await
            })
        });
    });
    g.finish();

    let mut g = c.benchmark_group("hedge success, pending once (timer armed)");
    g.bench_function("direct call", |b| {
        b.iter_custom(|n| timed!(rt, n, pending_once_op(Attempt::new(1))));
    });
    g.bench_function("steadfast hedge", |b| {
        b.iter_custom(|n| timed!(rt, n, pending_once_op.hedge(&policy).into_future()));
    });
    g.bench_function("tower hedge", |b| {
        b.iter_custom(|n| {
            timed!(rt, n, async {
                tower_pending.ready().await.expect("ready").call(1).await
            })
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
