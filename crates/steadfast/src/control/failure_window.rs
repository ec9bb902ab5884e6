//! The failure window: refuse retries while too many of the last attempts
//! failed.

use std::fmt;

use super::{Outcome, Refusal, RefusingFlag, RetryControl, report_transition};
use crate::config_error::ConfigError;
use crate::sync::{AtomicI64, AtomicU64, CachePadded, Ordering};

const NAME: &str = "failure window";

/// Refuses retries while more than `threshold` of the last `8·n` attempts
/// failed.
///
/// The window is a ring of `8·n` bits (`n` bytes), one per reported attempt:
/// 1 for a retryable failure, 0 for a success. Each report claims its own
/// position with one `fetch_add` on a cursor and sets or clears its bit with
/// one `fetch_or` / `fetch_and` on the word that holds it, so concurrent
/// reports are never lost or torn (the classic bug is a load-then-store of
/// the whole word). A separate atomic counter follows the number of set bits:
/// it moves only when a bit actually flips, so it equals the ring's popcount
/// whenever no report is in flight, and `allow_retry` is one atomic load.
///
/// Admits every first attempt; `allow_retry` costs nothing to refund.
///
/// ```
/// use steadfast::control::{FailureWindow, Outcome, RetryControl};
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// // 8 attempts; refuse while more than 2 of them failed.
/// let window = FailureWindow::builder().bytes(1).threshold(2).build()?;
/// for _ in 0..3 {
///     window.record(Outcome::RetryableFailure);
/// }
/// assert_eq!(window.allow_retry().unwrap_err().by, "failure window");
/// window.record(Outcome::Success); // the ring still holds 3 failures out of 4
/// assert!(window.allow_retry().is_err());
/// for _ in 0..7 {
///     window.record(Outcome::Success); // 8 reports later each failure ages out
/// }
/// assert!(window.allow_retry().is_ok());
/// assert_eq!(window.snapshot().failures, 0);
/// # Ok(()) }
/// ```
pub struct FailureWindow {
    words: Box<[AtomicU64]>,
    bits: u64,
    /// `bits - 1` when `bits` is a power of two (the default 128 is), so a
    /// report's position is a mask, not a 64-bit division; `None` otherwise.
    pow2_mask: Option<u64>,
    /// Written by every report: kept off the line `allow_retry` reads.
    cursor: CachePadded<AtomicU64>,
    failures: AtomicI64,
    threshold: u32,
    refusals: AtomicU64,
    flag: RefusingFlag,
}

/// Builds a [`FailureWindow`]; see [`FailureWindow::builder`].
///
/// ```
/// use steadfast::control::FailureWindow;
/// let err = FailureWindow::builder().bytes(0).build().unwrap_err();
/// assert_eq!(err.field(), "bytes");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureWindowBuilder {
    bytes: u32,
    threshold: u32,
}

/// The state of a [`FailureWindow`] at one moment, for telemetry.
///
/// ```
/// use steadfast::control::FailureWindow;
/// let window = FailureWindow::builder().build().unwrap();
/// let snap = window.snapshot();
/// assert_eq!((snap.capacity, snap.threshold, snap.failures), (128, 16, 0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureWindowSnapshot {
    /// Failures among the last `capacity` reports.
    pub failures: u32,
    /// The size of the window, in attempts (`8·n`).
    pub capacity: u32,
    /// Reports so far (the window is full once this reaches `capacity`).
    pub recorded: u64,
    /// Retries are refused while `failures > threshold`.
    pub threshold: u32,
    /// Whether a retry asked for now would be refused.
    pub refusing: bool,
    /// Retries refused so far.
    pub refusals: u64,
}

/// Largest window accepted, in bytes (8 Mi attempts).
const MAX_BYTES: u32 = 1 << 20;

impl FailureWindow {
    /// A builder with the defaults: a window of 16 bytes (the last 128
    /// attempts), refusing while more than 16 of them failed (12.5 %).
    ///
    /// ```
    /// use steadfast::control::FailureWindow;
    /// let window = FailureWindow::builder().bytes(4).threshold(8).build().unwrap();
    /// assert_eq!(window.snapshot().capacity, 32);
    /// ```
    #[must_use]
    pub const fn builder() -> FailureWindowBuilder {
        FailureWindowBuilder {
            bytes: 16,
            threshold: 16,
        }
    }

    /// The number of failures among the last `8·n` reports.
    ///
    /// ```
    /// use steadfast::control::{FailureWindow, Outcome, RetryControl};
    /// let window = FailureWindow::builder().build().unwrap();
    /// window.record(Outcome::RetryableFailure);
    /// assert_eq!(window.failures(), 1);
    /// ```
    #[must_use]
    pub fn failures(&self) -> u32 {
        // Transiently (between a bit flip and the counter update of two racing
        // reports on the same position) the counter can be off by the number
        // of reports in flight; clamp into the ring's range.
        let count = self
            .failures
            .load(Ordering::Acquire)
            .clamp(0, self.bits as i64);
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// The current state, for telemetry.
    ///
    /// ```
    /// use steadfast::control::{FailureWindow, Outcome, RetryControl};
    /// let window = FailureWindow::builder().bytes(1).threshold(0).build().unwrap();
    /// window.record(Outcome::RetryableFailure);
    /// let snap = window.snapshot();
    /// assert!(snap.refusing);
    /// assert_eq!((snap.failures, snap.recorded), (1, 1));
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> FailureWindowSnapshot {
        let failures = self.failures();
        FailureWindowSnapshot {
            failures,
            capacity: u32::try_from(self.bits).unwrap_or(u32::MAX),
            recorded: self.cursor.0.load(Ordering::Relaxed),
            threshold: self.threshold,
            refusing: failures > self.threshold,
            refusals: self.refusals.load(Ordering::Relaxed),
        }
    }

    /// The popcount of the ring itself (tests check it against the counter).
    #[cfg(test)]
    fn popcount(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Acquire).count_ones()))
            .sum()
    }
}

impl FailureWindowBuilder {
    /// The window holds the last `8 * bytes` attempts; `bytes` must be in
    /// `1..=1_048_576`.
    #[must_use]
    pub const fn bytes(mut self, bytes: u32) -> Self {
        self.bytes = bytes;
        self
    }

    /// Retries are refused while more than `threshold` attempts in the window
    /// failed; must be below the window size `8 * bytes`.
    #[must_use]
    pub const fn threshold(mut self, threshold: u32) -> Self {
        self.threshold = threshold;
        self
    }

    /// Checks the settings and builds the window (all successes).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when `bytes` is 0 or above 1 MiB, or when `threshold`
    /// is not below `8 * bytes` (the window could then never refuse).
    pub fn build(self) -> Result<FailureWindow, ConfigError> {
        if self.bytes == 0 || self.bytes > MAX_BYTES {
            return Err(ConfigError::new(
                NAME,
                "bytes",
                "must be in 1..=1048576",
                self.bytes,
            ));
        }
        let bits = u64::from(self.bytes) * 8;
        if u64::from(self.threshold) >= bits {
            return Err(ConfigError::new(
                NAME,
                "threshold",
                "must be below the window size (8 * bytes)",
                self.threshold,
            ));
        }
        let words = (0..bits.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
        Ok(FailureWindow {
            words,
            bits,
            pow2_mask: bits.is_power_of_two().then(|| bits - 1),
            cursor: CachePadded(AtomicU64::new(0)),
            failures: AtomicI64::new(0),
            threshold: self.threshold,
            refusals: AtomicU64::new(0),
            flag: RefusingFlag::new(),
        })
    }
}

impl RetryControl for FailureWindow {
    fn name(&self) -> &'static str {
        NAME
    }

    #[inline]
    fn record(&self, outcome: Outcome) {
        let failed = outcome == Outcome::RetryableFailure;
        let ticket = self.cursor.0.fetch_add(1, Ordering::Relaxed);
        let pos = match self.pow2_mask {
            Some(mask) => ticket & mask,
            None => ticket % self.bits,
        };
        // `pos / 64` < words.len() by construction (bits <= 64 * len).
        let Some(word) = self.words.get((pos / 64) as usize) else {
            return;
        };
        let mask = 1u64 << (pos % 64);
        // Already the wanted value: nothing to flip (a load, not a write).
        if (word.load(Ordering::Relaxed) & mask != 0) == failed {
            return;
        }
        let prev = if failed {
            word.fetch_or(mask, Ordering::AcqRel)
        } else {
            word.fetch_and(!mask, Ordering::AcqRel)
        };
        if (prev & mask != 0) == failed {
            return; // a racing report at the same position flipped it first
        }
        let delta = if failed { 1 } else { -1 };
        let new = self.failures.fetch_add(delta, Ordering::AcqRel) + delta;
        let threshold = i64::from(self.threshold);
        // Refusing above the threshold; recovered at half of it.
        if let Some(now_refusing) = self.flag.note(new > threshold, 2 * new <= threshold) {
            report_transition(NAME, now_refusing, &self.snapshot());
        }
    }

    #[inline]
    fn allow_retry(&self) -> Result<(), Refusal> {
        if self.failures.load(Ordering::Acquire) > i64::from(self.threshold) {
            self.refusals.fetch_add(1, Ordering::Relaxed);
            Err(Refusal { by: NAME })
        } else {
            Ok(())
        }
    }
}

impl fmt::Debug for FailureWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FailureWindow")
            .field("state", &self.snapshot())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn validation() {
        assert_eq!(
            FailureWindow::builder()
                .bytes(0)
                .build()
                .unwrap_err()
                .field(),
            "bytes"
        );
        assert_eq!(
            FailureWindow::builder()
                .bytes(MAX_BYTES + 1)
                .build()
                .unwrap_err()
                .field(),
            "bytes"
        );
        let err = FailureWindow::builder()
            .bytes(1)
            .threshold(8)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "threshold");
        assert!(
            FailureWindow::builder()
                .bytes(1)
                .threshold(7)
                .build()
                .is_ok()
        );
    }

    #[test]
    fn refuses_only_above_threshold() {
        let w = FailureWindow::builder()
            .bytes(2)
            .threshold(3)
            .build()
            .unwrap();
        for _ in 0..3 {
            w.record(Outcome::RetryableFailure);
        }
        assert!(w.allow_retry().is_ok(), "3 failures do not exceed 3");
        w.record(Outcome::RetryableFailure);
        assert_eq!(w.allow_retry(), Err(Refusal { by: NAME }));
        assert_eq!(w.snapshot().refusals, 1);
    }

    #[test]
    fn failures_age_out_after_a_full_turn() {
        let w = FailureWindow::builder()
            .bytes(1)
            .threshold(0)
            .build()
            .unwrap();
        w.record(Outcome::RetryableFailure);
        for i in 0..7 {
            w.record(Outcome::Success);
            assert!(w.allow_retry().is_err(), "still in window after {i}");
        }
        w.record(Outcome::Success); // overwrites the failure's position
        assert!(w.allow_retry().is_ok());
        assert_eq!(w.popcount(), 0);
    }

    #[test]
    fn windows_that_are_not_a_multiple_of_64_bits() {
        let w = FailureWindow::builder()
            .bytes(3)
            .threshold(23)
            .build()
            .unwrap();
        for _ in 0..24 {
            w.record(Outcome::RetryableFailure);
        }
        assert_eq!(w.failures(), 24);
        assert!(w.allow_retry().is_err());
        for _ in 0..24 {
            w.record(Outcome::Success);
        }
        assert_eq!((w.failures(), w.popcount()), (0, 0));
    }

    #[test]
    fn concurrent_reports_are_never_lost() {
        let w = std::sync::Arc::new(
            FailureWindow::builder()
                .bytes(128)
                .threshold(0)
                .build()
                .unwrap(),
        );
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let w = std::sync::Arc::clone(&w);
                std::thread::spawn(move || {
                    for _ in 0..256 {
                        w.record(Outcome::RetryableFailure);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!((w.failures(), w.popcount()), (1024, 1024));
    }

    proptest! {
        /// Against a sequential model: the count and the ring's popcount both
        /// equal the number of failures among the last 8n reports.
        #[test]
        fn matches_the_sequential_model(
            bytes in 1u32..5,
            reports in proptest::collection::vec(any::<bool>(), 0..200),
        ) {
            let bits = bytes as usize * 8;
            let w = FailureWindow::builder().bytes(bytes).threshold(0).build().unwrap();
            for (i, &failed) in reports.iter().enumerate() {
                w.record(if failed { Outcome::RetryableFailure } else { Outcome::Success });
                let start = (i + 1).saturating_sub(bits);
                let model = reports[start..=i].iter().filter(|&&f| f).count();
                prop_assert_eq!(w.failures() as usize, model);
                prop_assert_eq!(w.popcount() as usize, model);
                prop_assert_eq!(w.allow_retry().is_err(), model > 0);
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two threads report into the same word: neither report is lost, and the
    /// counter agrees with the ring.
    #[test]
    fn no_lost_update_on_one_word() {
        loom::model(|| {
            let w = Arc::new(
                FailureWindow::builder()
                    .bytes(1)
                    .threshold(1)
                    .build()
                    .unwrap(),
            );
            let a = {
                let w = Arc::clone(&w);
                thread::spawn(move || w.record(Outcome::RetryableFailure))
            };
            let b = {
                let w = Arc::clone(&w);
                thread::spawn(move || w.record(Outcome::RetryableFailure))
            };
            w.record(Outcome::Success);
            a.join().unwrap();
            b.join().unwrap();
            assert_eq!(w.failures(), 2);
            assert_eq!(w.popcount(), 2);
            assert_eq!(w.snapshot().recorded, 3);
            assert!(w.allow_retry().is_err());
        });
    }

    /// The ring has turned: successes overwrite failures in the same word,
    /// racing with a failure that lands on a set bit; the count stays exact.
    #[test]
    fn wraparound_races_keep_the_count_exact() {
        loom::model(|| {
            let w = Arc::new(
                FailureWindow::builder()
                    .bytes(1)
                    .threshold(0)
                    .build()
                    .unwrap(),
            );
            for _ in 0..8 {
                w.record(Outcome::RetryableFailure);
            }
            let a = {
                let w = Arc::clone(&w);
                thread::spawn(move || w.record(Outcome::Success))
            };
            let b = {
                let w = Arc::clone(&w);
                thread::spawn(move || w.record(Outcome::Success))
            };
            w.record(Outcome::RetryableFailure);
            a.join().unwrap();
            b.join().unwrap();
            // Positions 0..3 got two successes and a failure between them.
            assert_eq!(w.failures(), 6);
            assert_eq!(w.popcount(), 6);
        });
    }
}
