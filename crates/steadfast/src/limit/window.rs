//! The sample window of an adaptive limit, lock-free: every finished
//! attempt adds to it with a few atomic operations, and the one that
//! finds it ready closes it and hands the [`Window`] to the algorithm.

use std::time::Duration;

use super::algorithm::Window;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// How long and how full a window must be before it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct WindowRule {
    /// At least this long, in nanoseconds.
    pub(super) min_time: u64,
    /// At least this many samples (drops included).
    pub(super) min_samples: u32,
    /// Successes faster than this are not samples (nanoseconds): a cache hit
    /// or a local short-cut says nothing of the dependency.
    pub(super) min_rtt: u64,
}

/// The open window's counters. Each is updated on its own; an attempt that
/// finishes while the window closes may have its count in one window and
/// its latency in the next, which moves an average by a hair and is
/// accepted for a window that never blocks.
#[derive(Debug)]
pub(super) struct Sampler {
    rule: WindowRule,
    opened: AtomicU64,
    samples: AtomicU64,
    drops: AtomicU64,
    rtt_sum: AtomicU64,
    measured: AtomicU64,
    min_rtt: AtomicU64,
    max_in_flight: AtomicU64,
    closing: AtomicBool,
}

impl Sampler {
    /// An empty window, opened at `now` (nanoseconds of the limit's clock).
    pub(super) fn new(rule: WindowRule, now: u64) -> Self {
        Self {
            rule,
            opened: AtomicU64::new(now),
            samples: AtomicU64::new(0),
            drops: AtomicU64::new(0),
            rtt_sum: AtomicU64::new(0),
            measured: AtomicU64::new(0),
            min_rtt: AtomicU64::new(u64::MAX),
            max_in_flight: AtomicU64::new(0),
            closing: AtomicBool::new(false),
        }
    }

    /// Notes that an attempt started with `in_flight` attempts in flight
    /// (itself included): the window keeps the most.
    #[inline]
    pub(super) fn note_in_flight(&self, in_flight: u32) {
        self.max_in_flight
            .fetch_max(u64::from(in_flight), Ordering::Relaxed);
    }

    /// Adds one finished attempt, which took `rtt` nanoseconds (`None`: a
    /// drop). Returns the window when this attempt closed it.
    pub(super) fn add(&self, now: u64, rtt: Option<u64>) -> Option<Window> {
        match rtt {
            None => {
                self.drops.fetch_add(1, Ordering::Relaxed);
            }
            Some(rtt) if rtt >= self.rule.min_rtt => {
                self.rtt_sum.fetch_add(rtt, Ordering::Relaxed);
                self.measured.fetch_add(1, Ordering::Relaxed);
                self.min_rtt.fetch_min(rtt, Ordering::Relaxed);
            }
            Some(_) => return None,
        }
        let samples = self.samples.fetch_add(1, Ordering::AcqRel) + 1;
        if samples < u64::from(self.rule.min_samples)
            || now.saturating_sub(self.opened.load(Ordering::Acquire)) < self.rule.min_time
        {
            return None;
        }
        // Ready: the first to claim it closes it; the others go on adding.
        if self.closing.swap(true, Ordering::AcqRel) {
            return None;
        }
        let window = self.take(now);
        self.closing.store(false, Ordering::Release);
        Some(window)
    }

    /// Empties the counters into a [`Window`] and opens the next at `now`.
    fn take(&self, now: u64) -> Window {
        let samples = self.samples.swap(0, Ordering::AcqRel);
        let drops = self.drops.swap(0, Ordering::Relaxed);
        let rtt_sum = self.rtt_sum.swap(0, Ordering::Relaxed);
        let measured = self.measured.swap(0, Ordering::Relaxed);
        let min_rtt = self.min_rtt.swap(u64::MAX, Ordering::Relaxed);
        let max_in_flight = self.max_in_flight.swap(0, Ordering::Relaxed);
        self.opened.store(now, Ordering::Release);
        let to_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let mut window =
            Window::new(to_u32(samples), to_u32(max_in_flight)).with_drops(to_u32(drops));
        if let Some(average) = rtt_sum.checked_div(measured) {
            window = window.with_rtt(
                Duration::from_nanos(average),
                Duration::from_nanos(min_rtt.min(rtt_sum)),
            );
        }
        window
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const RULE: WindowRule = WindowRule {
        min_time: 1_000,
        min_samples: 3,
        min_rtt: 10,
    };

    #[test]
    fn a_window_closes_once_long_and_full_enough() {
        let s = Sampler::new(RULE, 0);
        s.note_in_flight(6);
        assert_eq!(s.add(2_000, Some(100)), None); // long enough, 1 sample
        assert_eq!(s.add(2_000, Some(300)), None);
        let w = s.add(2_000, None).expect("third sample closes it");
        assert_eq!((w.samples, w.drops, w.max_in_flight), (3, 1, 6));
        assert_eq!(
            (w.rtt, w.min_rtt),
            (
                Some(Duration::from_nanos(200)),
                Some(Duration::from_nanos(100))
            )
        );
        // The next window opened at 2_000: full but not long enough.
        for _ in 0..5 {
            assert_eq!(s.add(2_500, Some(100)), None);
        }
        assert_eq!(s.add(3_000, Some(100)).map(|w| w.samples), Some(6));
    }

    #[test]
    fn too_fast_successes_are_not_samples_but_drops_always_are() {
        let s = Sampler::new(RULE, 0);
        for _ in 0..10 {
            assert_eq!(s.add(5_000, Some(9)), None);
        }
        s.add(5_000, None);
        s.add(5_000, None);
        let w = s.add(5_000, None).expect("three drops close it");
        assert_eq!(
            (w.samples, w.drops, w.rtt, w.max_in_flight),
            (3, 3, None, 0)
        );
    }
}
