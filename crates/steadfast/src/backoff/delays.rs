//! [`Delays`]: a schedule as an iterator.

use std::time::Duration;

use super::schedule::{Schedule, ScheduleState};
use super::value::Backoff;
use crate::rng::Rng;

/// The delays of a schedule, one per retry, as an iterator: print a
/// schedule, clone it, `take` from it. Ends when the schedule's limits do
/// (`max_attempts`, `max_total_delay`); unlimited schedules never end.
///
/// Made by [`Backoff::delays`], [`Backoff::delays_seeded`] or
/// [`Delays::new`] for any [`Schedule`].
///
/// ```
/// use std::time::Duration;
/// let mut delays = steadfast::Backoff::fibonacci().build()?.delays();
/// let copy = delays.clone();
/// assert_eq!(delays.next(), Some(Duration::from_millis(100)));
/// assert!(copy.take(3).eq([100, 100, 200].map(Duration::from_millis)));
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Delays<S: Schedule = Backoff> {
    schedule: S,
    state: ScheduleState,
    rng: Rng,
}

impl<S: Schedule> Delays<S> {
    /// The delays of `schedule` drawn from `rng`, from a fresh state.
    ///
    /// ```
    /// use steadfast::backoff::{Delays, Rng};
    /// use steadfast::Backoff;
    /// let d = Delays::new(Backoff::default(), Rng::with_seed(1));
    /// assert_eq!(d.take(3).count(), 3);
    /// ```
    pub fn new(schedule: S, rng: Rng) -> Self {
        Self {
            schedule,
            state: ScheduleState::new(),
            rng,
        }
    }

    /// The progress so far (retries, total delay).
    ///
    /// ```
    /// let mut d = steadfast::Backoff::constant(std::time::Duration::from_secs(1)).build()?.delays();
    /// d.next();
    /// d.next();
    /// assert_eq!(d.state().total(), std::time::Duration::from_secs(2));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn state(&self) -> &ScheduleState {
        &self.state
    }
}

impl<S: Schedule> Iterator for Delays<S> {
    type Item = Duration;

    #[inline]
    fn next(&mut self) -> Option<Duration> {
        self.schedule.next_delay(&mut self.state, &mut self.rng)
    }
}

impl Backoff {
    /// The delays of this schedule: seeded with its [`seed`](Schedule::seed)
    /// when it has one, else from entropy.
    ///
    /// ```
    /// let b = steadfast::Backoff::exponential().seed(3).build()?;
    /// assert!(b.delays().take(10).eq(b.delays().take(10)));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn delays(&self) -> Delays {
        Delays::new(*self, Rng::seeded_or_entropy(self.seed))
    }

    /// The delays of this schedule drawn with `seed` (whatever its own seed).
    ///
    /// ```
    /// let b = steadfast::Backoff::default();
    /// assert!(b.delays_seeded(9).take(10).eq(b.delays_seeded(9).take(10)));
    /// ```
    #[must_use]
    pub fn delays_seeded(&self, seed: u64) -> Delays {
        Delays::new(*self, Rng::with_seed(seed))
    }
}
