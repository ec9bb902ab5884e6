//! Measurements: peak counts in a sliding window, counts over time, percentiles.
//!
//! ```
//! use steadfast_sim::metrics::{peak_in_window, percentile};
//!
//! // Event times in nanoseconds, sorted.
//! let times = [0, 10, 20, 200, 205, 210, 215];
//! assert_eq!(peak_in_window(&times, 100), 4); // 200..300 holds four
//! let mut latencies = vec![5, 1, 4, 2, 3];
//! latencies.sort_unstable();
//! assert_eq!(percentile(&latencies, 0.5), Some(3));
//! ```

use serde::Serialize;

use crate::engine::Nanos;

/// The largest number of `sorted` event times that fall in any half-open
/// window `[t, t + width)`, over every `t` (a sliding window, not fixed
/// buckets). `sorted` must be in ascending order; `width == 0` gives 0.
#[must_use]
pub fn peak_in_window(sorted: &[Nanos], width: Nanos) -> u64 {
    if width == 0 {
        return 0;
    }
    let mut peak = 0usize;
    let mut lo = 0usize;
    for (hi, &t) in sorted.iter().enumerate() {
        while t - sorted[lo] >= width {
            lo += 1;
        }
        peak = peak.max(hi + 1 - lo);
    }
    peak as u64
}

/// The `q`-quantile (0..=1) of `sorted` by the nearest-rank method, `None`
/// when empty. `sorted` must be in ascending order.
#[must_use]
pub fn percentile(sorted: &[Nanos], q: f64) -> Option<Nanos> {
    if sorted.is_empty() || q.is_nan() {
        return None;
    }
    let n = sorted.len();
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}

/// Counts of events in fixed buckets of time, for plots and per-bucket rates.
///
/// ```
/// use steadfast_sim::metrics::Series;
/// let mut s = Series::new(100);
/// s.add(5);
/// s.add(150);
/// s.add(199);
/// assert_eq!(s.counts(), &[1, 2]);
/// assert_eq!(s.count_at(1), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Series {
    bucket: Nanos,
    counts: Vec<u64>,
}

impl Series {
    /// An empty series with buckets `bucket` nanoseconds wide (at least 1).
    #[must_use]
    pub fn new(bucket: Nanos) -> Self {
        Self {
            bucket: bucket.max(1),
            counts: Vec::new(),
        }
    }

    /// Counts one event at time `at`.
    #[inline]
    pub fn add(&mut self, at: Nanos) {
        self.add_n(at, 1);
    }

    /// Counts `n` events at time `at`.
    #[inline]
    pub fn add_n(&mut self, at: Nanos, n: u64) {
        let i = usize::try_from(at / self.bucket).unwrap_or(usize::MAX);
        if i >= self.counts.len() {
            // Bounded by the simulation's horizon, which every scenario checks.
            self.counts.resize(i.saturating_add(1), 0);
        }
        self.counts[i] += n;
    }

    /// The width of a bucket in nanoseconds.
    #[must_use]
    pub fn bucket(&self) -> Nanos {
        self.bucket
    }

    /// The counts, bucket by bucket from time zero.
    #[must_use]
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// The count in bucket `i` (0 past the end).
    #[must_use]
    pub fn count_at(&self, i: usize) -> u64 {
        self.counts.get(i).copied().unwrap_or(0)
    }

    /// Pads the series with empty buckets up to `len` buckets.
    pub fn extend_to(&mut self, len: usize) {
        if self.counts.len() < len {
            self.counts.resize(len, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_peak_finds_windows_between_buckets() {
        // Fixed 100-wide buckets would see 2 + 2; the sliding window sees 4.
        assert_eq!(peak_in_window(&[60, 80, 120, 140], 100), 4);
        assert_eq!(peak_in_window(&[0, 100, 200], 100), 1);
        assert_eq!(peak_in_window(&[], 100), 0);
        assert_eq!(peak_in_window(&[1, 2, 3], 0), 0);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&v, 0.5), Some(500));
        assert_eq!(percentile(&v, 0.99), Some(990));
        assert_eq!(percentile(&v, 0.999), Some(999));
        assert_eq!(percentile(&v, 1.0), Some(1000));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
