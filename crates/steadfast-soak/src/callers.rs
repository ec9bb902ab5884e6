//! The callers of a soak: calls `0..calls`, `concurrency` at a time, each
//! worker taking the next call number until none is left.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Runs `one(call)` for every call number, `concurrency` at a time; the
/// records in call order. A worker that panics loses its records (the
/// soak counts the panic).
pub async fn run<F, Fut, R>(calls: u64, concurrency: usize, one: F) -> Vec<R>
where
    F: Fn(u64) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = R> + Send,
    R: Send + 'static,
{
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (one, next) = (one.clone(), Arc::clone(&next));
        workers.spawn(async move {
            let mut records = Vec::new();
            loop {
                let call = next.fetch_add(1, Ordering::Relaxed);
                if call >= calls {
                    return records;
                }
                records.push((call, one(call).await));
            }
        });
    }
    drop(one);
    let mut records = Vec::new();
    while let Some(done) = workers.join_next().await {
        match done {
            Ok(mut r) => records.append(&mut r),
            Err(e) => eprintln!("a caller task failed: {e}"),
        }
    }
    records.sort_by_key(|(call, _)| *call);
    records.into_iter().map(|(_, r)| r).collect()
}
