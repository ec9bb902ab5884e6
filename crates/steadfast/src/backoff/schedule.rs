//! [`Schedule`]: the trait of a backoff schedule, and [`ScheduleState`], the
//! per-call progress through one.

use std::fmt;
use std::time::Duration;

use crate::rng::Rng;

/// A backoff schedule: the source of the delay before each retry.
///
/// Implement it to plug a custom schedule into a
/// [`RetryPolicy`](crate::policy::RetryPolicy); the built-in
/// [`Backoff`](super::value::Backoff) covers the common and the specified
/// curves.
///
/// ```
/// use std::time::Duration;
/// use steadfast::backoff::{Rng, Schedule, ScheduleState};
///
/// /// Waits 10 ms, then 20 ms, then gives up.
/// #[derive(Debug)]
/// struct Twice;
/// impl Schedule for Twice {
///     fn next_delay(&self, state: &mut ScheduleState, _rng: &mut Rng) -> Option<Duration> {
///         let d = [10, 20].get(state.retries as usize).map(|ms| Duration::from_millis(*ms))?;
///         state.record(d);
///         Some(d)
///     }
/// }
/// let delays: Vec<_> = steadfast::backoff::Delays::new(Twice, Rng::with_seed(0)).collect();
/// assert_eq!(delays, [Duration::from_millis(10), Duration::from_millis(20)]);
/// ```
pub trait Schedule: fmt::Debug + Send + Sync {
    /// The delay before the next retry, advancing `state`; `None` when the
    /// schedule's own limits (attempts, total delay) are used up.
    fn next_delay(&self, state: &mut ScheduleState, rng: &mut Rng) -> Option<Duration>;

    /// The seed this schedule was configured with, if any; executors use it
    /// to make the call's random source.
    fn seed(&self) -> Option<u64> {
        None
    }

    /// The most attempts (counting the first) this schedule allows, if it
    /// has a limit of its own: it hands out `max_attempts - 1` delays. A
    /// [`RetryPolicy`](crate::policy::RetryPolicy) built over it adopts the limit
    /// (see [`RetryPolicyBuilder::max_attempts`](crate::policy::RetryPolicyBuilder::max_attempts)).
    fn max_attempts(&self) -> Option<u32> {
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
    fn max_attempts(&self) -> Option<u32> {
        (**self).max_attempts()
    }
}

impl<S: Schedule + ?Sized> Schedule for std::sync::Arc<S> {
    fn next_delay(&self, state: &mut ScheduleState, rng: &mut Rng) -> Option<Duration> {
        (**self).next_delay(state, rng)
    }
    fn seed(&self) -> Option<u64> {
        (**self).seed()
    }
    fn max_attempts(&self) -> Option<u32> {
        (**self).max_attempts()
    }
}

/// The per-call progress through a schedule: made fresh (on the stack) for
/// each call, and only once a call has failed.
///
/// The public fields are what an executor reads (and what a simulator may
/// set to jump ahead); the last delay and the running total are kept as
/// whole nanoseconds (read them with [`prev`](Self::prev) and
/// [`total`](Self::total), add to them with [`record`](Self::record)); the
/// private part is curve-specific memory that makes
/// the next step cheap (the unjittered envelope of a multiplicative curve,
/// the two last terms of a Fibonacci one, the internal term of decorrelated
/// jitter V2). A state whose `step` was set by hand has no such memory: the
/// schedules then compute the step from its closed form instead, so any
/// `step` up to `u32::MAX` gives a valid delay.
///
/// ```
/// use steadfast::backoff::{Rng, Schedule, ScheduleState};
/// use steadfast::Backoff;
/// let backoff = Backoff::exponential().jitter(steadfast::Jitter::None).build()?;
/// let mut state = ScheduleState::new();
/// let mut rng = Rng::with_seed(1);
/// let first = backoff.next_delay(&mut state, &mut rng);
/// assert_eq!(first, Some(std::time::Duration::from_millis(100)));
/// assert_eq!((state.retries, state.step, state.prev()), (1, 1, first.unwrap()));
/// assert_eq!(state.total(), first.unwrap());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduleState {
    /// Delays handed out so far (the retries scheduled); never reset.
    pub retries: u32,
    /// Position on the curve: the exponent of an exponential curve, the index
    /// of a Fibonacci one. Equal to `retries` until [`reset_curve`](Self::reset_curve).
    pub step: u32,
    /// The last delay handed out, in nanoseconds (zero before the first).
    pub(crate) prev_ns: u64,
    /// The sum of the delays handed out, in nanoseconds (saturating).
    pub(crate) total_ns: u64,
    /// Curve memory in nanoseconds (the last unjittered envelope, the last
    /// decorrelated sleep, the V2 term); negative when unknown.
    pub(crate) mem: f64,
    /// Second curve memory (the previous Fibonacci term); negative when unknown.
    pub(crate) mem2: f64,
    /// Integer curve memory (the last capped envelope of an exponential curve
    /// with a whole multiplier), in nanoseconds; [`UNKNOWN_NS`] when unknown.
    pub(crate) mem_ns: u64,
}

/// `ScheduleState::mem_ns` when unknown. A real envelope can equal it only
/// when the cap is `u64::MAX` ns and reached: the closed form then gives the
/// same value, so taking it as unknown is never wrong.
pub(crate) const UNKNOWN_NS: u64 = u64::MAX;

impl Default for ScheduleState {
    fn default() -> Self {
        Self::new()
    }
}

impl ScheduleState {
    /// The state of a call that has not retried yet.
    ///
    /// ```
    /// let state = steadfast::backoff::ScheduleState::new();
    /// assert_eq!((state.retries, state.step, state.total()), (0, 0, std::time::Duration::ZERO));
    /// ```
    #[must_use]
    pub const fn new() -> Self {
        Self {
            retries: 0,
            step: 0,
            prev_ns: 0,
            total_ns: 0,
            mem: -1.0,
            mem2: -1.0,
            mem_ns: UNKNOWN_NS,
        }
    }

    /// A state positioned as if `step` delays had been handed out (for
    /// simulations, tests, and stateless use): `retries` and `step` are both
    /// `step`, the total and the previous delay are zero, and the curve
    /// memory is unknown, so the next delay comes from the closed form.
    ///
    /// ```
    /// use steadfast::backoff::{Rng, Schedule, ScheduleState};
    /// use steadfast::{Backoff, Jitter};
    /// let b = Backoff::exponential().jitter(Jitter::None).max_delay(std::time::Duration::from_secs(60)).build()?;
    /// let mut state = ScheduleState::at_step(u32::MAX - 1);
    /// assert_eq!(b.next_delay(&mut state, &mut Rng::with_seed(0)), Some(std::time::Duration::from_secs(60)));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn at_step(step: u32) -> Self {
        let mut state = Self::new();
        state.retries = step;
        state.step = step;
        state
    }

    /// The last delay handed out (zero before the first, and after
    /// [`reset_curve`](Self::reset_curve)).
    ///
    /// ```
    /// let state = steadfast::backoff::ScheduleState::new();
    /// assert_eq!(state.prev(), std::time::Duration::ZERO);
    /// ```
    #[must_use]
    pub const fn prev(&self) -> Duration {
        Duration::from_nanos(self.prev_ns)
    }

    /// The sum of the delays handed out, saturating at `u64::MAX`
    /// nanoseconds (about 584 years).
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut state = steadfast::backoff::ScheduleState::new();
    /// state.record(Duration::from_secs(1));
    /// state.record(Duration::from_millis(500));
    /// assert_eq!(state.total(), Duration::from_millis(1500));
    /// ```
    #[must_use]
    pub const fn total(&self) -> Duration {
        Duration::from_nanos(self.total_ns)
    }

    /// Records a delay handed out by a schedule of one's own (or a wait
    /// taken instead of one, such as a server's hint): one more retry, one
    /// more step on the curve, `delay` as the last delay and added to the
    /// total. Delays saturate at `u64::MAX` nanoseconds, as the built-in
    /// schedules' do.
    ///
    /// ```
    /// use std::time::Duration;
    /// let mut state = steadfast::backoff::ScheduleState::new();
    /// state.record(Duration::from_millis(20));
    /// assert_eq!((state.retries, state.step), (1, 1));
    /// assert_eq!((state.prev(), state.total()), (Duration::from_millis(20), Duration::from_millis(20)));
    /// ```
    pub fn record(&mut self, delay: Duration) {
        let ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.record_ns(ns);
    }

    /// [`record`](Self::record) in whole nanoseconds: the built-in schedules' bookkeeping.
    #[inline(always)]
    pub(crate) fn record_ns(&mut self, ns: u64) {
        self.retries = self.retries.saturating_add(1);
        self.step = self.step.saturating_add(1);
        self.prev_ns = ns;
        self.total_ns = self.total_ns.saturating_add(ns);
    }

    /// Starts the curve over (after a server hint, or a connection accepted),
    /// keeping the count of retries and the total delay.
    ///
    /// ```
    /// use steadfast::backoff::{Rng, Schedule, ScheduleState};
    /// use steadfast::{Backoff, Jitter};
    /// let b = Backoff::exponential().jitter(Jitter::None).build()?;
    /// let (mut state, mut rng) = (ScheduleState::new(), Rng::with_seed(0));
    /// b.next_delay(&mut state, &mut rng);
    /// b.next_delay(&mut state, &mut rng);
    /// state.reset_curve();
    /// assert_eq!(b.next_delay(&mut state, &mut rng), Some(std::time::Duration::from_millis(100)));
    /// assert_eq!(state.retries, 3);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn reset_curve(&mut self) {
        self.step = 0;
        self.prev_ns = 0;
        self.mem = -1.0;
        self.mem2 = -1.0;
        self.mem_ns = UNKNOWN_NS;
    }
}
