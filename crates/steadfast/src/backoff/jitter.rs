//! Jitter: the random spread applied to a schedule's envelope.

use std::time::Duration;

use super::nanos::mul_high;
use crate::config_error::ConfigError;
use crate::rng::Rng;

/// How a delay is randomized around (below, or above) the schedule's
/// unjittered value `v` (its *envelope*). A separate, composable choice: any
/// curve that has no randomness of its own takes any of these.
///
/// | variant | delay | mean |
/// | --- | --- | --- |
/// | `None` | `v` | `v` |
/// | `Proportional(f)` | `v * (1 + f * U(-1, 1))`, i.e. `U(v(1-f), v(1+f))` | `v` |
/// | `Full` | `U(0, v)` | `v / 2` |
/// | `Equal` | `v / 2 + U(0, v / 2)` | `3v / 4` |
/// | `Additive(m)` | `v + U(0, m)` | `v + m / 2` |
///
/// `Full` and `Equal` are the formulas of Marc Brooker's "Exponential Backoff
/// And Jitter" (AWS Architecture Blog, 2015); `Proportional(0.2)` is gRPC's
/// ±20 %; `Additive` is the jitter of lancet and backon (a random amount up
/// to a fixed maximum on top of the curve, see [`Jitter::Additive`]). A floor
/// below the jittered value (pester's 1 ms, for example) is the builder's
/// [`min_delay`](super::builder::BackoffBuilder::min_delay).
///
/// # Exact form
///
/// The built-in schedules apply a jitter in whole nanoseconds, from one raw
/// 64-bit word `r` of the call's [`Rng`] (`U = r / 2^64`, uniform in
/// `[0, 1)` with 64 bits): `Full` gives `floor(v * r / 2^64)`; `Equal` and
/// `Proportional(f)` give `floor(v * F / 2^62)` with the factor
/// `F = A + floor(r * B / 2^64)` in 2.62 fixed point, `A = floor((1 - f) * 2^62)`
/// and `B = floor(2f * 2^62)` (`Equal`: `A = B = 2^61`), saturating at
/// `u64::MAX`; `Additive(m)` gives `v + floor(m * r / 2^64)` (`m` in whole
/// nanoseconds), saturating at `u64::MAX`. `None` and
/// `Additive(Duration::ZERO)` draw nothing. So a seeded schedule gives the
/// same delays on every platform, and no float is involved after the
/// envelope. [`Jitter::apply`] draws from the same distribution for a float
/// envelope (from a float draw, [`Rng::unit_f64`]), as the gRPC connection
/// backoff does.
///
/// Whether the cap (`max_delay`) holds after jitter depends on the schedule:
/// it does for every schedule except those whose specification says the
/// jitter may exceed it (gRFC A6, grpc-go and gRPC connection backoff), see
/// [`Backoff`](super::value::Backoff). Those take no `Additive` jitter, so an
/// additive jitter is always capped.
///
/// ```
/// use std::time::Duration;
/// use steadfast::{Backoff, Jitter};
/// let b = Backoff::constant(Duration::from_secs(1)).jitter(Jitter::Proportional(0.5)).seed(3).build()?;
/// for d in b.delays().take(100) {
///     assert!(d >= Duration::from_millis(500) && d <= Duration::from_millis(1500));
/// }
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Jitter {
    /// No randomness: the envelope itself.
    #[default]
    None,
    /// `±f` of the envelope, uniformly: `U(v(1-f), v(1+f))`, with `0 <= f <= 1`.
    Proportional(f64),
    /// "Full jitter": `U(0, v)`.
    Full,
    /// "Equal jitter": `v/2 + U(0, v/2)`.
    Equal,
    /// "Additive jitter": `v + U(0, m)`, a random amount up to the fixed
    /// maximum `m` added on top of the envelope, never below it (lancet's
    /// and backon's jitter).
    ///
    /// **The cap holds after the addition**, as for every jitter of a
    /// schedule that caps after jitter: the delay is
    /// `min(min(v, max_delay) + U(0, m), max_delay)`, which is
    /// `min(v + U(0, m), max_delay)`. A cap is a promise to the caller, so
    /// it wins over the jitter; the price is that once the curve has reached
    /// `max_delay` every delay *is* `max_delay`, with no spread left. Where
    /// clients sit on that plateau together, prefer a jitter that spreads
    /// below the cap (`Full`, `Equal`, `Proportional`), or set `max_delay`
    /// at least `m` above the largest value the curve reaches within the
    /// attempt limit. The schedules that let jitter exceed the cap (grpc-go,
    /// gRFC A6) refuse an additive jitter: theirs is fixed by their
    /// specifications.
    ///
    /// `m` is drawn in whole nanoseconds, uniformly in `[0, m)`.
    /// `Additive(Duration::ZERO)` adds nothing and draws nothing: the same
    /// delays as `None`. Any `m` is valid: one above `u64::MAX` nanoseconds
    /// (about 584 years) acts as that one, and the sum saturates at
    /// `u64::MAX` nanoseconds, like every delay.
    ///
    /// # Coming from lancet or backon
    ///
    /// - lancet's `RetryWithExponentialWithJitterBackoff(interval, 2,
    ///   maxJitter)` waits `interval * 2^n` plus a random
    ///   `1 ns ..= maxJitter`, with no cap: in steadfast,
    ///   `Backoff::exponential().initial(interval).max_delay(Duration::MAX)
    ///   .jitter(Jitter::Additive(maxJitter))`.
    /// - backon's `ExponentialBuilder::default().with_jitter()` waits
    ///   1 s × 2^n capped at 60 s, plus `U(0, min_delay)` = `U(0, 1 s)`, for
    ///   3 retries: the schedule below. backon adds its jitter *after* its
    ///   cap, so its delays reach 61 s on the plateau where steadfast's stop
    ///   at 60 s; below the cap they have the same distribution.
    ///   `ConstantBuilder::default().with_jitter()` (1 s plus `U(0, 1 s)`,
    ///   3 times) is `Backoff::constant(Duration::from_secs(1))
    ///   .jitter(Jitter::Additive(Duration::from_secs(1))).max_attempts(4)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{Backoff, Jitter};
    /// let secs = Duration::from_secs;
    /// // backon's `ExponentialBuilder::default().with_jitter()`:
    /// let b = Backoff::exponential()
    ///     .initial(secs(1))
    ///     .multiplier(2.0)
    ///     .max_delay(secs(60))
    ///     .jitter(Jitter::Additive(secs(1)))
    ///     .max_attempts(4) // the first attempt and 3 retries
    ///     .seed(7)
    ///     .build()?;
    /// let delays: Vec<Duration> = b.delays().collect();
    /// assert_eq!(delays.len(), 3);
    /// for (n, d) in delays.into_iter().enumerate() {
    ///     let curve = secs(1 << n); // 1 s, 2 s, 4 s
    ///     assert!(curve <= d && d < curve + secs(1), "{d:?}");
    /// }
    /// // On the plateau the cap wins: every delay is the cap.
    /// let capped = Backoff::constant(secs(10)).max_delay(secs(10)).jitter(Jitter::Additive(secs(1))).build()?;
    /// assert!(capped.delays().take(20).all(|d| d == secs(10)));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    Additive(Duration),
}

impl Jitter {
    /// Checks the factor of [`Jitter::Proportional`]: finite and within
    /// `[0, 1]`. Every other jitter is valid (an [`Additive`](Self::Additive)
    /// maximum too large to add saturates, see there).
    ///
    /// ```
    /// use steadfast::Jitter;
    /// assert!(Jitter::Proportional(0.2).validate("exponential backoff").is_ok());
    /// let err = Jitter::Proportional(1.5).validate("exponential backoff").unwrap_err();
    /// assert_eq!(err.field(), "jitter");
    /// ```
    pub fn validate(self, component: &'static str) -> Result<(), ConfigError> {
        match self {
            Self::Proportional(f) if !(0.0..=1.0).contains(&f) => Err(ConfigError::new(
                component,
                "jitter",
                "proportional factor must be a number within [0, 1]",
                f,
            )),
            _ => Ok(()),
        }
    }

    /// Applies this jitter to an envelope `v` (nanoseconds, non-negative),
    /// drawing at most one number from `rng` (none for `None` and
    /// `Additive(Duration::ZERO)`). The result is never negative and never
    /// NaN for a non-negative `v`; the caller caps it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::backoff::Rng;
    /// use steadfast::Jitter;
    /// let mut rng = Rng::with_seed(9);
    /// let v = Jitter::Equal.apply(1000.0, &mut rng);
    /// assert!((500.0..=1000.0).contains(&v));
    /// assert_eq!(Jitter::None.apply(1000.0, &mut rng), 1000.0);
    /// let v = Jitter::Additive(Duration::from_nanos(50)).apply(1000.0, &mut rng);
    /// assert!((1000.0..1050.0).contains(&v));
    /// ```
    #[inline]
    #[must_use]
    pub fn apply(self, v: f64, rng: &mut Rng) -> f64 {
        match self {
            Self::None => v,
            Self::Additive(m) if m.is_zero() => v,
            Self::Additive(m) => v + m.as_nanos() as f64 * rng.unit_f64(),
            Self::Proportional(_) | Self::Full | Self::Equal => {
                let (a, b) = self.multiplicative();
                v * (a + b * rng.unit_f64())
            }
        }
    }

    /// This jitter as an affine map of one uniform draw `U` in `[0, 1)`
    /// that scales the envelope: the delay is `v * (a + b * U)`. `None` for
    /// [`Additive`](Self::Additive), whose spread does not scale with `v`
    /// (its delay is `v + m * U`). The built-in schedules precompute it, in
    /// fixed point (see "Exact form" on [`Jitter`]).
    ///
    /// ```
    /// use steadfast::Jitter;
    /// assert_eq!(Jitter::Full.affine(), Some((0.0, 1.0)));
    /// assert_eq!(Jitter::Equal.affine(), Some((0.5, 0.5)));
    /// assert_eq!(Jitter::Proportional(0.25).affine(), Some((0.75, 0.5)));
    /// assert_eq!(Jitter::None.affine(), Some((1.0, 0.0)));
    /// assert_eq!(Jitter::Additive(std::time::Duration::from_millis(50)).affine(), None);
    /// ```
    #[must_use]
    pub const fn affine(self) -> Option<(f64, f64)> {
        match self {
            Self::Additive(_) => None,
            _ => Some(self.multiplicative()),
        }
    }

    /// `(a, b)` of the jitters that scale the envelope; `(1, 0)` for `Additive`.
    const fn multiplicative(self) -> (f64, f64) {
        match self {
            Self::None | Self::Additive(_) => (1.0, 0.0),
            Self::Proportional(f) => (1.0 - f, 2.0 * f),
            Self::Full => (0.0, 1.0),
            Self::Equal => (0.5, 0.5),
        }
    }

    /// This jitter in the fixed-point form the built-in schedules use (see
    /// "Exact form" on [`Jitter`]).
    pub(super) const fn fixed_point(self) -> FixedJitter {
        // `f` is within [0, 1] (checked by `validate` before any schedule is
        // built); the products are then within [0, 2^63] and `as` truncates
        // them (and would saturate anyway).
        const ONE: f64 = (1u64 << 62) as f64;
        match self {
            Self::None => FixedJitter::None,
            Self::Full => FixedJitter::Full,
            Self::Equal => FixedJitter::Affine {
                a: 1 << 61,
                b: 1 << 61,
            },
            Self::Proportional(f) => FixedJitter::Affine {
                a: ((1.0 - f) * ONE) as u64,
                b: (2.0 * f * ONE) as u64,
            },
            Self::Additive(m) => {
                // Whole nanoseconds, saturating (`u64::try_from` is not const).
                let ns = m.as_nanos();
                let max = if ns > u64::MAX as u128 {
                    u64::MAX
                } else {
                    ns as u64
                };
                if max == 0 {
                    FixedJitter::None
                } else {
                    FixedJitter::Additive { max }
                }
            }
        }
    }

    /// The largest factor this jitter can multiply a positive envelope by
    /// (before the cap): `1 + f` for proportional jitter; unbounded
    /// (`f64::INFINITY`) for a non-zero [`Additive`](Self::Additive), which
    /// adds up to `m` however small the envelope; else 1.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Jitter;
    /// assert_eq!(Jitter::Proportional(0.25).max_factor(), 1.25);
    /// assert_eq!(Jitter::Additive(Duration::from_millis(1)).max_factor(), f64::INFINITY);
    /// assert_eq!(Jitter::Additive(Duration::ZERO).max_factor(), 1.0);
    /// ```
    #[must_use]
    pub fn max_factor(self) -> f64 {
        match self {
            Self::Proportional(f) => 1.0 + f,
            Self::Additive(m) if !m.is_zero() => f64::INFINITY,
            Self::None | Self::Full | Self::Equal | Self::Additive(_) => 1.0,
        }
    }

    /// The smallest factor this jitter can multiply the envelope by
    /// (`1 - f`, 0, 1/2, or 1 for `None` and `Additive`).
    ///
    /// ```
    /// assert_eq!(steadfast::Jitter::Equal.min_factor(), 0.5);
    /// ```
    #[must_use]
    pub fn min_factor(self) -> f64 {
        match self {
            Self::None | Self::Additive(_) => 1.0,
            Self::Proportional(f) => 1.0 - f,
            Self::Full => 0.0,
            Self::Equal => 0.5,
        }
    }
}

/// A [`Jitter`] as the built-in schedules apply it: on whole nanoseconds,
/// from one raw 64-bit random word, with no floating point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FixedJitter {
    /// No draw: the envelope itself.
    None,
    /// `floor(v * r / 2^64)`: uniform in `[0, v)` (`0` for `v = 0`).
    Full,
    /// `floor(v * (a + floor(r * b / 2^64)) / 2^62)`, saturating at `u64::MAX`:
    /// the factor `(a + b * U) / 2^62` in 2.62 fixed point.
    Affine { a: u64, b: u64 },
    /// `v + floor(max * r / 2^64)`, saturating at `u64::MAX`: `v` plus a
    /// uniform amount in `[0, max)`, `max > 0`.
    Additive { max: u64 },
}

impl FixedJitter {
    /// Applies the jitter to the envelope `v` (whole nanoseconds), drawing
    /// one word from `rng` unless it is `None`. No branch on the drawn word.
    #[inline(always)]
    pub(super) fn apply(self, v: u64, rng: &mut Rng) -> u64 {
        if let Self::Full = self {
            mul_high(rng.next_u64(), v)
        } else if let Self::Affine { a, b } = self {
            // a + b <= 2^63: no overflow.
            let factor = a + mul_high(rng.next_u64(), b);
            let product = (u128::from(v) * u128::from(factor)) >> 62;
            u64::try_from(product).unwrap_or(u64::MAX)
        } else if let Self::Additive { max } = self {
            v.saturating_add(mul_high(rng.next_u64(), max))
        } else {
            v
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_rules() {
        for bad in [f64::NAN, f64::INFINITY, -0.1, 1.01] {
            let err = Jitter::Proportional(bad).validate("x").unwrap_err();
            assert_eq!(err.field(), "jitter");
            assert!(err.to_string().contains("[0, 1]"), "{err}");
        }
        for good in [0.0, 0.2, 1.0] {
            assert!(Jitter::Proportional(good).validate("x").is_ok());
        }
        for m in [Duration::ZERO, Duration::from_nanos(1), Duration::MAX] {
            assert!(Jitter::Additive(m).validate("x").is_ok());
        }
    }

    #[test]
    fn ranges_hold_for_each_kind() {
        let mut rng = Rng::with_seed(42);
        for j in [
            Jitter::None,
            Jitter::Full,
            Jitter::Equal,
            Jitter::Proportional(0.2),
            Jitter::Proportional(1.0),
            Jitter::Additive(Duration::ZERO),
        ] {
            for _ in 0..10_000 {
                let v = j.apply(1e9, &mut rng);
                assert!(
                    v >= 1e9 * j.min_factor() && v <= 1e9 * j.max_factor(),
                    "{j:?} {v}"
                );
            }
        }
    }

    #[test]
    fn means_match_the_formulas() {
        // Fixed seed: deterministic; bounds 1 % around the exact means
        // (standard error with 100 000 draws is ~0.1 %).
        let n = 100_000;
        for (j, mean) in [
            (Jitter::Full, 0.5),
            (Jitter::Equal, 0.75),
            (Jitter::Proportional(0.2), 1.0),
        ] {
            let mut rng = Rng::with_seed(7);
            let sum: f64 = (0..n).map(|_| j.apply(1.0, &mut rng)).sum();
            let got = sum / f64::from(n);
            assert!((got - mean).abs() < 0.01 * mean, "{j:?}: {got}");
        }
    }

    #[test]
    fn additive_adds_below_its_maximum_in_floats() {
        let mut rng = Rng::with_seed(5);
        let m = Duration::from_millis(50);
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let v = Jitter::Additive(m).apply(1e9, &mut rng);
            assert!((1e9..1.05e9).contains(&v), "{v}");
            sum += v - 1e9;
        }
        // Mean m/2 = 25 ms; standard error 50 ms / sqrt(12 n) ~ 0.05 ms.
        let got = sum / f64::from(n);
        assert!((got - 25e6).abs() < 0.5e6, "{got}");
        // A zero maximum draws nothing: the generator is untouched.
        let before = rng.clone();
        assert_eq!(
            Jitter::Additive(Duration::ZERO)
                .apply(7.0, &mut rng)
                .to_bits(),
            7.0f64.to_bits()
        );
        assert_eq!(rng.next_u64(), before.clone().next_u64());
    }

    #[test]
    fn additive_fixed_point_is_exact_and_saturates() {
        let m = 1_000_000_007u64;
        let fx = Jitter::Additive(Duration::from_nanos(m)).fixed_point();
        assert_eq!(fx, FixedJitter::Additive { max: m });
        for seed in 0..1000 {
            let mut rng = Rng::with_seed(seed);
            let r = rng.clone().next_u64();
            let got = fx.apply(5, &mut rng);
            assert_eq!(got, 5 + ((u128::from(r) * u128::from(m)) >> 64) as u64);
            assert!((5..5 + m).contains(&got));
        }
        // A maximum beyond u64::MAX ns acts as u64::MAX ns; the sum saturates.
        let huge = Jitter::Additive(Duration::MAX).fixed_point();
        assert_eq!(huge, FixedJitter::Additive { max: u64::MAX });
        let mut rng = Rng::with_seed(1);
        for _ in 0..100 {
            assert!(huge.apply(u64::MAX - 3, &mut rng) >= u64::MAX - 3);
        }
        assert_eq!(
            Jitter::Additive(Duration::ZERO).fixed_point(),
            FixedJitter::None
        );
    }

    #[test]
    fn proportional_is_symmetric() {
        let mut rng = Rng::with_seed(11);
        let (mut above, mut below) = (0u32, 0u32);
        for _ in 0..100_000 {
            let v = Jitter::Proportional(0.2).apply(1.0, &mut rng);
            if v > 1.0 {
                above += 1;
            } else {
                below += 1;
            }
        }
        // Expected 50 000 each; standard deviation ~158.
        assert!(above.abs_diff(below) < 2_000, "{above} vs {below}");
    }
}
