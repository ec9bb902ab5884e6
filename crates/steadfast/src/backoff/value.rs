//! [`Backoff`]: the built-in schedules as one `Copy` value — its fields
//! (the settings, precomputed for the pipeline), defaults, accessors and
//! `Debug`.

use std::fmt;
use std::time::Duration;

use super::curve::Curve;
use super::jitter::{FixedJitter, Jitter};
use super::kind::Kind;

/// A backoff schedule: one of the built-in curves, a [`Jitter`], and limits.
///
/// A plain value (`Copy`, no allocation, no clock): build it once, share it
/// by value, and give each call its own
/// [`ScheduleState`](super::schedule::ScheduleState) and [`Rng`](crate::rng::Rng).
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
        self.curve.initial()
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
    /// use steadfast::backoff::Schedule;
    /// let b = steadfast::Backoff::default().with_seed(Some(5));
    /// assert_eq!(b.seed(), Some(5));
    /// ```
    #[must_use]
    pub const fn with_seed(mut self, seed: Option<u64>) -> Self {
        self.seed = seed;
        self
    }
}

impl fmt::Debug for Backoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Backoff");
        s.field("kind", &self.kind.name());
        self.curve.debug_fields(&mut s);
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
