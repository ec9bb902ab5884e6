//! The [`Backoff`] value, its builder, and the one pipeline every built-in
//! curve goes through: curve envelope, cap, jitter, floor, cap again, total.

use std::fmt;
use std::time::Duration;

use super::jitter::{FixedJitter, mul_high};
use super::{Jitter, Schedule, ScheduleState, decorrelated, exponential, fibonacci, linear, shift};
use crate::{ConfigError, Rng};

/// The largest delay any schedule gives: `u64::MAX` nanoseconds (about 584
/// years). Every delay saturates there.
pub(super) const MAX_NS: f64 = u64::MAX as f64;

/// A duration in (fractional) nanoseconds, saturating at [`MAX_NS`].
pub(super) fn nanos(d: Duration) -> f64 {
    // u128 -> f64 rounds; fine for configuration values.
    (d.as_nanos() as f64).min(MAX_NS)
}

/// A duration in whole nanoseconds, saturating at `u64::MAX`.
pub(super) fn nanos_u64(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Float nanoseconds to whole ones, truncating: saturating, NaN and
/// negatives give zero. Values below 2^63 (every delay under 292 years) take
/// the cheaper signed conversion; the branch is on the schedule's
/// configuration, not on random data.
#[inline(always)]
pub(super) fn ns_u64(ns: f64) -> u64 {
    if ns < I64_LIMIT {
        // `as` saturates and `max` maps negatives to 0 (NaN fails the test
        // above, and `as u64` maps it to 0): never panics.
        (ns as i64).max(0) as u64
    } else {
        ns as u64
    }
}

/// [`ns_u64`] for a value known not to be negative (nor NaN): one test less.
#[inline(always)]
fn ns_u64_nonneg(ns: f64) -> u64 {
    if ns < I64_LIMIT {
        ns as i64 as u64
    } else {
        ns as u64
    }
}

/// 2^63 as a float: the values below it convert to `i64` exactly.
const I64_LIMIT: f64 = 9_223_372_036_854_775_808.0;

/// Nanoseconds to a duration: saturating, NaN and negatives give zero.
#[inline]
pub(super) fn duration_from_nanos(ns: f64) -> Duration {
    // `as` saturates (and maps NaN to 0): never panics.
    Duration::from_nanos(ns as u64)
}

/// The largest multiplier the integer exponential curve takes (larger whole
/// multipliers, such as `1e300`, take the float one: the same results).
const MAX_WHOLE_FACTOR: f64 = 4_294_967_296.0;

/// Which built-in schedule a [`Backoff`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Constant,
    Linear,
    Exponential,
    ShiftExponential,
    Fibonacci,
    Decorrelated,
    DecorrelatedV2,
    GrpcGo,
    GrpcA6,
    GrpcA6Legacy,
}

impl Kind {
    pub(super) const ALL: [Self; 10] = [
        Self::Constant,
        Self::Linear,
        Self::Exponential,
        Self::ShiftExponential,
        Self::Fibonacci,
        Self::Decorrelated,
        Self::DecorrelatedV2,
        Self::GrpcGo,
        Self::GrpcA6,
        Self::GrpcA6Legacy,
    ];

    pub(super) const fn name(self) -> &'static str {
        match self {
            Self::Constant => "constant",
            Self::Linear => "linear",
            Self::Exponential => "exponential",
            Self::ShiftExponential => "shift-exponential",
            Self::Fibonacci => "fibonacci",
            Self::Decorrelated => "decorrelated",
            Self::DecorrelatedV2 => "decorrelated-v2",
            Self::GrpcGo => "grpc-go",
            Self::GrpcA6 => "grpc-a6",
            Self::GrpcA6Legacy => "grpc-a6-legacy",
        }
    }

    const fn component(self) -> &'static str {
        match self {
            Self::Constant => "constant backoff",
            Self::Linear => "linear backoff",
            Self::Exponential => "exponential backoff",
            Self::ShiftExponential => "shift-exponential backoff",
            Self::Fibonacci => "fibonacci backoff",
            Self::Decorrelated => "decorrelated backoff",
            Self::DecorrelatedV2 => "decorrelated-v2 backoff",
            Self::GrpcGo => "grpc-go backoff",
            Self::GrpcA6 => "grpc-a6 backoff",
            Self::GrpcA6Legacy => "grpc-a6-legacy backoff",
        }
    }
}

/// The curve of a [`Backoff`], with its parameters in nanoseconds.
/// `ExponentialWhole` is an exponential curve whose multiplier is a whole
/// number (2, 3, …, up to [`MAX_WHOLE_FACTOR`]): exact integer nanoseconds,
/// no float per delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Curve {
    ExponentialWhole { initial: u64, factor: u64 },
    Constant { interval: f64 },
    Linear { base: f64, step: f64 },
    Exponential { initial: f64, multiplier: f64 },
    Shift { initial: u64, shift: u32 },
    Fibonacci { initial: f64 },
    Decorrelated { base: f64 },
    DecorrelatedV2 { median: f64 },
}

/// A backoff schedule: one of the built-in curves, a [`Jitter`], and limits.
///
/// A plain value (`Copy`, no allocation, no clock): build it once, share it
/// by value, and give each call its own [`ScheduleState`] and [`Rng`].
///
/// # The curves and their defaults
///
/// | constructor | delay `n` (0-based), before jitter | defaults | jitter default | cap after jitter |
/// | --- | --- | --- | --- | --- |
/// | [`constant(i)`](Self::constant) | `i` | – | none | yes |
/// | [`linear()`](Self::linear) | `initial + step * n` | 1 s, step 1 s (1 s, 2 s, 3 s, …, like pester) | none | yes |
/// | [`exponential()`](Self::exponential) | `initial * multiplier^n` | 100 ms, ×2, max 10 s | full | yes |
/// | [`shift_exponential()`](Self::shift_exponential) | `initial << (shift * n)` (integer) | 100 ms, shift 1, max 10 s | none | yes |
/// | [`fibonacci()`](Self::fibonacci) | `initial * F(n+1)` (1, 1, 2, 3, 5, …) | 100 ms, max 10 s | none | yes |
/// | [`decorrelated()`](Self::decorrelated) | `min(max, U(initial, 3 * prev))` | 100 ms, max 10 s | built in | yes |
/// | [`decorrelated_v2()`](Self::decorrelated_v2) | Polly's V2 formula | median 100 ms, max 10 s | built in | yes |
/// | [`grpc_go()`](Self::grpc_go) | `min(initial * multiplier^n, max)`; `n = 0`: `initial` exactly | 1 s, ×1.6, max 120 s | ±0.2 | **no** (spec) |
/// | [`grpc_a6()`](Self::grpc_a6) | `min(initial * multiplier^n, max) * U(0.8, 1.2)` | 100 ms, ×2, max 1 s | ±0.2 (fixed) | **no** (spec) |
/// | [`grpc_a6_legacy()`](Self::grpc_a6_legacy) | `U(0, min(initial * multiplier^n, max))` | 100 ms, ×2, max 1 s | full (fixed) | yes (trivially) |
///
/// Without a `max_delay`, the cap is `u64::MAX` nanoseconds (about 584
/// years): every delay saturates there instead of overflowing.
///
/// # The pipeline
///
/// Every delay goes through the same steps: the curve's envelope `v` for the
/// current step, capped at `max_delay`; the jitter (`Jitter::apply`); the floor
/// `min_delay`; the cap `max_delay` again — *except* for the gRPC schedules,
/// whose specifications let the jitter exceed the maximum by up to the
/// jitter factor (A6: `maxBackoff * 1.2`); finally `max_total_delay` clips
/// the last delay so the sum never exceeds it, and `max_attempts` (counting
/// the first attempt) stops the schedule after `max_attempts - 1` delays.
///
/// The cap holds after jitter by default because a cap the caller set is a
/// promise (backon, for example, jitters after capping and so may wait up to
/// twice the maximum).
///
/// # `Default`
///
/// Exponential, initial 100 ms, multiplier 2, max 10 s, full jitter: AWS's
/// recommendation ("Exponential Backoff And Jitter", 2015) of full jitter as
/// the variant that spreads a herd of clients best for the least total work.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{Backoff, Jitter};
/// let backoff = Backoff::exponential()
///     .initial(Duration::from_millis(50))
///     .multiplier(3.0)
///     .max_delay(Duration::from_secs(2))
///     .jitter(Jitter::Equal)
///     .max_attempts(5) // the first attempt and 4 retries
///     .seed(42)
///     .build()?;
/// let delays: Vec<Duration> = backoff.delays().collect();
/// assert_eq!(delays.len(), 4);
/// assert!(delays.iter().all(|d| *d <= Duration::from_secs(2)));
/// assert_eq!(Backoff::default(), Backoff::exponential().build()?);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct Backoff {
    pub(super) kind: Kind,
    pub(super) curve: Curve,
    pub(super) jitter: Jitter,
    /// `jitter` in integer fixed point, precomputed: no float per delay.
    pub(super) jitter_fx: FixedJitter,
    /// Whether the first delay (step 0) is `initial` exactly, neither capped
    /// nor jittered (grpc-go's `Backoff(0)`, gRPC connection backoff).
    pub(super) base_first: bool,
    /// Whether `max_delay` holds after jitter.
    pub(super) cap_after_jitter: bool,
    /// The floor, exact.
    pub(super) min_ns: u64,
    /// The cap, exact.
    pub(super) max_u64: u64,
    /// The cap applied after jitter: `max_u64`, or `u64::MAX` where the cap
    /// does not hold after jitter (no branch per delay).
    pub(super) post_cap: u64,
    /// The largest `retries` that still gets a delay, plus one: `max_attempts
    /// - 1`, or more than any `u32` without a limit.
    pub(super) retry_limit: u64,
    /// Whether the floor or `post_cap` can change a jittered delay (a floor
    /// is set, or the jitter can exceed the cap that holds after it).
    pub(super) clamp_after_jitter: bool,
    /// `(initial, factor)` of the default shape, which `next_delay` takes
    /// straight through (one test instead of one per setting): an
    /// exponential curve with a whole multiplier, full jitter, and nothing
    /// else to apply (no floor, no first-delay rule, no total limit).
    pub(super) plain: Option<(u64, u64)>,
    /// The cap as a float (applied to the envelope).
    pub(super) max_ns: f64,
    pub(super) max_attempts: Option<u32>,
    pub(super) max_total: Option<Duration>,
    /// `max_total` in nanoseconds, saturating at `u64::MAX` (as the total does).
    pub(super) total_limit: Option<u64>,
    pub(super) seed: Option<u64>,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Backoff {
    /// The default schedule (see [`Backoff`]): exponential, 100 ms, ×2,
    /// max 10 s, full jitter, no attempt or total limit, no seed.
    ///
    /// ```
    /// assert_eq!(steadfast::Backoff::DEFAULT, steadfast::Backoff::default());
    /// ```
    pub const DEFAULT: Self = Self {
        kind: Kind::Exponential,
        curve: Curve::ExponentialWhole {
            initial: 100_000_000,
            factor: 2,
        },
        jitter: Jitter::Full,
        jitter_fx: Jitter::Full.fixed_point(),
        base_first: false,
        cap_after_jitter: true,
        min_ns: 0,
        max_u64: 10_000_000_000,
        post_cap: 10_000_000_000,
        retry_limit: u64::MAX,
        clamp_after_jitter: false,
        plain: Some((100_000_000, 2)),
        max_ns: 10_000_000_000.0,
        max_attempts: None,
        max_total: None,
        total_limit: None,
        seed: None,
    };

    /// grpc-go's defaults, as a constant (checked against the builder in tests).
    pub(super) const DEFAULT_GRPC_GO: Self = Self {
        kind: Kind::GrpcGo,
        curve: Curve::Exponential {
            initial: 1_000_000_000.0,
            multiplier: 1.6,
        },
        jitter: Jitter::Proportional(0.2),
        jitter_fx: Jitter::Proportional(0.2).fixed_point(),
        base_first: true,
        cap_after_jitter: false,
        min_ns: 0,
        max_u64: 120_000_000_000,
        post_cap: u64::MAX,
        retry_limit: u64::MAX,
        clamp_after_jitter: false,
        plain: None,
        max_ns: 120_000_000_000.0,
        max_attempts: None,
        max_total: None,
        total_limit: None,
        seed: None,
    };

    /// A builder for the schedule named `name`, for text configuration (the
    /// CLI's `exponential:initial=100ms`): one of `constant`, `linear`,
    /// `exponential`, `shift-exponential`, `fibonacci`, `decorrelated`,
    /// `decorrelated-v2`, `grpc-go`, `grpc-a6`, `grpc-a6-legacy`.
    ///
    /// ```
    /// let b = steadfast::Backoff::named("fibonacci")?.build()?;
    /// assert_eq!(b.name(), "fibonacci");
    /// assert!(steadfast::Backoff::named("zigzag").is_err());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn named(name: &str) -> Result<BackoffBuilder, ConfigError> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .map(BackoffBuilder::new)
            .ok_or_else(|| {
                ConfigError::new(
                    "backoff",
                    "name",
                    "must be one of constant, linear, exponential, shift-exponential, fibonacci, \
                     decorrelated, decorrelated-v2, grpc-go, grpc-a6, grpc-a6-legacy",
                    name,
                )
            })
    }

    /// The schedule's name, as accepted by [`named`](Self::named).
    ///
    /// ```
    /// assert_eq!(steadfast::Backoff::default().name(), "exponential");
    /// ```
    #[must_use]
    pub const fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// The curve's first parameter: the interval of a constant schedule, the
    /// initial delay or base of the others, the median first delay of
    /// decorrelated V2.
    ///
    /// ```
    /// assert_eq!(steadfast::Backoff::default().initial(), std::time::Duration::from_millis(100));
    /// ```
    #[must_use]
    pub fn initial(&self) -> Duration {
        match self.curve {
            Curve::Shift { initial, .. } | Curve::ExponentialWhole { initial, .. } => {
                Duration::from_nanos(initial)
            }
            Curve::Constant { interval: v }
            | Curve::Linear { base: v, .. }
            | Curve::Exponential { initial: v, .. }
            | Curve::Fibonacci { initial: v }
            | Curve::Decorrelated { base: v }
            | Curve::DecorrelatedV2 { median: v } => duration_from_nanos(v),
        }
    }

    /// The jitter applied to the envelope (`Jitter::None` for schedules whose
    /// randomness is built in: the decorrelated ones; A6 reports its fixed jitter).
    ///
    /// ```
    /// assert_eq!(steadfast::Backoff::default().jitter(), steadfast::Jitter::Full);
    /// ```
    #[must_use]
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The cap on each delay.
    ///
    /// ```
    /// assert_eq!(steadfast::Backoff::default().max_delay(), std::time::Duration::from_secs(10));
    /// ```
    #[must_use]
    pub fn max_delay(&self) -> Duration {
        Duration::from_nanos(self.max_u64)
    }

    /// The floor of each delay (after jitter).
    ///
    /// ```
    /// assert_eq!(steadfast::Backoff::default().min_delay(), std::time::Duration::ZERO);
    /// ```
    #[must_use]
    pub fn min_delay(&self) -> Duration {
        Duration::from_nanos(self.min_ns)
    }

    /// The limit on attempts, counting the first one (`None`: unlimited).
    ///
    /// ```
    /// let b = steadfast::Backoff::exponential().max_attempts(3).build()?;
    /// assert_eq!(b.max_attempts(), Some(3));
    /// assert_eq!(b.delays().count(), 2);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn max_attempts(&self) -> Option<u32> {
        self.max_attempts
    }

    /// The limit on the sum of the delays (`None`: unlimited).
    ///
    /// ```
    /// assert_eq!(steadfast::Backoff::default().max_total_delay(), None);
    /// ```
    #[must_use]
    pub const fn max_total_delay(&self) -> Option<Duration> {
        self.max_total
    }

    /// Whether `max_delay` holds after jitter (false only for the gRPC
    /// schedules whose specifications let jitter exceed it).
    ///
    /// ```
    /// assert!(steadfast::Backoff::default().caps_after_jitter());
    /// assert!(!steadfast::Backoff::grpc_a6().build()?.caps_after_jitter());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn caps_after_jitter(&self) -> bool {
        self.cap_after_jitter
    }

    /// The same schedule with another seed (`None`: the caller's entropy).
    ///
    /// ```
    /// use steadfast::Schedule;
    /// let b = steadfast::Backoff::default().with_seed(Some(5));
    /// assert_eq!(b.seed(), Some(5));
    /// ```
    #[must_use]
    pub const fn with_seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }

    /// The delay a fresh call would get at curve step `n` (0-based), without
    /// state and ignoring `max_attempts` and `max_total_delay`: grpc-go's
    /// stateless `Backoff(retries)`. Curves with memory (the decorrelated
    /// ones) have no closed form: for them this is a draw as if the previous
    /// step were unknown (AWS: the previous sleep taken as `initial`; V2: the
    /// previous term taken at `n - 0.5`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{Backoff, Rng};
    /// let b = Backoff::grpc_go().build()?;
    /// let mut rng = Rng::with_seed(1);
    /// assert_eq!(b.delay_at(0, &mut rng), Duration::from_secs(1)); // no jitter on the first
    /// let d = b.delay_at(1, &mut rng);
    /// assert!(d >= Duration::from_millis(1280) && d <= Duration::from_millis(1920));
    /// assert!(b.delay_at(u32::MAX, &mut rng) <= Duration::from_secs(144));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn delay_at(&self, n: u32, rng: &mut Rng) -> Duration {
        let mut state = ScheduleState::at_step(n);
        Duration::from_nanos(self.draw(&mut state, rng))
    }

    /// The next delay in nanoseconds (before `max_total_delay`), updating the
    /// curve memory in `state` (not the counters).
    #[inline(always)]
    pub(super) fn draw(&self, state: &mut ScheduleState, rng: &mut Rng) -> u64 {
        let step = state.step;
        if let Curve::ExponentialWhole { initial, factor } = self.curve {
            // The default curve: integers only.
            let capped = exponential::envelope_int(initial, factor, self.max_u64, state);
            let envelope = if !self.base_first || step > 0 {
                self.jitter_fx.apply(capped, rng)
            } else {
                // grpc-go: the first delay is the base delay, exactly.
                initial
            };
            return self.floor_and_cap(envelope);
        }
        // The other common curves, tested in order (no jump table).
        let envelope = if let Curve::Exponential {
            initial,
            multiplier,
        } = self.curve
        {
            exponential::envelope(initial, multiplier, state)
        } else if let Curve::Constant { interval } = self.curve {
            interval
        } else {
            // On copies of the state and the generator: the caller's never
            // escape into a call, so they can stay in registers on the
            // common paths.
            let (envelope, next, next_rng) = self.other_envelope(*state, rng.clone());
            *state = next;
            *rng = next_rng;
            match envelope {
                Ok(envelope) => envelope,
                Err(done) => return done,
            }
        };
        let envelope = if !self.base_first || step > 0 {
            // Not `f64::min`: this maps NaN to the cap too, in one instruction.
            let capped = if envelope < self.max_ns {
                envelope
            } else {
                self.max_ns
            };
            // `max_ns` may round above the exact cap.
            let capped = ns_u64_nonneg(capped).min(self.max_u64);
            self.jitter_fx.apply(capped, rng)
        } else {
            // grpc-go: the first delay is the base delay, exactly.
            ns_u64(envelope)
        };
        self.floor_and_cap(envelope)
    }

    /// The floor, then the cap where it holds after jitter; skipped (one
    /// predictable branch) when the build found them no-ops: no floor, and
    /// a jitter that cannot take the capped envelope above the cap.
    #[inline(always)]
    fn floor_and_cap(&self, ns: u64) -> u64 {
        if self.clamp_after_jitter {
            ns.max(self.min_ns).min(self.post_cap)
        } else {
            ns
        }
    }

    /// The envelope of the other curves (`Ok`), or the finished delay of
    /// those whose randomness is their own (`Err`). Out of line, so that the
    /// hot path (exponential and constant) stays small enough to inline;
    /// returns the updated state and generator.
    #[inline(never)]
    fn other_envelope(
        &self,
        mut state: ScheduleState,
        mut rng: Rng,
    ) -> (Result<f64, u64>, ScheduleState, Rng) {
        let envelope = self.other_envelope_in(&mut state, &mut rng);
        (envelope, state, rng)
    }

    #[inline(always)]
    fn other_envelope_in(&self, state: &mut ScheduleState, rng: &mut Rng) -> Result<f64, u64> {
        let step = state.step;
        Ok(match self.curve {
            Curve::Constant { interval } => interval,
            Curve::Linear { base, step: inc } => linear::envelope(base, inc, step),
            Curve::Exponential {
                initial,
                multiplier,
            } => exponential::envelope(initial, multiplier, state),
            Curve::ExponentialWhole { initial, factor } => {
                exponential::envelope_int(initial, factor, self.max_u64, state) as f64
            }
            Curve::Shift { initial, shift } => shift::envelope(initial, shift, step),
            Curve::Fibonacci { initial } => fibonacci::envelope(initial, self.max_ns, state),
            Curve::Decorrelated { base } => {
                let sleep = self.clamp(decorrelated::aws(base, self.max_ns, state, rng));
                // The next draw is relative to this sleep.
                state.mem = sleep as f64;
                return Err(sleep);
            }
            Curve::DecorrelatedV2 { median } => {
                return Err(self.clamp(decorrelated::polly_v2(median, self.max_ns, state, rng)));
            }
        })
    }

    /// Float nanoseconds to whole ones (saturating; NaN gives 0), then the
    /// floor, then the cap where it holds after jitter; exact in integers.
    #[inline(always)]
    fn clamp(&self, ns: f64) -> u64 {
        ns_u64(ns).max(self.min_ns).min(self.post_cap)
    }
}

impl Schedule for Backoff {
    #[inline]
    fn next_delay(&self, state: &mut ScheduleState, rng: &mut Rng) -> Option<Duration> {
        if u64::from(state.retries) >= self.retry_limit {
            return None;
        }
        if let Some((initial, factor)) = self.plain {
            // The default shape, straight through (same result as below).
            let capped = exponential::envelope_int(initial, factor, self.max_u64, state);
            let ns = mul_high(rng.next_u64(), capped);
            state.record_ns(ns);
            return Some(Duration::from_nanos(ns));
        }
        let remaining = match self.total_limit {
            Some(limit) => {
                let left = limit.saturating_sub(state.total_ns);
                if left == 0 {
                    return None;
                }
                left
            }
            None => u64::MAX,
        };
        let ns = self.draw(state, rng).min(remaining);
        state.record_ns(ns);
        Some(Duration::from_nanos(ns))
    }

    fn seed(&self) -> Option<u64> {
        self.seed
    }

    fn max_attempts(&self) -> Option<u32> {
        Backoff::max_attempts(self)
    }
}

impl fmt::Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Backoff");
        s.field("kind", &self.kind.name());
        match self.curve {
            Curve::Constant { interval } => {
                s.field("interval", &duration_from_nanos(interval));
            }
            Curve::Linear { base, step } => {
                s.field("initial", &duration_from_nanos(base));
                s.field("step", &duration_from_nanos(step));
            }
            Curve::Exponential {
                initial,
                multiplier,
            } => {
                s.field("initial", &duration_from_nanos(initial));
                s.field("multiplier", &multiplier);
            }
            Curve::ExponentialWhole { initial, factor } => {
                s.field("initial", &Duration::from_nanos(initial));
                s.field("multiplier", &(factor as f64));
            }
            Curve::Shift { initial, shift } => {
                s.field("initial", &Duration::from_nanos(initial));
                s.field("shift", &shift);
            }
            Curve::Fibonacci { initial } | Curve::Decorrelated { base: initial } => {
                s.field("initial", &duration_from_nanos(initial));
            }
            Curve::DecorrelatedV2 { median } => {
                s.field("median_first", &duration_from_nanos(median));
            }
        }
        s.field("jitter", &self.jitter)
            .field("min_delay", &self.min_delay())
            .field("max_delay", &self.max_delay())
            .field("cap_after_jitter", &self.cap_after_jitter)
            .field("max_attempts", &self.max_attempts)
            .field("max_total_delay", &self.max_total)
            .field("seed", &self.seed)
            .finish()
    }
}

/// Builds a [`Backoff`]; made by [`Backoff::exponential`] and its siblings.
///
/// One builder for every curve, so text configuration maps `key=value` onto
/// its setters; a setter that does not apply to the chosen curve (a
/// multiplier on a constant schedule, a jitter on a decorrelated one) is a
/// [`ConfigError`] from [`build`](Self::build), never silently ignored.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Backoff;
/// let err = Backoff::constant(Duration::from_secs(1)).multiplier(2.0).build().unwrap_err();
/// assert_eq!(err.field(), "multiplier");
/// let err = Backoff::exponential().multiplier(0.5).build().unwrap_err();
/// assert_eq!(err.to_string(), "invalid exponential backoff: `multiplier` must be a finite number >= 1 (got 0.5)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use = "a builder does nothing until `build()`"]
pub struct BackoffBuilder {
    kind: Kind,
    initial: Option<Duration>,
    step: Option<Duration>,
    multiplier: Option<f64>,
    shift: Option<u32>,
    max_delay: Option<Duration>,
    min_delay: Option<Duration>,
    jitter: Option<Jitter>,
    max_attempts: Option<u32>,
    max_total_delay: Option<Duration>,
    seed: Option<u64>,
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident, $field:ident: $ty:ty) => {
        $(#[$doc])*
        pub const fn $name(mut self, value: $ty) -> Self {
            self.$field = Some(value);
            self
        }
    };
}

impl BackoffBuilder {
    pub(super) const fn new(kind: Kind) -> Self {
        Self {
            kind,
            initial: None,
            step: None,
            multiplier: None,
            shift: None,
            max_delay: None,
            min_delay: None,
            jitter: None,
            max_attempts: None,
            max_total_delay: None,
            seed: None,
        }
    }

    setter!(
        /// The first delay: the interval of a constant schedule, the base of a
        /// linear, exponential, Fibonacci or decorrelated one, the median first
        /// delay of decorrelated V2, gRPC's initial backoff.
        ///
        /// ```
        /// let b = steadfast::Backoff::fibonacci().initial(std::time::Duration::from_secs(1)).build()?;
        /// assert_eq!(b.delays().take(5).map(|d| d.as_secs()).collect::<Vec<_>>(), [1, 1, 2, 3, 5]);
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        initial, initial: Duration
    );
    setter!(
        /// The increment of a linear schedule.
        ///
        /// ```
        /// use std::time::Duration;
        /// let b = steadfast::Backoff::linear().initial(Duration::ZERO).step(Duration::from_millis(10)).build()?;
        /// assert_eq!(b.delays().nth(3), Some(Duration::from_millis(30)));
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        step, step: Duration
    );
    setter!(
        /// The growth factor of an exponential, grpc-go or A6 schedule: finite
        /// and `>= 1` (A6: `> 0`, as its specification allows).
        ///
        /// ```
        /// let b = steadfast::Backoff::exponential().multiplier(1.5).jitter(steadfast::Jitter::None).build()?;
        /// assert_eq!(b.delays().nth(2), Some(std::time::Duration::from_millis(225)));
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        multiplier, multiplier: f64
    );
    setter!(
        /// The bits shifted per step of a shift-exponential schedule (`>= 1`;
        /// 1 doubles, 2 quadruples).
        ///
        /// ```
        /// let b = steadfast::Backoff::shift_exponential().shift(2).build()?;
        /// assert_eq!(b.delays().nth(1), Some(std::time::Duration::from_millis(400)));
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        shift, shift: u32
    );
    setter!(
        /// The cap on each delay (see [`Backoff`] for when it holds after jitter).
        ///
        /// ```
        /// use std::time::Duration;
        /// let b = steadfast::Backoff::exponential().max_delay(Duration::from_millis(150)).build()?;
        /// assert!(b.delays().take(20).all(|d| d <= Duration::from_millis(150)));
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        max_delay, max_delay: Duration
    );
    setter!(
        /// Same as [`max_delay`](Self::max_delay) (the short name text
        /// configuration uses: `max=5s`).
        ///
        /// ```
        /// let b = steadfast::Backoff::exponential().max(std::time::Duration::from_secs(5)).build()?;
        /// assert_eq!(b.max_delay(), std::time::Duration::from_secs(5));
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        max, max_delay: Duration
    );
    setter!(
        /// A floor under each delay after jitter (pester's 1 ms, for example);
        /// must not exceed `max_delay`.
        ///
        /// ```
        /// use std::time::Duration;
        /// let b = steadfast::Backoff::exponential().min_delay(Duration::from_millis(1)).build()?;
        /// assert!(b.delays().take(50).all(|d| d >= Duration::from_millis(1)));
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        min_delay, min_delay: Duration
    );
    setter!(
        /// The jitter (see [`Jitter`]); not for the decorrelated and A6
        /// schedules, whose randomness is their own; grpc-go takes
        /// `Proportional` or `None`.
        ///
        /// ```
        /// let b = steadfast::Backoff::linear().jitter(steadfast::Jitter::Full).build()?;
        /// assert_eq!(b.jitter(), steadfast::Jitter::Full);
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        jitter, jitter: Jitter
    );
    setter!(
        /// The limit on attempts, counting the first (`>= 1`): the schedule
        /// gives at most `max_attempts - 1` delays.
        ///
        /// ```
        /// let b = steadfast::Backoff::default_builder().max_attempts(5).build()?;
        /// assert_eq!(b.delays().count(), 4);
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        max_attempts, max_attempts: u32
    );
    setter!(
        /// The limit on the sum of the delays: the last delay is clipped so
        /// the sum never exceeds it, then the schedule ends. The sum is kept
        /// in nanoseconds and saturates at `u64::MAX` (about 584 years), so a
        /// longer limit acts as that one.
        ///
        /// ```
        /// use std::time::Duration;
        /// let b = steadfast::Backoff::constant(Duration::from_secs(1)).max_total_delay(Duration::from_millis(2500)).build()?;
        /// let d: Vec<_> = b.delays().collect();
        /// assert_eq!(d, [Duration::from_secs(1), Duration::from_secs(1), Duration::from_millis(500)]);
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        max_total_delay, max_total_delay: Duration
    );
    setter!(
        /// A fixed seed: the same seed gives the same delays on every platform.
        ///
        /// ```
        /// let b = steadfast::Backoff::default_builder().seed(7).build()?;
        /// assert!(b.delays().take(5).eq(b.delays().take(5)));
        /// # Ok::<(), steadfast::ConfigError>(())
        /// ```
        seed, seed: u64
    );

    /// Checks every setting and makes the [`Backoff`].
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field and the rule: a multiplier that is
    /// not finite, is zero, negative or below 1 (A6: not `> 0`); a
    /// proportional jitter outside `[0, 1]`; a jitter other than
    /// proportional or none on grpc-go; a shift of 0; `min_delay >
    /// max_delay`; `max_attempts == 0`; a setting that does not apply to the
    /// schedule.
    ///
    /// ```
    /// use steadfast::Backoff;
    /// assert_eq!(Backoff::exponential().max_attempts(0).build().unwrap_err().field(), "max_attempts");
    /// ```
    pub fn build(self) -> Result<Backoff, ConfigError> {
        let kind = self.kind;
        let c = kind.component();
        let not_applicable = |field: &'static str, got: &dyn fmt::Debug| {
            Err(ConfigError::new(
                c,
                field,
                "does not apply to this schedule",
                format!("{got:?}"),
            ))
        };
        let (uses_step, uses_multiplier, uses_shift, own_jitter) = match kind {
            Kind::Constant | Kind::Fibonacci => (false, false, false, false),
            Kind::Linear => (true, false, false, false),
            Kind::Exponential | Kind::GrpcGo => (false, true, false, false),
            Kind::ShiftExponential => (false, false, true, false),
            Kind::Decorrelated | Kind::DecorrelatedV2 => (false, false, false, true),
            Kind::GrpcA6 | Kind::GrpcA6Legacy => (false, true, false, true),
        };
        if let (false, Some(v)) = (uses_step, self.step) {
            return not_applicable("step", &v);
        }
        if let (false, Some(v)) = (uses_multiplier, self.multiplier) {
            return not_applicable("multiplier", &v);
        }
        if let (false, Some(v)) = (uses_shift, self.shift) {
            return not_applicable("shift", &v);
        }
        if let (true, Some(j)) = (own_jitter, self.jitter) {
            return Err(ConfigError::new(
                c,
                "jitter",
                "does not apply: this schedule's randomness is fixed by its definition",
                j,
            ));
        }

        let ms = |n: u64| Duration::from_millis(n);
        let (default_initial, default_max, default_multiplier, default_jitter) = match kind {
            Kind::Constant | Kind::Linear => (ms(1000), None, 1.0, Jitter::None),
            Kind::Exponential => (ms(100), Some(ms(10_000)), 2.0, Jitter::Full),
            Kind::ShiftExponential | Kind::Fibonacci => {
                (ms(100), Some(ms(10_000)), 1.0, Jitter::None)
            }
            Kind::Decorrelated | Kind::DecorrelatedV2 => {
                (ms(100), Some(ms(10_000)), 1.0, Jitter::None)
            }
            Kind::GrpcGo => (ms(1000), Some(ms(120_000)), 1.6, Jitter::Proportional(0.2)),
            Kind::GrpcA6 => (ms(100), Some(ms(1000)), 2.0, Jitter::Proportional(0.2)),
            Kind::GrpcA6Legacy => (ms(100), Some(ms(1000)), 2.0, Jitter::Full),
        };
        let initial = nanos(self.initial.unwrap_or(default_initial));
        let multiplier = self.multiplier.unwrap_or(default_multiplier);
        let jitter = self.jitter.unwrap_or(default_jitter);
        let max = self.max_delay.or(default_max);
        let max_ns = max.map_or(MAX_NS, nanos);
        let max_u64 = max.map_or(u64::MAX, nanos_u64);
        let min_ns = self.min_delay.map_or(0, nanos_u64);

        match kind {
            Kind::GrpcA6 | Kind::GrpcA6Legacy => {
                if !(multiplier.is_finite() && multiplier > 0.0) {
                    return Err(ConfigError::new(
                        c,
                        "multiplier",
                        "must be a finite number > 0",
                        multiplier,
                    ));
                }
            }
            _ => {
                if !(multiplier.is_finite() && multiplier >= 1.0) {
                    return Err(ConfigError::new(
                        c,
                        "multiplier",
                        "must be a finite number >= 1",
                        multiplier,
                    ));
                }
            }
        }
        jitter.validate(c)?;
        if kind == Kind::GrpcGo
            && matches!(jitter, Jitter::Full | Jitter::Equal | Jitter::Additive(_))
        {
            return Err(ConfigError::new(
                c,
                "jitter",
                "must be Proportional or None (grpc-go's jitter is a factor)",
                jitter,
            ));
        }
        let shift = self.shift.unwrap_or(1);
        if shift == 0 {
            return Err(ConfigError::new(
                c,
                "shift",
                "must be >= 1 (use a constant schedule for no growth)",
                shift,
            ));
        }
        if min_ns > max_u64 {
            return Err(ConfigError::new(
                c,
                "min_delay",
                "must not exceed max_delay",
                (self.min_delay, max),
            ));
        }
        if self.max_attempts == Some(0) {
            return Err(ConfigError::new(
                c,
                "max_attempts",
                "must be >= 1 (it counts the first attempt)",
                0u32,
            ));
        }

        let cap_after_jitter = !matches!(kind, Kind::GrpcGo | Kind::GrpcA6);
        let curve = match kind {
            Kind::Constant => Curve::Constant { interval: initial },
            Kind::Linear => Curve::Linear {
                base: initial,
                step: nanos(self.step.unwrap_or(ms(1000))),
            },
            Kind::Exponential | Kind::GrpcGo | Kind::GrpcA6 | Kind::GrpcA6Legacy => {
                if (1.0..=MAX_WHOLE_FACTOR).contains(&multiplier) && multiplier.fract() == 0.0 {
                    // Checked above: a whole number in [1, 2^32], exact.
                    Curve::ExponentialWhole {
                        initial: nanos_u64(self.initial.unwrap_or(default_initial)),
                        factor: multiplier as u64,
                    }
                } else {
                    Curve::Exponential {
                        initial,
                        multiplier,
                    }
                }
            }
            Kind::ShiftExponential => Curve::Shift {
                initial: nanos_u64(self.initial.unwrap_or(default_initial)),
                shift,
            },
            Kind::Fibonacci => Curve::Fibonacci { initial },
            Kind::Decorrelated => Curve::Decorrelated { base: initial },
            Kind::DecorrelatedV2 => Curve::DecorrelatedV2 { median: initial },
        };
        let clamp_after_jitter = min_ns > 0 || (cap_after_jitter && jitter.max_factor() > 1.0);
        let plain = match curve {
            Curve::ExponentialWhole { initial, factor }
                if jitter == Jitter::Full
                    && kind != Kind::GrpcGo
                    && !clamp_after_jitter
                    && self.max_total_delay.is_none() =>
            {
                Some((initial, factor))
            }
            _ => None,
        };
        Ok(Backoff {
            kind,
            curve,
            jitter,
            jitter_fx: jitter.fixed_point(),
            base_first: kind == Kind::GrpcGo,
            cap_after_jitter,
            min_ns,
            max_u64,
            post_cap: if cap_after_jitter { max_u64 } else { u64::MAX },
            retry_limit: self.max_attempts.map_or(u64::MAX, |m| u64::from(m) - 1),
            // The jittered envelope is at most `max_u64 * max_factor` (for
            // a non-zero additive jitter, `max_u64 + m`: factor unbounded).
            clamp_after_jitter,
            plain,
            max_ns,
            max_attempts: self.max_attempts,
            max_total: self.max_total_delay,
            total_limit: self.max_total_delay.map(nanos_u64),
            seed: self.seed,
        })
    }
}

impl Backoff {
    /// A builder preset to [`Backoff::default`] (exponential, 100 ms, ×2,
    /// max 10 s, full jitter), to change only some settings.
    ///
    /// ```
    /// let b = steadfast::Backoff::default_builder().max_attempts(3).build()?;
    /// assert_eq!(b.name(), "exponential");
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn default_builder() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Exponential)
    }
}
