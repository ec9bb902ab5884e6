//! The discrete-event engine: an event queue on virtual time.
//!
//! Events are kept in a priority queue (a radix heap) keyed by `(time in
//! nanoseconds, sequence number)`: two events at the same instant come out in the order they were
//! scheduled, so a run depends on nothing but its seed. As events are taken
//! out, the engine moves its [`SimClock`] forward, so every core object that
//! reads an injected clock (time-windowed controls, deadlines, the retry
//! policy) sees simulated time.
//!
//! The [`SimClock`] is one atomic word of nanoseconds shared by its clones:
//! moving it is one store, reading it one load, with no lock and no wake-up
//! call (nothing in a simulation sleeps on it). By default it follows every
//! event exactly; [`with_clock_resolution`](Engine::with_clock_resolution)
//! makes it move in whole steps instead (never ahead of the events).
//!
//! ```
//! use std::time::Duration;
//! use steadfast::clock::Clock;
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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use steadfast::backoff::Rng;
use steadfast::clock::Clock;

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

/// The simulation's clock: the time of the event being handled, shared by
/// every clone (one atomic word; see the [module docs](self)).
///
/// Only the [`Engine`] moves it. Nothing in a simulation sleeps, so
/// [`sleep_blocking`](Clock::sleep_blocking) returns at once without moving
/// time (the engine's events are the only way time passes).
///
/// ```
/// use steadfast::clock::Clock;
/// let mut engine = steadfast_sim::engine::Engine::new(0);
/// let clock = engine.clock().clone();
/// engine.schedule(2_000, ());
/// engine.pop();
/// assert_eq!(clock.now() - clock.start(), std::time::Duration::from_micros(2));
/// assert_eq!(clock.ticks(), Some(2_000));
/// ```
#[derive(Debug, Clone)]
pub struct SimClock {
    start: Instant,
    nanos: Arc<AtomicU64>,
}

impl SimClock {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            nanos: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The instant of virtual time zero.
    #[must_use]
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Virtual time since [`start`](Self::start).
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }

    #[inline]
    fn set(&self, at: Nanos) {
        self.nanos.store(at, Ordering::Relaxed);
    }
}

impl Clock for SimClock {
    #[inline]
    fn now(&self) -> Instant {
        self.start + Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }

    fn sleep_blocking(&self, _duration: Duration) {}

    #[inline]
    fn ticks(&self) -> Option<u64> {
        Some(self.nanos.load(Ordering::Relaxed))
    }
}

/// A monotone priority queue (a radix heap) on unique `u128` keys
/// `(time << 64) | sequence`.
///
/// Every key pushed is at least the last key popped (time never goes back,
/// and the sequence number always grows), which is all a radix heap needs.
/// Bucket `i` holds the keys whose highest bit differing from the last key
/// popped is bit `i - 1` (bucket 0: equal to it). A pop takes from bucket 0,
/// or else finds the smallest key of the first non-empty bucket, makes it
/// the last key, and spreads that bucket over the lower ones. Keys are
/// unique, so the order is total and does not depend on the order inside a
/// bucket: the same pushes always give the same pops.
struct RadixQueue<E> {
    last: u128,
    len: usize,
    /// Bit `i - 1` set when bucket `i` (1..=128) is not empty.
    occupied: u128,
    buckets: Vec<Vec<(u128, E)>>,
}

impl<E> RadixQueue<E> {
    fn new() -> Self {
        Self {
            last: 0,
            len: 0,
            occupied: 0,
            buckets: (0..=128).map(|_| Vec::new()).collect(),
        }
    }

    #[inline]
    fn bucket(last: u128, key: u128) -> usize {
        (128 - (key ^ last).leading_zeros()) as usize
    }

    #[inline]
    fn push(&mut self, key: u128, event: E) {
        debug_assert!(key >= self.last, "radix queue keys must not go back");
        let i = Self::bucket(self.last, key.max(self.last));
        self.buckets[i].push((key, event));
        if i > 0 {
            self.occupied |= 1 << (i - 1);
        }
        self.len += 1;
    }

    #[inline]
    fn pop(&mut self) -> Option<(u128, E)> {
        if self.buckets[0].is_empty() {
            if self.occupied == 0 {
                return None;
            }
            let i = self.occupied.trailing_zeros() as usize + 1;
            self.occupied &= !(1 << (i - 1));
            let mut bucket = std::mem::take(&mut self.buckets[i]);
            let min = bucket.iter().map(|(k, _)| *k).min()?;
            self.last = min;
            for (key, event) in bucket.drain(..) {
                // Every key of bucket `i` agrees with `min` above bit `i - 1`,
                // so it lands in a lower bucket.
                let j = Self::bucket(min, key);
                self.buckets[j].push((key, event));
                if j > 0 {
                    self.occupied |= 1 << (j - 1);
                }
            }
            // Keep the emptied allocation for later use, but no more of it
            // than the queue could need again soon: without a bound, every
            // one of the 129 buckets could keep room for the largest batch
            // it ever held.
            bucket.shrink_to(self.len / 4 + 256);
            self.buckets[i] = bucket;
        }
        let popped = self.buckets[0].pop()?;
        self.len -= 1;
        Some(popped)
    }
}

/// An event queue on virtual time, with the simulation's clock and its one
/// seeded random source. See the [module docs](self) for an example.
pub struct Engine<E> {
    queue: RadixQueue<E>,
    seq: u64,
    now: Nanos,
    clock_at: Nanos,
    resolution: Nanos,
    clock: SimClock,
    start: Instant,
    rng: Rng,
}

impl<E> std::fmt::Debug for Engine<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("now", &self.now)
            .field("pending", &self.queue.len)
            .field("scheduled", &self.seq)
            .finish_non_exhaustive()
    }
}

impl<E> Engine<E> {
    /// An empty queue at time zero, with a [`SimClock`] and an
    /// [`Rng`] seeded with `seed`.
    ///
    /// ```
    /// let engine: steadfast_sim::engine::Engine<()> = steadfast_sim::engine::Engine::new(1);
    /// assert_eq!(engine.now(), 0);
    /// ```
    #[must_use]
    pub fn new(seed: u64) -> Self {
        let clock = SimClock::new();
        Self {
            queue: RadixQueue::new(),
            seq: 0,
            now: 0,
            clock_at: 0,
            resolution: 1,
            start: clock.start(),
            clock,
            rng: Rng::with_seed(seed),
        }
    }

    /// Moves the clock in steps of `resolution` instead of with every event
    /// (see the [module docs](self)); a zero resolution means exact.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_sim::engine::Engine;
    /// let mut engine = Engine::new(0).with_clock_resolution(Duration::from_millis(1));
    /// engine.schedule(1_500_000, ());
    /// engine.pop();
    /// assert_eq!(engine.now(), 1_500_000);
    /// assert_eq!(engine.clock().elapsed(), Duration::from_millis(1));
    /// ```
    #[must_use]
    pub fn with_clock_resolution(mut self, resolution: Duration) -> Self {
        self.resolution = nanos(resolution).max(1);
        self
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
    /// use steadfast::clock::Clock;
    /// let engine: steadfast_sim::engine::Engine<()> = steadfast_sim::engine::Engine::new(1);
    /// assert_eq!(engine.instant(), engine.clock().now());
    /// ```
    #[inline]
    #[must_use]
    pub fn instant(&self) -> Instant {
        self.instant_at(self.now)
    }

    /// The `Instant` of virtual time `at`.
    ///
    /// ```
    /// let engine: steadfast_sim::engine::Engine<()> = steadfast_sim::engine::Engine::new(0);
    /// assert_eq!(engine.instant_at(1_000) - engine.instant(), std::time::Duration::from_micros(1));
    /// ```
    #[inline]
    #[must_use]
    pub fn instant_at(&self, at: Nanos) -> Instant {
        self.start + Duration::from_nanos(at)
    }

    /// The clock that follows the simulation; give clones of it to the core
    /// objects that need one.
    #[must_use]
    pub fn clock(&self) -> &SimClock {
        &self.clock
    }

    /// The simulation's random source.
    ///
    /// ```
    /// let mut engine: steadfast_sim::engine::Engine<()> = steadfast_sim::engine::Engine::new(5);
    /// let mut other: steadfast_sim::engine::Engine<()> = steadfast_sim::engine::Engine::new(5);
    /// assert_eq!(engine.rng().next_u64(), other.rng().next_u64());
    /// ```
    #[inline]
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    /// Schedules `event` at absolute time `at` (an `at` in the past is
    /// treated as now).
    ///
    /// ```
    /// let mut engine = steadfast_sim::engine::Engine::new(0);
    /// engine.schedule(2_000, 'b');
    /// engine.schedule(1_000, 'a');
    /// assert_eq!(engine.pop(), Some((1_000, 'a')));
    /// assert_eq!(engine.now(), 1_000);
    /// ```
    #[inline]
    pub fn schedule(&mut self, at: Nanos, event: E) {
        let at = at.max(self.now);
        self.queue
            .push((u128::from(at) << 64) | u128::from(self.seq), event);
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
        let (key, event) = self.queue.pop()?;
        let at = (key >> 64) as u64;
        if at > self.now {
            self.now = at;
            let shown = at - at % self.resolution;
            if shown > self.clock_at {
                self.clock_at = shown;
                self.clock.set(shown);
            }
        }
        Some((at, event))
    }

    /// The number of events waiting.
    ///
    /// ```
    /// let mut engine = steadfast_sim::engine::Engine::new(0);
    /// engine.schedule(0, ());
    /// assert_eq!(engine.pending(), 1);
    /// ```
    #[must_use]
    pub fn pending(&self) -> usize {
        self.queue.len
    }
}

#[cfg(test)]
mod tests {
    use steadfast::clock::Clock;

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
    fn radix_queue_pops_exactly_like_a_binary_heap() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;

        let mut rng = Rng::with_seed(9);
        let mut engine = Engine::new(0);
        let mut reference = BinaryHeap::new();
        let mut seq = 0u64;
        let mut popped = 0;
        // Interleave pushes (never before now) and pops, with many ties.
        for round in 0..300u64 {
            for _ in 0..(rng.next_u64() % 50) {
                let at = engine.now() + rng.next_u64() % 1_000 * (round % 3);
                engine.schedule(at, seq);
                reference.push(Reverse((at, seq)));
                seq += 1;
            }
            for _ in 0..(rng.next_u64() % 45) {
                let want = reference.pop().map(|Reverse(e)| e);
                assert_eq!(engine.pop(), want);
                popped += usize::from(want.is_some());
            }
            assert_eq!(engine.pending(), reference.len());
        }
        while let Some(Reverse(want)) = reference.pop() {
            assert_eq!(engine.pop(), Some(want));
            popped += 1;
        }
        assert_eq!(engine.pop(), None);
        assert_eq!(popped, seq as usize);
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
