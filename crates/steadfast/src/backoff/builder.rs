//! [`BackoffBuilder`]: the one builder of every built-in schedule, and the
//! validation (`build`) that turns its settings into a [`Backoff`].

use std::fmt;
use std::time::Duration;

use super::curve::{Curve, MAX_WHOLE_FACTOR};
use super::jitter::Jitter;
use super::kind::Kind;
use super::nanos::{MAX_NS, nanos, nanos_u64};
use super::value::Backoff;
use crate::config_error::ConfigError;

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
