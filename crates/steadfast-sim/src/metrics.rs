//! Measurements: peak counts in a sliding window, counts over time,
//! percentiles, each in memory that does not grow with the number of events
//! (except [`peak_in_window`] and [`percentile`], which take a slice the
//! caller already holds).
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

/// The peak number of events in a sliding window, streamed: events are
/// counted in steps of 1/100 of the window (a ring of 100 counters), and the
/// peak is the largest count over any 100 consecutive steps. So it is exact
/// for windows that start on a step boundary, and never more than one step
/// away from [`peak_in_window`] of the same events. Memory is fixed,
/// whatever the number of events.
///
/// ```
/// use steadfast_sim::metrics::SlidingPeak;
/// let mut p = SlidingPeak::new(100);
/// for t in [0, 10, 20, 200, 205, 210, 215] {
///     p.add(t);
/// }
/// assert_eq!(p.peak(), 4);
/// ```
#[derive(Debug, Clone)]
pub struct SlidingPeak {
    step: Nanos,
    slots: Vec<u64>,
    /// The step of the newest event counted.
    newest: u64,
    sum: u64,
    peak: u64,
}

impl SlidingPeak {
    /// A peak over windows `width` nanoseconds wide (at least 1).
    #[must_use]
    pub fn new(width: Nanos) -> Self {
        let width = width.max(1);
        let steps = width.min(100);
        Self {
            step: width / steps,
            slots: vec![0; usize::try_from(steps).unwrap_or(100)],
            newest: 0,
            sum: 0,
            peak: 0,
        }
    }

    /// Counts an event at time `at` (times must not go back).
    #[inline]
    pub fn add(&mut self, at: Nanos) {
        let step = at / self.step;
        let n = self.slots.len() as u64;
        if step > self.newest {
            if step - self.newest >= n {
                self.slots.fill(0);
                self.sum = 0;
            } else {
                for s in self.newest + 1..=step {
                    let slot = &mut self.slots[(s % n) as usize];
                    self.sum -= *slot;
                    *slot = 0;
                }
            }
            self.newest = step;
        }
        self.slots[(step % n) as usize] += 1;
        self.sum += 1;
        self.peak = self.peak.max(self.sum);
    }

    /// The peak so far.
    #[must_use]
    pub fn peak(&self) -> u64 {
        self.peak
    }
}

/// The largest burst of events above a rate, streamed: over every stretch of
/// time `[a, b]` between two events, the events in it less the
/// `(b - a) / interval` the rate earns in it, at its most. A GCRA quota of
/// this `interval` and a burst `B` (a [`steadfast::rate::Quota`]) admits
/// nothing that takes this above `B`, so it says, with two numbers of
/// memory, whether a stream of requests stayed within a quota over every
/// window at once (not only over fixed buckets).
///
/// ```
/// use steadfast_sim::metrics::BurstPeak;
/// // A rate of one per 10 ns.
/// let mut p = BurstPeak::new(10);
/// for t in [0, 0, 0, 10, 20] {
///     p.add(t);
/// }
/// // Three at once, then one per interval: a burst of 3.
/// assert_eq!(p.peak(), 3.0);
/// // Six in the 21 ns from 0 to 21, where the rate earns 2.1.
/// p.add(21);
/// assert!((p.peak() - 3.9).abs() < 1e-12);
/// assert_eq!(p.count(), 6);
/// assert_eq!(BurstPeak::new(10).peak(), 0.0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BurstPeak {
    interval: Nanos,
    count: u64,
    /// The least `j * interval - t_j` over the events so far.
    lowest: i128,
    /// The most `(k - j + 1) * interval - (t_k - t_j)` over `j <= k`.
    peak: i128,
}

impl BurstPeak {
    /// A peak over a rate of one event per `interval` nanoseconds (at
    /// least 1).
    #[must_use]
    pub fn new(interval: Nanos) -> Self {
        Self {
            interval: interval.max(1),
            count: 0,
            lowest: i128::MAX,
            peak: 0,
        }
    }

    /// Counts an event at time `at` (times must not go back).
    ///
    /// With `y_k = k * interval - t_k` for the `k`-th event, the events of
    /// `[t_j, t_k]` beyond the rate are `(y_k - y_j + interval) / interval`;
    /// keeping the least `y_j` so far makes each event one step.
    #[inline]
    pub fn add(&mut self, at: Nanos) {
        self.count += 1;
        let y = i128::from(self.count) * i128::from(self.interval) - i128::from(at);
        self.lowest = self.lowest.min(y);
        self.peak = self.peak.max(y - self.lowest + i128::from(self.interval));
    }

    /// Events counted.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The largest burst above the rate, in events (0 before any event).
    #[must_use]
    pub fn peak(&self) -> f64 {
        self.peak as f64 / self.interval as f64
    }
}

/// Latencies in a fixed-size HDR histogram (3 significant digits, from 1 ns
/// to about 10 days; longer values are counted at the top): quantiles with a
/// relative error below 0.1 %, and an exact count and mean, in memory that
/// does not depend on how many latencies are recorded.
///
/// ```
/// use steadfast_sim::metrics::LatencyHistogram;
/// let mut h = LatencyHistogram::new();
/// for ns in 1..=1000 {
///     h.record(ns * 1_000);
/// }
/// assert_eq!(h.len(), 1000);
/// let p99 = h.quantile(0.99).unwrap();
/// assert!(p99.abs_diff(990_000) <= 990); // within 0.1 %
/// assert_eq!(h.mean(), Some(500_500.0));
/// assert_eq!(LatencyHistogram::new().quantile(0.5), None);
/// ```
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    histogram: hdrhistogram::Histogram<u64>,
    sum: u128,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// The highest value told apart (about 10 days, in nanoseconds).
    const HIGH: u64 = 864_000_000_000_000;

    /// An empty histogram.
    #[must_use]
    pub fn new() -> Self {
        Self {
            // The bounds are constants that hdrhistogram accepts (low 1,
            // high >= 2, 3 digits), so this cannot fail.
            histogram: hdrhistogram::Histogram::new_with_bounds(1, Self::HIGH, 3)
                .unwrap_or_else(|_| unreachable!("constant bounds are valid")),
            sum: 0,
        }
    }

    /// Records one latency in nanoseconds.
    #[inline]
    pub fn record(&mut self, nanos: Nanos) {
        self.histogram.saturating_record(nanos.min(Self::HIGH));
        self.sum += u128::from(nanos);
    }

    /// Latencies recorded.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.histogram.len()
    }

    /// Whether nothing was recorded.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// The `q`-quantile (0..=1), `None` when empty or `q` is NaN.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<Nanos> {
        if self.is_empty() || q.is_nan() {
            return None;
        }
        Some(self.histogram.value_at_quantile(q.clamp(0.0, 1.0)))
    }

    /// The exact mean in nanoseconds, `None` when empty.
    #[must_use]
    pub fn mean(&self) -> Option<f64> {
        (!self.is_empty()).then(|| self.sum as f64 / self.len() as f64)
    }

    /// Empties it, keeping its memory (for one histogram per bucket of time,
    /// reused from bucket to bucket).
    ///
    /// ```
    /// use steadfast_sim::metrics::LatencyHistogram;
    /// let mut h = LatencyHistogram::new();
    /// h.record(5);
    /// h.clear();
    /// assert!(h.is_empty());
    /// assert_eq!(h.mean(), None);
    /// ```
    pub fn clear(&mut self) {
        self.histogram.clear();
        self.sum = 0;
    }
}

/// Latency quantiles per bucket of time, streamed: latencies must be
/// recorded in the order of their times (a simulation's completion times
/// are), so one histogram serves every bucket in turn and memory holds only
/// two numbers per bucket.
///
/// ```
/// use steadfast_sim::metrics::BucketQuantiles;
/// let mut q = BucketQuantiles::new(100);
/// for (at, latency) in [(0, 10), (50, 30), (120, 7), (350, 9)] {
///     q.record(at, latency);
/// }
/// q.finish(4);
/// assert_eq!(q.p50(), &[Some(10), Some(7), None, Some(9)]);
/// assert_eq!(q.p99(), &[Some(30), Some(7), None, Some(9)]);
/// ```
#[derive(Debug, Clone)]
pub struct BucketQuantiles {
    bucket: Nanos,
    current: usize,
    histogram: LatencyHistogram,
    p50: Vec<Option<Nanos>>,
    p99: Vec<Option<Nanos>>,
}

impl BucketQuantiles {
    /// Quantiles per bucket `bucket` nanoseconds wide (at least 1).
    #[must_use]
    pub fn new(bucket: Nanos) -> Self {
        Self {
            bucket: bucket.max(1),
            current: 0,
            histogram: LatencyHistogram::new(),
            p50: Vec::new(),
            p99: Vec::new(),
        }
    }

    /// Records `latency` at time `at` (never before a time recorded earlier;
    /// one that is counts in the current bucket).
    #[inline]
    pub fn record(&mut self, at: Nanos, latency: Nanos) {
        let i = usize::try_from(at / self.bucket).unwrap_or(usize::MAX);
        while self.current < i {
            self.close();
        }
        self.histogram.record(latency);
    }

    fn close(&mut self) {
        self.p50.push(self.histogram.quantile(0.5));
        self.p99.push(self.histogram.quantile(0.99));
        self.histogram.clear();
        self.current += 1;
    }

    /// Closes every bucket up to `len` buckets (the one in progress
    /// included), so the series cover the whole run.
    pub fn finish(&mut self, len: usize) {
        while self.p50.len() < len {
            self.close();
        }
    }

    /// The width of a bucket in nanoseconds.
    #[must_use]
    pub fn bucket(&self) -> Nanos {
        self.bucket
    }

    /// The median of each closed bucket (`None`: nothing recorded in it).
    #[must_use]
    pub fn p50(&self) -> &[Option<Nanos>] {
        &self.p50
    }

    /// The 99th percentile of each closed bucket.
    #[must_use]
    pub fn p99(&self) -> &[Option<Nanos>] {
        &self.p99
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
    fn streamed_peak_is_within_one_step_of_the_exact_one() {
        let mut rng = steadfast::backoff::Rng::with_seed(3);
        let mut t = 0u64;
        let mut times = Vec::new();
        let mut streamed = SlidingPeak::new(1_000);
        let mut wider = SlidingPeak::new(1_010);
        for _ in 0..20_000 {
            t += rng.next_u64() % 40;
            times.push(t);
            streamed.add(t);
            wider.add(t);
        }
        let exact = peak_in_window(&times, 1_000);
        // Step-aligned windows are a subset of all windows, and every window
        // lies inside a step-aligned one a step wider.
        assert!(streamed.peak() <= exact, "{} > {exact}", streamed.peak());
        assert!(wider.peak() >= exact, "{} < {exact}", wider.peak());
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

    #[test]
    fn burst_peak_is_the_brute_force_envelope() {
        let mut rng = steadfast::backoff::Rng::with_seed(5);
        for round in 0..200u64 {
            let interval = 1 + rng.next_u64() % 50;
            let mut t = 0u64;
            let mut times = Vec::new();
            let mut streamed = BurstPeak::new(interval);
            for _ in 0..(1 + rng.next_u64() % 60) {
                // Ties, short gaps and long ones.
                t += match rng.next_u64() % 4 {
                    0 => 0,
                    1 => rng.next_u64() % interval,
                    _ => rng.next_u64() % (3 * interval * (1 + round % 3)),
                };
                times.push(t);
                streamed.add(t);
            }
            // Every window between two events, in units of the interval.
            let mut exact = 0i128;
            for j in 0..times.len() {
                for k in j..times.len() {
                    let cells = i128::try_from(k - j + 1).unwrap() * i128::from(interval);
                    exact = exact.max(cells - i128::from(times[k] - times[j]));
                }
            }
            assert_eq!(streamed.peak, exact, "{times:?} / {interval}");
            assert_eq!(streamed.count(), times.len() as u64);
        }
    }
}
