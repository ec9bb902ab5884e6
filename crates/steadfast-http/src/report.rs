//! How a call went: attempts made, hedges sent, time spent waiting.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use steadfast::Clock;

/// How a call went, on a [`Response`](crate::Response) and an
/// [`Error`](crate::Error).
///
/// ```
/// let report = steadfast_http::Report::default();
/// assert_eq!(report.attempts, 0);
/// assert_eq!(report.total_wait, std::time::Duration::ZERO);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// Attempts sent, counting the first (with hedging: every copy).
    pub attempts: u32,
    /// Hedged copies sent beyond the first.
    pub hedges: u32,
    /// Time the call spent with no attempt in flight: the backoff and
    /// `Retry-After` waits between attempts.
    pub total_wait: Duration,
}

/// A call's counters, on the caller's stack and lent to every attempt.
///
/// The success path touches only two atomics: no clock is read unless an
/// attempt fails and another one follows.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    attempts: AtomicU32,
    in_flight: AtomicU32,
    wait_nanos: AtomicU64,
    /// When the last attempt in flight failed, if none is in flight now.
    idle_since: Mutex<Option<Instant>>,
}

impl Tracker {
    /// An attempt starts: its number (from 1) and the wait before it.
    pub(crate) fn start(&self, clock: &impl Clock) -> (u32, Duration) {
        let number = self
            .attempts
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let mut waited = Duration::ZERO;
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 && number > 1 {
            let since = self.idle_since.lock().ok().and_then(|mut s| s.take());
            if let Some(since) = since {
                waited = clock.now().saturating_duration_since(since);
                let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
                self.wait_nanos.fetch_add(nanos, Ordering::Relaxed);
            }
        }
        (number, waited)
    }

    /// An attempt ended; `last_word` says the call ends with it (a success),
    /// so no wait can follow and the clock is not read.
    pub(crate) fn end(&self, last_word: bool, clock: &impl Clock) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1
            && !last_word
            && let Ok(mut since) = self.idle_since.lock()
        {
            *since = Some(clock.now());
        }
    }

    /// The report of the call so far; `hedged` counts every attempt after
    /// the first as a hedge.
    pub(crate) fn report(&self, hedged: bool) -> Report {
        let attempts = self.attempts.load(Ordering::Relaxed);
        Report {
            attempts,
            hedges: if hedged {
                attempts.saturating_sub(1)
            } else {
                0
            },
            total_wait: Duration::from_nanos(self.wait_nanos.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use steadfast::clock::VirtualClock;
    use steadfast::retry::DefaultClock;

    proptest! {
        /// Sequential attempts separated by waits: every attempt is
        /// counted, and the total wait is the sum of the gaps between a
        /// failure and the next attempt (the attempts' own time is not).
        #[test]
        fn sequential_attempts_sum_their_gaps(
            steps in proptest::collection::vec((0_u64..5_000, 0_u64..5_000), 1..20),
        ) {
            let clock = VirtualClock::manual();
            let t = Tracker::default();
            let mut expected = Duration::ZERO;
            let last = steps.len() - 1;
            for (i, (busy, gap)) in steps.iter().enumerate() {
                let (n, waited) = t.start(&clock);
                prop_assert_eq!(n as usize, i + 1);
                if i > 0 {
                    expected += Duration::from_millis(steps[i - 1].1);
                    prop_assert_eq!(waited, Duration::from_millis(steps[i - 1].1));
                }
                clock.advance(Duration::from_millis(*busy));
                t.end(i == last, &clock);
                clock.advance(Duration::from_millis(*gap));
            }
            let report = t.report(false);
            prop_assert_eq!(report.attempts as usize, steps.len());
            prop_assert_eq!(report.total_wait, expected);
            prop_assert_eq!(report.hedges, 0);
        }

        /// Copies that overlap never count as waiting, whatever the order
        /// they start and end in.
        #[test]
        fn overlapping_copies_never_wait(copies in 2_u32..10, step_ms in 1_u64..100) {
            let clock = VirtualClock::manual();
            let t = Tracker::default();
            for _ in 0..copies {
                t.start(&clock);
                clock.advance(Duration::from_millis(step_ms));
            }
            for i in 0..copies {
                t.end(i + 1 == copies, &clock);
            }
            prop_assert_eq!(t.report(true).total_wait, Duration::ZERO);
            prop_assert_eq!(t.report(true).hedges, copies - 1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn counts_attempts_and_the_gaps_between_them() {
        let clock = DefaultClock::default();
        let t = Tracker::default();
        assert_eq!(t.start(&clock), (1, Duration::ZERO));
        t.end(false, &clock);
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(t.start(&clock), (2, Duration::from_millis(250)));
        t.end(true, &clock);
        assert_eq!(
            t.report(false),
            Report {
                attempts: 2,
                hedges: 0,
                total_wait: Duration::from_millis(250)
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn overlapping_copies_do_not_count_as_waiting() {
        let clock = DefaultClock::default();
        let t = Tracker::default();
        t.start(&clock);
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(t.start(&clock), (2, Duration::ZERO)); // a hedge while copy 1 runs
        t.end(false, &clock);
        t.end(true, &clock);
        assert_eq!(t.report(true).hedges, 1);
        assert_eq!(t.report(true).total_wait, Duration::ZERO);
    }
}
