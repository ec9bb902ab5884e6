//! The discrete-event engine: an event queue on virtual time.
//!
//! Events are kept in a binary heap keyed by `(time in nanoseconds, sequence
//! number)`: two events at the same instant come out in the order they were
//! scheduled, so a run depends on nothing but its seed. As events are taken
//! out, the engine moves a [`VirtualClock`] in manual mode forward with
//! [`advance_to`](VirtualClock::advance_to), so every core object that reads
//! an injected clock (time-windowed controls, deadlines) sees simulated time.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::Clock;
//! use steadfast_sim::engine::Engine;
//!
//! let mut engine = Engine::new(7);
//! engine.schedule_in(Duration::from_millis(5), "late");
//! engine.schedule_in(Duration::from_millis(1), "early");
//! engine.schedule_in(Duration::from_millis(1), "early, second");
//! let mut seen = Vec::new();
//! while let Some((at, event)) = engine.pop() {
//!     seen.push((at, event));
//! }
//! assert_eq!(seen, [(1_000_000, "early"), (1_000_000, "early, second"), (5_000_000, "late")]);
//! assert_eq!(engine.clock().elapsed(), Duration::from_millis(5));
//! ```

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use steadfast::Rng;
use steadfast::clock::VirtualClock;

/// Nanoseconds since the start of a simulation.
pub type Nanos = u64;

/// Converts a duration to [`Nanos`], saturating.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(steadfast_sim::engine::nanos(Duration::from_millis(2)), 2_000_000);
/// ```
#[inline]
#[must_use]
pub fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Converts [`Nanos`] to seconds, for reports.
///
/// ```
/// assert_eq!(steadfast_sim::engine::secs(1_500_000_000), 1.5);
/// ```
#[inline]
#[must_use]
pub fn secs(n: Nanos) -> f64 {
    n as f64 / 1e9
}

struct Entry<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.seq == other.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    /// Reversed, so the max-heap pops the earliest (time, sequence) first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// An event queue on virtual time, with the simulation's clock and its one
/// seeded random source.
pub struct Engine<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    now: Nanos,
    clock: VirtualClock,
    start: Instant,
    rng: Rng,
}

impl<E> std::fmt::Debug for Engine<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("now", &self.now)
            .field("pending", &self.heap.len())
            .field("scheduled", &self.seq)
            .finish_non_exhaustive()
    }
}

impl<E> Engine<E> {
    /// An empty queue at time zero, with a manual [`VirtualClock`] and an
    /// [`Rng`] seeded with `seed`.
    ///
    /// ```
    /// let engine: steadfast_sim::engine::Engine<()> = steadfast_sim::engine::Engine::new(1);
    /// assert_eq!(engine.now(), 0);
    /// ```
    #[must_use]
    pub fn new(seed: u64) -> Self {
        let clock = VirtualClock::manual();
        Self {
            heap: BinaryHeap::new(),
            seq: 0,
            now: 0,
            start: clock.start(),
            clock,
            rng: Rng::with_seed(seed),
        }
    }

    /// The current virtual time (the time of the last event taken out).
    #[inline]
    #[must_use]
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The current virtual time as an `Instant` on the clock's time line.
    ///
    /// ```
    /// use steadfast::Clock;
    /// let engine: steadfast_sim::engine::Engine<()> = steadfast_sim::engine::Engine::new(1);
    /// assert_eq!(engine.instant(), engine.clock().now());
    /// ```
    #[inline]
    #[must_use]
    pub fn instant(&self) -> Instant {
        self.instant_at(self.now)
    }

    /// The `Instant` of virtual time `at`.
    #[inline]
    #[must_use]
    pub fn instant_at(&self, at: Nanos) -> Instant {
        self.start + Duration::from_nanos(at)
    }

    /// The clock that follows the simulation; give clones of it to the core
    /// objects that need one.
    #[must_use]
    pub fn clock(&self) -> &VirtualClock {
        &self.clock
    }

    /// The simulation's random source.
    #[inline]
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// Schedules `event` at absolute time `at` (an `at` in the past is
    /// treated as now).
    #[inline]
    pub fn schedule(&mut self, at: Nanos, event: E) {
        let at = at.max(self.now);
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
        self.seq += 1;
    }

    /// Schedules `event` after `delay` from now.
    #[inline]
    pub fn schedule_in(&mut self, delay: Duration, event: E) {
        self.schedule(self.now.saturating_add(nanos(delay)), event);
    }

    /// Takes out the earliest event, moving time (and the clock) to it.
    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        let entry = self.heap.pop()?;
        if entry.at > self.now {
            self.now = entry.at;
            self.clock
                .advance_to(self.start + Duration::from_nanos(entry.at));
        }
        Some((entry.at, entry.event))
    }

    /// The number of events waiting.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use steadfast::Clock;

    use super::*;

    #[test]
    fn events_come_out_in_time_then_schedule_order() {
        let mut engine = Engine::new(0);
        for (i, at) in [5u64, 1, 3, 1, 5, 0].into_iter().enumerate() {
            engine.schedule(at, i);
        }
        let order: Vec<usize> = std::iter::from_fn(|| engine.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, [5, 1, 3, 2, 0, 4]);
    }

    #[test]
    fn clock_follows_events_and_never_goes_back() {
        let mut engine = Engine::new(0);
        engine.schedule(2_000, 'a');
        assert_eq!(engine.pop(), Some((2_000, 'a')));
        engine.schedule(1_000, 'b'); // in the past: runs now
        assert_eq!(engine.pop(), Some((2_000, 'b')));
        assert_eq!(
            engine.clock().now() - engine.clock().start(),
            Duration::from_micros(2)
        );
        assert_eq!(engine.pending(), 0);
    }
}
