//! The circuit breaker: stop calling what is down, probe it carefully.

mod builder;
mod state;
mod threshold;
mod window;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

use std::fmt;
use std::time::Duration;

pub use builder::{CircuitBreakerBuilder, WindowKind};
pub use state::BreakerState;

use self::state::{Word, deadline, deadline_of};
use self::threshold::Threshold;
use self::window::Window;
use super::{Grant, Outcome, Refusal, RetryControl};
use crate::backoff::Schedule;
use crate::clock::{Clock, Stopwatch, SystemClock};
use crate::rng::Rng;
use crate::sync::{AtomicU64, CachePadded, Ordering, StripedCounter};
use crate::telemetry::BreakerMetrics;

const DEFAULT_NAME: &str = "circuit breaker";
const NANOS_PER_MILLI: u64 = 1_000_000;

/// Stops every call (first attempts, retries and hedges alike) to a
/// dependency that is plainly down, for a break; then lets a few probe calls
/// through, and their outcome decides whether traffic resumes.
///
/// **States.**
/// - *Closed*: calls go through; every attempt's outcome is counted in a
///   sampling window (the last 30 s by default, or the last `n` calls). When
///   the window holds at least `min_calls` calls and the failure ratio has
///   reached `failure_ratio`, the breaker *opens*.
/// - *Open*: every [`admit`](RetryControl::admit) and
///   [`allow_retry`](RetryControl::allow_retry) is refused at once, with a
///   [`Refusal`] naming the breaker, and
///   [`retry_after`](RetryControl::retry_after) tells how long the
///   break still lasts. No attempt is made, nothing sleeps, nothing is
///   allocated.
/// - *Half-open*: once the break is over, the next `probes` attempts (1 by
///   default) are let through, and every other one is refused. The first
///   probe outcome decides: a success closes the breaker (the window starts
///   empty), a failure opens it again for another break (which grows with
///   a [`break_backoff`](CircuitBreakerBuilder::break_backoff)). A probe
///   granted but never sent (a later control refused it, or the call was
///   cancelled first) is [refunded](RetryControl::refund) and frees its slot;
///   if no probe reports within the `probe_timeout` (a probe whose caller
///   went away), a new round of probes is let through.
/// - *Isolated*: opened by hand ([`isolate`](Self::isolate)) until
///   [`reset`](Self::reset), which closes it with an empty window.
///
/// An attempt slower than the [`slow_call`](CircuitBreakerBuilder::slow_call)
/// threshold counts as a failure: policies then pass each attempt's duration
/// ([`RetryControl::record_timed`]).
///
/// **Defaults** ([`builder`](Self::builder)): window 30 s, at least 100
/// calls, ratio 0.5, break 5 s, 1 probe. Polly v8's window, minimum and
/// break; resilience4j's ratio rather than Polly's 0.1: a breaker refuses
/// *every* call, so opening at 10 % failures turns a 10 % error rate into
/// a 100 % one for the break. Retry controls (budget, token bucket) are the
/// tool for partial failure; the breaker's job is a dependency that is down.
///
/// **Concurrency.** The state is one atomic word (state, probes granted,
/// re-openings, and a generation that every transition moves on), so each
/// transition is one compare-and-swap, taken by exactly one of racing
/// threads, and a thread acting on a stale state fails its swap. While
/// closed, `admit` and `allow_retry` are one load of that word, and `record`
/// is one `fetch_add` on the current slot of the window (a failure adds a
/// second one, then sums the window's ten slots). A time window reads the
/// clock once per `record` (cheap with [`CoarseClock`](crate::clock::CoarseClock)
/// or a [`VirtualClock`](crate::clock::VirtualClock): their
/// [`ticks`](Clock::ticks)); a count window reads none.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use steadfast::clock::{Clock, VirtualClock};
/// use steadfast::control::{BreakerState, CircuitBreaker, Outcome, RetryControl, WindowKind};
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// let clock = VirtualClock::new();
/// let breaker = CircuitBreaker::builder()
///     .name("payments")
///     .window(WindowKind::Count(20))
///     .min_calls(10)
///     .break_duration(Duration::from_secs(5))
///     .build_with_clock(clock.clone())?;
/// for _ in 0..10 {
///     breaker.admit().unwrap();
///     breaker.record(Outcome::RetryableFailure);
/// }
/// assert_eq!(breaker.state(), BreakerState::Open);
/// assert_eq!(breaker.admit().unwrap_err().by, "payments");
/// assert_eq!(breaker.retry_after("payments"), Some(Duration::from_secs(5)));
///
/// clock.sleep_blocking(Duration::from_secs(5));
/// assert!(breaker.admit().is_ok()); // the probe
/// assert!(breaker.admit().is_err()); // one probe at a time
/// breaker.record(Outcome::Success);
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// # Ok(()) }
/// ```
pub struct CircuitBreaker<C: Clock = SystemClock> {
    settings: CircuitBreakerBuilder,
    threshold: Threshold,
    time: Stopwatch<C>,
    /// Read by every `admit`: on its own line, away from the window's
    /// counters that every `record` writes.
    state: CachePadded<AtomicU64>,
    deadline: AtomicU64,
    window: Window,
    refusals: StripedCounter,
    openings: AtomicU64,
    /// Its state gauge and openings counter (feature `metrics`).
    metrics: BreakerMetrics,
}

/// The state of a [`CircuitBreaker`] at one moment, for telemetry.
///
/// ```
/// use steadfast::control::{BreakerState, CircuitBreaker, Outcome, RetryControl};
/// let breaker = CircuitBreaker::builder().build().unwrap();
/// breaker.record(Outcome::RetryableFailure);
/// breaker.record(Outcome::Success);
/// let snap = breaker.snapshot();
/// assert_eq!(snap.state, BreakerState::Closed);
/// assert_eq!((snap.calls, snap.failures), (2, 1));
/// assert_eq!(snap.failure_ratio, 0.5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CircuitBreakerSnapshot {
    /// The state.
    pub state: BreakerState,
    /// Calls counted in the window (zero outside the closed state, whose
    /// window starts empty when the breaker closes).
    pub calls: u64,
    /// Failures (slow calls included) among them.
    pub failures: u64,
    /// `failures / calls` (0 for an empty window).
    pub failure_ratio: f64,
    /// Probes granted in the current half-open round.
    pub probes: u32,
    /// Times the breaker opened again from half-open since it last closed
    /// (the step of the break backoff).
    pub reopenings: u32,
    /// How long until the break ends (open), or until the half-open round
    /// gives up on its probes; `None` when closed or isolated.
    pub next_probe_in: Option<Duration>,
    /// Times the breaker opened, in total.
    pub openings: u64,
    /// Calls, retries and hedges refused, in total.
    pub refusals: u64,
}

impl CircuitBreaker {
    /// A builder with the defaults: a 30 s window, at least 100 calls in it,
    /// failure ratio 0.5, a break of 5 s, 1 probe (see the type's docs for
    /// why).
    ///
    /// ```
    /// use steadfast::control::{BreakerState, CircuitBreaker};
    /// let breaker = CircuitBreaker::builder().name("inventory").build()?;
    /// assert_eq!(breaker.state(), BreakerState::Closed);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn builder() -> CircuitBreakerBuilder {
        CircuitBreakerBuilder::new()
    }
}

impl<C: Clock> CircuitBreaker<C> {
    /// The state now (one atomic load).
    ///
    /// ```
    /// use steadfast::control::{BreakerState, CircuitBreaker};
    /// let breaker = CircuitBreaker::builder().build()?;
    /// breaker.isolate();
    /// assert_eq!(breaker.state(), BreakerState::Isolated);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn state(&self) -> BreakerState {
        self.word().state()
    }

    /// The state and the counts, for telemetry (example on
    /// [`CircuitBreakerSnapshot`]).
    #[must_use]
    pub fn snapshot(&self) -> CircuitBreakerSnapshot {
        let word = self.word();
        let nanos = self.time.elapsed_nanos();
        let (calls, failures) = if word.is_closed() {
            self.window.sums(self.window.current(nanos))
        } else {
            (0, 0)
        };
        CircuitBreakerSnapshot {
            state: word.state(),
            calls,
            failures,
            failure_ratio: ratio(calls, failures),
            probes: if word.state() == BreakerState::HalfOpen {
                word.probes()
            } else {
                0
            },
            reopenings: word.opens(),
            next_probe_in: match word.state() {
                BreakerState::HalfOpen if word.probes() < self.settings.probes => {
                    Some(Duration::ZERO)
                }
                BreakerState::Open | BreakerState::HalfOpen => Some(self.remaining(word, nanos)),
                BreakerState::Closed | BreakerState::Isolated => None,
            },
            openings: self.openings.load(Ordering::Relaxed),
            refusals: self.refusals.sum(),
        }
    }

    /// The settings it was built with.
    ///
    /// ```
    /// use steadfast::control::CircuitBreaker;
    /// let breaker = CircuitBreaker::builder().probes(3).build()?;
    /// assert_eq!(breaker.settings(), CircuitBreaker::builder().probes(3));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn settings(&self) -> CircuitBreakerBuilder {
        self.settings
    }

    /// Opens the breaker by hand, whatever its state, until
    /// [`reset`](Self::reset): every call is refused (an operator taking a
    /// dependency out of service).
    ///
    /// ```
    /// use steadfast::control::{CircuitBreaker, RetryControl};
    /// let breaker = CircuitBreaker::builder().name("search").build()?;
    /// breaker.isolate();
    /// assert_eq!(breaker.admit().unwrap_err().by, "search");
    /// assert_eq!(breaker.retry_after("search"), None); // until someone resets it
    /// breaker.reset();
    /// assert!(breaker.admit().is_ok());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn isolate(&self) {
        let mut word = self.word();
        while word.state() != BreakerState::Isolated {
            let next = word.next(BreakerState::Isolated, 0, word.opens());
            match self.swap(word, next) {
                Ok(()) => {
                    self.changed(word, next, (0, 0));
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Closes the breaker by hand, whatever its state, with an empty window
    /// and the break backoff back at its first step (example on
    /// [`isolate`](Self::isolate)).
    pub fn reset(&self) {
        let mut word = self.word();
        loop {
            let next = word.next(BreakerState::Closed, 0, 0);
            self.window.reset();
            match self.swap(word, next) {
                Ok(()) => {
                    if !word.is_closed() {
                        self.changed(word, next, (0, 0));
                    }
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    #[inline]
    fn word(&self) -> Word {
        Word(self.state.0.load(Ordering::SeqCst))
    }

    /// One compare-and-swap of the state word; the word found on failure.
    #[inline]
    fn swap(&self, from: Word, to: Word) -> Result<(), Word> {
        self.state
            .0
            .compare_exchange(from.0, to.0, Ordering::SeqCst, Ordering::SeqCst)
            .map(drop)
            .map_err(Word)
    }

    /// May an attempt go? The whole of it while closed: one load.
    #[inline]
    fn permit(&self) -> Result<(), Refusal> {
        let word = self.word();
        if word.is_closed() {
            return Ok(());
        }
        self.permit_slow(word)
    }

    #[cold]
    #[inline(never)]
    fn permit_slow(&self, mut word: Word) -> Result<(), Refusal> {
        let nanos = self.time.elapsed_nanos();
        loop {
            let next = match word.state() {
                BreakerState::Closed => return Ok(()),
                BreakerState::Isolated => return self.refuse(),
                BreakerState::Open => {
                    if !self.deadline_passed(word, nanos) {
                        return self.refuse();
                    }
                    // The break is over: half-open, and this is probe 1.
                    word.next(BreakerState::HalfOpen, 1, word.opens())
                }
                BreakerState::HalfOpen => {
                    if word.probes() < self.settings.probes {
                        word.with_probes(word.probes() + 1)
                    } else if self.deadline_passed(word, nanos) {
                        // No probe reported in time: a new round.
                        word.next(BreakerState::HalfOpen, 1, word.opens())
                    } else {
                        return self.refuse();
                    }
                }
            };
            match self.swap(word, next) {
                Ok(()) => {
                    if next.generation() != word.generation() {
                        self.set_deadline(
                            next,
                            nanos.saturating_add(nanos_of(self.probe_timeout())),
                        );
                        if word.state() == BreakerState::Open {
                            self.changed(word, next, (0, 0));
                        } else {
                            tracing::debug!(
                                breaker = self.settings.name,
                                "circuit breaker: no probe reported in time; new probes"
                            );
                        }
                    }
                    return Ok(());
                }
                Err(actual) => word = actual,
            }
        }
    }

    #[inline]
    fn refuse(&self) -> Result<(), Refusal> {
        self.refusals.increment();
        Err(Refusal {
            by: self.settings.name,
        })
    }

    /// Hears one attempt's outcome.
    #[inline]
    fn on_outcome(&self, failed: bool) {
        let word = self.word();
        if word.is_closed() {
            let nanos = if self.window.is_timed() {
                self.time.elapsed_nanos()
            } else {
                0
            };
            let epoch = self.window.current(nanos);
            self.window.add(epoch, failed);
            if failed {
                self.check_trip(word, epoch);
            }
            return;
        }
        self.on_outcome_slow(word, failed);
    }

    /// After a failure in the closed state: opens if the window says so.
    #[inline(never)]
    fn check_trip(&self, word: Word, epoch: u64) {
        let (calls, failures) = self.window.sums(epoch);
        if calls < u64::from(self.settings.min_calls) || !self.threshold.reached(failures, calls) {
            return;
        }
        let next = word.next(BreakerState::Open, 0, 0);
        if self.swap(word, next).is_ok() {
            self.opened(word, next, (calls, failures));
        }
    }

    #[cold]
    #[inline(never)]
    fn on_outcome_slow(&self, mut word: Word, failed: bool) {
        loop {
            let next = match word.state() {
                BreakerState::Closed => return self.on_outcome(failed),
                // The outcome of a call let through before the break, or of
                // nothing: it decides nothing.
                BreakerState::Open | BreakerState::Isolated => return,
                BreakerState::HalfOpen if word.probes() == 0 => return,
                BreakerState::HalfOpen if failed => {
                    word.next(BreakerState::Open, 0, word.opens().saturating_add(1))
                }
                BreakerState::HalfOpen => {
                    self.window.reset();
                    word.next(BreakerState::Closed, 0, 0)
                }
            };
            match self.swap(word, next) {
                Ok(()) => {
                    if failed {
                        self.opened(word, next, (0, 0));
                    } else {
                        self.changed(word, next, (0, 0));
                    }
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// The thread that moved the breaker to `open` sets its break.
    fn opened(&self, from: Word, open: Word, counts: (u64, u64)) {
        let nanos = self.time.elapsed_nanos();
        let length = self.break_for(open.opens());
        self.set_deadline(open, nanos.saturating_add(nanos_of(length)));
        self.openings.fetch_add(1, Ordering::Relaxed);
        self.changed(from, open, counts);
    }

    /// The `opens`-th consecutive break's length.
    fn break_for(&self, opens: u32) -> Duration {
        match &self.settings.break_backoff {
            Some(backoff) => {
                let mut rng = match backoff.seed() {
                    Some(seed) => {
                        Rng::with_seed(seed ^ u64::from(opens).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                    }
                    None => Rng::from_entropy(),
                };
                backoff
                    .delay_at(opens, &mut rng)
                    .max(Duration::from_millis(1))
            }
            None => self.settings.break_duration,
        }
    }

    fn probe_timeout(&self) -> Duration {
        self.settings
            .probe_timeout
            .unwrap_or(self.settings.break_duration)
    }

    /// Stores the deadline of the transition to `word`, unless a later
    /// transition stored its own already.
    fn set_deadline(&self, word: Word, at_nanos: u64) {
        let new = deadline(word, at_nanos.div_ceil(NANOS_PER_MILLI));
        let mine = word.generation() & 0xFFFF;
        let mut stored = self.deadline.load(Ordering::SeqCst);
        loop {
            let theirs = stored >> 48;
            if theirs != mine && theirs.wrapping_sub(mine) & 0xFFFF < 0x8000 {
                return;
            }
            match self
                .deadline
                .compare_exchange(stored, new, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return,
                Err(actual) => stored = actual,
            }
        }
    }

    /// Whether the deadline of `word`'s transition is known and passed.
    #[inline]
    fn deadline_passed(&self, word: Word, nanos: u64) -> bool {
        deadline_of(word, self.deadline.load(Ordering::SeqCst))
            .is_some_and(|millis| nanos >= millis.saturating_mul(NANOS_PER_MILLI))
    }

    /// Time until the deadline of `word`'s transition (open: the break; half-open:
    /// the probes' timeout); the nominal length while its winner has not
    /// stored it yet.
    fn remaining(&self, word: Word, nanos: u64) -> Duration {
        match deadline_of(word, self.deadline.load(Ordering::SeqCst)) {
            Some(millis) => {
                Duration::from_nanos(millis.saturating_mul(NANOS_PER_MILLI).saturating_sub(nanos))
            }
            None if word.state() == BreakerState::Open => self.break_for(word.opens()),
            None => self.probe_timeout(),
        }
    }

    /// Reports a state change.
    fn changed(&self, from: Word, to: Word, (calls, failures): (u64, u64)) {
        let now = to.state();
        self.metrics.changed(now.level(), now == BreakerState::Open);
        tracing::info!(
            breaker = self.settings.name,
            from = from.state().as_str(),
            to = to.state().as_str(),
            failure_ratio = ratio(calls, failures),
            calls,
            reopenings = to.opens(),
            "circuit breaker changed state"
        );
    }
}

fn ratio(calls: u64, failures: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        failures as f64 / calls as f64
    }
}

fn nanos_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl<C: Clock> RetryControl for CircuitBreaker<C> {
    fn name(&self) -> &'static str {
        self.settings.name
    }

    #[inline]
    fn admit(&self) -> Result<(), Refusal> {
        self.permit()
    }

    #[inline]
    fn record(&self, outcome: Outcome) {
        self.on_outcome(outcome == Outcome::RetryableFailure);
    }

    #[inline]
    fn allow_retry(&self) -> Result<(), Refusal> {
        self.permit()
    }

    /// Frees the probe slot of an attempt granted in the half-open state and
    /// never sent; nothing in any other state (a grant made while closed
    /// costs nothing). A refund cannot tell which state its grant was made
    /// in: one for a grant made while closed that arrives during a
    /// half-open round frees a slot, so that round may send one probe more.
    fn refund(&self, _grant: Grant) {
        let mut word = self.word();
        while word.state() == BreakerState::HalfOpen && word.probes() > 0 {
            match self.swap(word, word.with_probes(word.probes() - 1)) {
                Ok(()) => return,
                Err(actual) => word = actual,
            }
        }
    }

    fn wants_durations(&self) -> bool {
        self.settings.slow_call.is_some()
    }

    #[inline]
    fn record_timed(&self, outcome: Outcome, duration: Duration) {
        let slow = self.settings.slow_call.is_some_and(|t| duration >= t);
        self.on_outcome(outcome == Outcome::RetryableFailure || slow);
    }

    fn retry_after(&self, by: &'static str) -> Option<Duration> {
        if by != self.settings.name {
            return None;
        }
        let word = self.word();
        match word.state() {
            BreakerState::Closed => Some(Duration::ZERO),
            BreakerState::Isolated => None,
            BreakerState::Open | BreakerState::HalfOpen => {
                Some(self.remaining(word, self.time.elapsed_nanos()))
            }
        }
    }
}

impl<C: Clock> fmt::Debug for CircuitBreaker<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("name", &self.settings.name)
            .field("state", &self.snapshot())
            .finish()
    }
}
