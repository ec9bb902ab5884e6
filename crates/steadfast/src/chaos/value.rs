//! [`Chaos`]: the faults of a test, as one value shared by every call.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::injection::{ActiveSlot, FaultKind, Injection};
use super::rate::InjectionRate;
use super::roll::{Roll, share_of};
use crate::config_error::ConfigError;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// A maker of one fault's value.
type Maker<V> = Arc<dyn Fn() -> V + Send + Sync>;

/// The faults a chaos injects into calls on purpose, for tests: a
/// **latency** (a fixed delay plus a uniform jitter), an **error**, and a
/// **substituted outcome** (an HTTP 503 with a `Retry-After`, a gRPC
/// `UNAVAILABLE` with pushback), each at its own [`InjectionRate`] and
/// rolled with its own random draw, as gRFC A33 says: with a 50 % latency
/// and a 50 % error, a quarter of the calls get both (the latency first).
/// An error and an outcome drawn for the same call give the error.
///
/// **Off unless turned on.** A chaos is built switched off
/// ([`enabled`](ChaosBuilder::enabled) turns it on at build,
/// [`switch`](Self::switch) at run time), and a chaos switched off does
/// nothing: one atomic load per call, no draw, no clock read. A chaos layer
/// left in a release build by mistake injects nothing.
///
/// **Repeatable.** Call `n` (numbered by one `fetch_add`) draws from a
/// generator seeded with the chaos's seed and `n`: with
/// [`seed`](ChaosBuilder::seed), the same calls get the same faults, on any
/// thread. Latencies are slept on the executor's clock, so a test on
/// virtual time injects them in no time at all.
///
/// **Bounded.** [`max_active`](ChaosBuilder::max_active) caps the faults
/// active at once (Envoy's `max_active_faults`): a call drawn a fault while
/// the cap is reached gets none, and is counted
/// ([`ChaosStats::at_ceiling`]).
///
/// `T` and `E` are the outcome and error types of the calls it breaks;
/// the integrations make them (an HTTP response, a gRPC status). A chaos
/// is `Clone`: every clone is the same chaos (one switch, one count).
///
/// ```
/// use std::time::Duration;
/// use steadfast::chaos::{Chaos, FaultKind};
///
/// let chaos: Chaos<u16, std::io::Error> = Chaos::builder()
///     .seed(7)
///     .latency(0.5, Duration::from_millis(100))
///     .jitter(Duration::from_millis(20))
///     .error(0.1, || std::io::Error::other("injected"))
///     .outcome(0.2, || 503)
///     .build()?;
/// assert!(chaos.draw().is_none(), "built off");
/// chaos.switch().turn_on();
/// let faults = (0..10_000).filter_map(|_| chaos.draw()).filter(|i| i.fault.is_some()).count();
/// assert!((2_500..3_300).contains(&faults)); // 1 - 0.9 · 0.8 = 28 % of calls
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub struct Chaos<T = (), E = ()> {
    shared: Arc<Shared>,
    error: Option<Maker<E>>,
    outcome: Option<Maker<T>>,
}

impl<T, E> Clone for Chaos<T, E> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            error: self.error.clone(),
            outcome: self.outcome.clone(),
        }
    }
}

impl<T, E> fmt::Debug for Chaos<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        f.debug_struct("Chaos")
            .field("on", &s.on.load(Ordering::Relaxed))
            .field("latency", &s.latency)
            .field("error", &s.error_rate)
            .field("outcome", &s.outcome_rate)
            .field("max_active", &s.max_active)
            .finish_non_exhaustive()
    }
}

/// A latency fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Latency {
    pub(super) rate: InjectionRate,
    pub(super) delay: Duration,
    pub(super) jitter: Duration,
}

/// What every clone of a chaos shares.
#[derive(Debug)]
pub(crate) struct Shared {
    on: AtomicBool,
    seed: u64,
    calls: AtomicU64,
    latency: Option<Latency>,
    error_rate: InjectionRate,
    outcome_rate: InjectionRate,
    max_active: u64,
    pub(super) active: AtomicU64,
    injected: [AtomicU64; 4],
}

/// Indexes of `Shared::injected`.
const LATENCIES: usize = 0;
const ERRORS: usize = 1;
const OUTCOMES: usize = 2;
const AT_CEILING: usize = 3;

/// What a chaos has done so far (exact once the calls it counts are done).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ChaosStats {
    /// Calls that drew while the chaos was on.
    pub drawn: u64,
    /// Latencies injected.
    pub latencies: u64,
    /// Errors injected.
    pub errors: u64,
    /// Outcomes substituted.
    pub outcomes: u64,
    /// Calls drawn a fault that got none because `max_active` faults were
    /// active.
    pub at_ceiling: u64,
    /// Faults active now.
    pub active: u64,
}

/// A fault asked for by the caller (a request header, as Envoy's fault
/// filter reads them), within the configured faults: see
/// [`Chaos::draw_asked`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Asked {
    /// A latency of this length, at this rate (`None`: the configured one).
    pub delay: Option<(Duration, Option<InjectionRate>)>,
    /// An abort (a substituted outcome), at this rate (`None`: the
    /// configured one).
    pub abort: Option<Option<InjectionRate>>,
}

impl Asked {
    /// Asks for nothing.
    #[must_use]
    pub const fn nothing() -> Self {
        Self {
            delay: None,
            abort: None,
        }
    }

    /// Whether anything is asked.
    #[must_use]
    pub const fn is_nothing(&self) -> bool {
        self.delay.is_none() && self.abort.is_none()
    }
}

/// The on/off switch of a [`Chaos`] (and all its clones).
#[derive(Debug, Clone)]
pub struct ChaosSwitch(Arc<Shared>);

impl ChaosSwitch {
    /// Starts injecting.
    pub fn turn_on(&self) {
        self.0.on.store(true, Ordering::Relaxed);
    }

    /// Stops injecting (faults already drawn run to their end).
    pub fn turn_off(&self) {
        self.0.on.store(false, Ordering::Relaxed);
    }

    /// Whether it injects.
    #[must_use]
    pub fn is_on(&self) -> bool {
        self.0.on.load(Ordering::Relaxed)
    }
}

impl Chaos {
    /// A builder of a chaos, with no fault, switched off.
    #[must_use]
    pub fn builder<T, E>() -> ChaosBuilder<T, E> {
        ChaosBuilder::default()
    }
}

impl<T, E> Chaos<T, E> {
    /// The switch that turns it on and off.
    #[must_use]
    pub fn switch(&self) -> ChaosSwitch {
        ChaosSwitch(self.shared.clone())
    }

    /// Whether it injects now.
    #[must_use]
    #[inline]
    pub fn is_on(&self) -> bool {
        self.shared.on.load(Ordering::Relaxed)
    }

    /// The faults of the next call: `None` when it is off, when nothing
    /// was drawn, or when the faults active at once are at the ceiling.
    /// The engine of every chaos executor; hold the injection until its
    /// faults are over.
    #[inline]
    pub fn draw(&self) -> Option<Injection> {
        if !self.is_on() {
            return None;
        }
        self.draw_on(&Asked::nothing())
    }

    /// The faults of the next call, with those `asked` (by a request
    /// header) in place of the configured ones, each capped by the
    /// configured rate: an asked delay replaces the configured latency
    /// (none is injected unless a latency is configured, whose rate caps
    /// the asked one), an asked abort substitutes the outcome (capped by
    /// the configured outcome rate). Nothing asked draws as
    /// [`draw`](Self::draw) does.
    pub fn draw_asked(&self, asked: &Asked) -> Option<Injection> {
        if !self.is_on() {
            return None;
        }
        self.draw_on(asked)
    }

    #[cold]
    fn draw_on(&self, asked: &Asked) -> Option<Injection> {
        let s = &self.shared;
        let roll = Roll::of(s.seed, s.calls.fetch_add(1, Ordering::Relaxed));
        let delay = s.latency.and_then(|l| {
            let (delay, jitter, rate) = match asked.delay {
                Some((delay, rate)) => (
                    delay,
                    Duration::ZERO,
                    rate.map_or(l.rate, |r| r.capped_by(l.rate)),
                ),
                None if asked.is_nothing() => (l.delay, l.jitter, l.rate),
                None => return None,
            };
            rate.hits(roll.latency).then(|| {
                let nanos = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX);
                delay.saturating_add(Duration::from_nanos(share_of(nanos, roll.jitter)))
            })
        });
        let fault = match asked.abort {
            Some(rate) => {
                let rate = rate.map_or(s.outcome_rate, |r| r.capped_by(s.outcome_rate));
                rate.hits(roll.outcome).then_some(FaultKind::Outcome)
            }
            None if asked.is_nothing() => {
                if s.error_rate.hits(roll.error) {
                    Some(FaultKind::Error)
                } else {
                    s.outcome_rate
                        .hits(roll.outcome)
                        .then_some(FaultKind::Outcome)
                }
            }
            None => None,
        };
        if delay.is_none() && fault.is_none() {
            return None;
        }
        let taken = s
            .active
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |a| {
                (a < s.max_active).then_some(a + 1)
            });
        if taken.is_err() {
            s.injected[AT_CEILING].fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if delay.is_some() {
            s.injected[LATENCIES].fetch_add(1, Ordering::Relaxed);
        }
        match fault {
            Some(FaultKind::Error) => s.injected[ERRORS].fetch_add(1, Ordering::Relaxed),
            Some(FaultKind::Outcome) => s.injected[OUTCOMES].fetch_add(1, Ordering::Relaxed),
            None => 0,
        };
        Some(Injection {
            delay,
            fault,
            _slot: ActiveSlot(s.clone()),
        })
    }

    /// A new error of the configured kind (`None` without an error fault).
    #[must_use]
    pub fn make_error(&self) -> Option<E> {
        self.error.as_ref().map(|f| f())
    }

    /// A new substituted outcome (`None` without an outcome fault).
    #[must_use]
    pub fn make_outcome(&self) -> Option<T> {
        self.outcome.as_ref().map(|f| f())
    }

    /// The result a drawn `fault` replaces the call's with.
    pub(super) fn faulted(&self, fault: FaultKind) -> Option<Result<T, E>> {
        match fault {
            FaultKind::Error => self.make_error().map(Err),
            FaultKind::Outcome => self.make_outcome().map(Ok),
        }
    }

    /// What it has done so far.
    #[must_use]
    pub fn stats(&self) -> ChaosStats {
        let s = &self.shared;
        let count = |i: usize| s.injected[i].load(Ordering::Relaxed);
        ChaosStats {
            drawn: s.calls.load(Ordering::Relaxed),
            latencies: count(LATENCIES),
            errors: count(ERRORS),
            outcomes: count(OUTCOMES),
            at_ceiling: count(AT_CEILING),
            active: s.active.load(Ordering::Relaxed),
        }
    }

    /// The configured latency's rate, delay and jitter.
    #[must_use]
    pub fn latency(&self) -> Option<(InjectionRate, Duration, Duration)> {
        self.shared.latency.map(|l| (l.rate, l.delay, l.jitter))
    }

    /// The configured error rate.
    #[must_use]
    pub fn error_rate(&self) -> InjectionRate {
        self.shared.error_rate
    }

    /// The configured outcome rate.
    #[must_use]
    pub fn outcome_rate(&self) -> InjectionRate {
        self.shared.outcome_rate
    }
}

/// A builder of a [`Chaos`]: [`Chaos::builder`].
pub struct ChaosBuilder<T, E> {
    on: bool,
    seed: Option<u64>,
    latency: Option<(f64, Duration)>,
    jitter: Duration,
    error: Option<(f64, Maker<E>)>,
    outcome: Option<(f64, Maker<T>)>,
    max_active: u64,
}

impl<T, E> Default for ChaosBuilder<T, E> {
    fn default() -> Self {
        Self {
            on: false,
            seed: None,
            latency: None,
            jitter: Duration::ZERO,
            error: None,
            outcome: None,
            max_active: u64::MAX,
        }
    }
}

impl<T, E> fmt::Debug for ChaosBuilder<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosBuilder")
            .field("on", &self.on)
            .field("seed", &self.seed)
            .field("latency", &self.latency)
            .field("jitter", &self.jitter)
            .field("error", &self.error.as_ref().map(|e| e.0))
            .field("outcome", &self.outcome.as_ref().map(|o| o.0))
            .field("max_active", &self.max_active)
            .finish()
    }
}

impl<T, E> ChaosBuilder<T, E> {
    /// Builds it switched on (`true`) or off (`false`, the default).
    #[must_use]
    pub fn enabled(mut self, on: bool) -> Self {
        self.on = on;
        self
    }

    /// The seed of its draws: the same seed gives the same faults to the
    /// same calls. Without one, a seed from the OS's entropy.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Adds `delay` before a share `rate` of the calls.
    #[must_use]
    pub fn latency(mut self, rate: f64, delay: Duration) -> Self {
        self.latency = Some((rate, delay));
        self
    }

    /// Adds a uniform `0..jitter` to each injected latency.
    #[must_use]
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// Fails a share `rate` of the calls with the error `make` makes.
    #[must_use]
    pub fn error(mut self, rate: f64, make: impl Fn() -> E + Send + Sync + 'static) -> Self {
        self.error = Some((rate, Arc::new(make)));
        self
    }

    /// Answers a share `rate` of the calls with the outcome `make` makes
    /// instead of making them.
    #[must_use]
    pub fn outcome(mut self, rate: f64, make: impl Fn() -> T + Send + Sync + 'static) -> Self {
        self.outcome = Some((rate, Arc::new(make)));
        self
    }

    /// At most `n` faults active at once (at least 1; unbounded by default).
    #[must_use]
    pub fn max_active(mut self, n: u64) -> Self {
        self.max_active = n;
        self
    }

    /// The chaos.
    ///
    /// # Errors
    /// A [`ConfigError`] for a rate outside `0..=1`, a jitter without a
    /// latency, or a `max_active` of 0.
    pub fn build(self) -> Result<Chaos<T, E>, ConfigError> {
        let rate = |r: Option<f64>| r.map_or(Ok(InjectionRate::NEVER), InjectionRate::new);
        let latency = match self.latency {
            Some((r, delay)) => Some(Latency {
                rate: InjectionRate::new(r)?,
                delay,
                jitter: self.jitter,
            }),
            None if !self.jitter.is_zero() => {
                return Err(ConfigError::new(
                    "chaos",
                    "jitter",
                    "needs a latency",
                    self.jitter,
                ));
            }
            None => None,
        };
        if self.max_active == 0 {
            return Err(ConfigError::new(
                "chaos",
                "max_active",
                "must be at least 1",
                0,
            ));
        }
        let error_rate = rate(self.error.as_ref().map(|e| e.0))?;
        let outcome_rate = rate(self.outcome.as_ref().map(|o| o.0))?;
        Ok(Chaos {
            shared: Arc::new(Shared {
                on: AtomicBool::new(self.on),
                seed: self
                    .seed
                    .unwrap_or_else(|| crate::rng::Rng::from_entropy().next_u64()),
                calls: AtomicU64::new(0),
                latency,
                error_rate,
                outcome_rate,
                max_active: self.max_active,
                active: AtomicU64::new(0),
                injected: std::array::from_fn(|_| AtomicU64::new(0)),
            }),
            error: self.error.map(|e| e.1),
            outcome: self.outcome.map(|o| o.1),
        })
    }
}
