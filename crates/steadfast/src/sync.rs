//! The atomics every lock-free part of the crate is built on (the
//! controls, the concurrency and rate limits, the chaos's ceiling):
//! `std`'s normally, `loom`'s under `--cfg loom`, so the model checker can
//! explore every interleaving of the very code that ships.
//!
//! Run the model tests with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p steadfast --release --lib control::
//! ```
//!
//! `.ci/run` runs them (and the concurrency limits') with
//! `LOOM_MAX_PREEMPTIONS=2`, which bounds each model to about a minute in
//! all; without it they take about six.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};

/// Keeps a hot atomic on its own cache line (128 bytes covers the adjacent-
/// line prefetch of x86 and the 128-byte lines of some ARM cores), so
/// threads writing it do not slow down threads reading its neighbours.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

/// Stripes of a [`StripedCounter`]: enough for the few threads that hit one
/// control at once on a small machine; more threads share stripes (still
/// exact, just contended).
const STRIPES: usize = 4;

/// A counter written by many threads and read rarely (telemetry): spread
/// over cache-line-padded stripes, each thread adding to its own (assigned
/// round-robin when the thread first counts), so two threads counting at
/// once do not bounce one cache line between their cores. Every addition is
/// an atomic `fetch_add` on a stripe, so none is lost; a read sums the
/// stripes (exact once the additions it races with are done).
#[derive(Debug)]
pub(crate) struct StripedCounter {
    stripes: [CachePadded<AtomicU64>; STRIPES],
}

impl StripedCounter {
    pub(crate) fn new() -> Self {
        Self {
            stripes: std::array::from_fn(|_| CachePadded(AtomicU64::new(0))),
        }
    }

    /// Adds one.
    #[inline]
    pub(crate) fn increment(&self) {
        if let Some(stripe) = self.stripes.get(stripe()) {
            stripe.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The sum over the stripes.
    pub(crate) fn sum(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

/// This thread's stripe, `< STRIPES`.
#[inline]
fn stripe() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static STRIPE: usize = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % STRIPES;
    }
    STRIPE.with(|s| *s)
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Racing increments (same stripe or not) are all counted.
    #[test]
    fn striped_counter_loses_nothing() {
        loom::model(|| {
            let counter = Arc::new(StripedCounter::new());
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    let counter = Arc::clone(&counter);
                    thread::spawn(move || counter.increment())
                })
                .collect();
            counter.increment();
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(counter.sum(), 3);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn striped_counter_sums_every_thread() {
        let counter = std::sync::Arc::new(StripedCounter::new());
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let counter = std::sync::Arc::clone(&counter);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        counter.increment();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(counter.sum(), 6000);
    }
}
