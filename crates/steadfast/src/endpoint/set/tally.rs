//! An endpoint's outcomes since the last sweep, for outlier detection:
//! gRFC A50's two buckets (the interval being counted, the one the sweep
//! reads) as one atomic word that the sweep reads and zeroes at once, so
//! no outcome is lost between them or counted twice.

use crate::sync::{AtomicU64, Ordering};

/// The successes (high half) and failures (low half) since the last
/// [`take`](Self::take). A half holds 2^32 - 1: far more calls than one
/// endpoint finishes in a sweep's interval.
#[derive(Debug)]
pub(super) struct Tally(AtomicU64);

/// One success, in the high half.
const SUCCESS: u64 = 1 << 32;
/// The low half.
const LOW: u64 = 0xffff_ffff;

impl Tally {
    pub(super) fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Counts one outcome.
    #[inline]
    pub(super) fn record(&self, failure: bool) {
        self.0
            .fetch_add(if failure { 1 } else { SUCCESS }, Ordering::Relaxed);
    }

    /// The successes and failures counted since the last take, zeroed in
    /// the same step.
    pub(super) fn take(&self) -> (u64, u64) {
        let word = self.0.swap(0, Ordering::Relaxed);
        (word >> 32, word & LOW)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_take_reads_both_halves_and_starts_over() {
        let tally = Tally::new();
        for failure in [false, true, false, false, true] {
            tally.record(failure);
        }
        assert_eq!(tally.take(), (3, 2));
        assert_eq!(tally.take(), (0, 0));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Two calls finish on two threads while a sweep takes the tally: every
    /// outcome lands in exactly one take, in its own half.
    #[test]
    fn no_outcome_is_lost_or_counted_twice_across_a_sweep() {
        loom::model(|| {
            let tally = loom::sync::Arc::new(Tally::new());
            let threads: Vec<_> = [false, true]
                .into_iter()
                .map(|failure| {
                    let tally = loom::sync::Arc::clone(&tally);
                    loom::thread::spawn(move || tally.record(failure))
                })
                .collect();
            let swept = tally.take();
            for t in threads {
                t.join().expect("a recording thread");
            }
            let rest = tally.take();
            assert_eq!((swept.0 + rest.0, swept.1 + rest.1), (1, 1));
        });
    }
}
