//! Backoff schedules: how long to wait before each retry.
//!
//! A schedule is a pure value: given the per-call [`ScheduleState`] and a
//! random source it gives the next delay. It holds no clock and does no I/O,
//! so it is cheap to clone, trivially testable and deterministic under a seed.

use std::fmt;
use std::time::Duration;

use crate::Rng;

/// A backoff schedule: the source of the delay before each retry.
///
/// Implement it to plug a custom schedule into a
/// [`RetryPolicy`](crate::RetryPolicy); the built-in [`Backoff`] covers
/// the common and the specified curves.
pub trait Schedule: fmt::Debug + Send + Sync {
    /// The delay before the next retry, advancing `state`; `None` when the
    /// schedule's own limits (attempts, total delay) are used up.
    fn next_delay(&self, state: &mut ScheduleState, rng: &mut Rng) -> Option<Duration>;

    /// The seed this schedule was configured with, if any; executors use it
    /// to make the call's random source.
    fn seed(&self) -> Option<u64> {
        None
    }
}

impl<S: Schedule + ?Sized> Schedule for &S {
    fn next_delay(&self, state: &mut ScheduleState, rng: &mut Rng) -> Option<Duration> {
        (**self).next_delay(state, rng)
    }
    fn seed(&self) -> Option<u64> {
        (**self).seed()
    }
}

impl<S: Schedule + ?Sized> Schedule for std::sync::Arc<S> {
    fn next_delay(&self, state: &mut ScheduleState, rng: &mut Rng) -> Option<Duration> {
        (**self).next_delay(state, rng)
    }
    fn seed(&self) -> Option<u64> {
        (**self).seed()
    }
}

/// The per-call progress through a schedule: made fresh (on the stack) for
/// each call, and only once a call has failed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ScheduleState {
    /// Delays handed out so far (the retries scheduled); never reset.
    pub retries: u32,
    /// Position on the curve: the exponent of an exponential curve, the index
    /// of a Fibonacci one. Equal to `retries` until [`reset_curve`](Self::reset_curve).
    pub step: u32,
    /// The last delay handed out (zero before the first).
    pub prev: Duration,
    /// The sum of the delays handed out (saturating).
    pub total: Duration,
    /// Curve-specific memory (for example the unjittered envelope of a
    /// multiplicative curve, or the internal term of decorrelated jitter V2).
    pub aux: f64,
}

impl ScheduleState {
    /// The state of a call that has not retried yet.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            retries: 0,
            step: 0,
            prev: Duration::ZERO,
            total: Duration::ZERO,
            aux: 0.0,
        }
    }

    /// Starts the curve over (after a server hint, or a connection accepted),
    /// keeping the count of retries and the total delay.
    pub fn reset_curve(&mut self) {
        self.step = 0;
        self.prev = Duration::ZERO;
        self.aux = 0.0;
    }
}
