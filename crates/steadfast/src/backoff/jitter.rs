//! Jitter: the random spread applied to a schedule's envelope.

use crate::{ConfigError, Rng};

/// How a delay is randomized around (or below) the schedule's unjittered
/// value `v` (its *envelope*). A separate, composable choice: any curve that
/// has no randomness of its own takes any of these.
///
/// | variant | delay | mean |
/// | --- | --- | --- |
/// | `None` | `v` | `v` |
/// | `Proportional(f)` | `v * (1 + f * U(-1, 1))`, i.e. `U(v(1-f), v(1+f))` | `v` |
/// | `Full` | `U(0, v)` | `v / 2` |
/// | `Equal` | `v / 2 + U(0, v / 2)` | `3v / 4` |
///
/// `Full` and `Equal` are the formulas of Marc Brooker's "Exponential Backoff
/// And Jitter" (AWS Architecture Blog, 2015); `Proportional(0.2)` is gRPC's
/// ±20 %. A floor below the jittered value (pester's 1 ms, for example) is the
/// builder's [`min_delay`](crate::backoff::BackoffBuilder::min_delay).
///
/// # Exact form
///
/// The built-in schedules apply a jitter in whole nanoseconds, from one raw
/// 64-bit word `r` of the call's [`Rng`] (`U = r / 2^64`, uniform in
/// `[0, 1)` with 64 bits): `Full` gives `floor(v * r / 2^64)`; `Equal` and
/// `Proportional(f)` give `floor(v * F / 2^62)` with the factor
/// `F = A + floor(r * B / 2^64)` in 2.62 fixed point, `A = floor((1 - f) * 2^62)`
/// and `B = floor(2f * 2^62)` (`Equal`: `A = B = 2^61`), saturating at
/// `u64::MAX`.
/// `None` draws nothing. So a seeded schedule gives the same delays on every
/// platform, and no float is involved after the envelope. [`Jitter::apply`]
/// draws from the same distribution for a float envelope (from a float draw,
/// [`Rng::unit_f64`]), as the gRPC connection backoff does.
///
/// Whether the cap (`max_delay`) holds after jitter depends on the schedule:
/// it does for every schedule except those whose specification says the
/// jitter may exceed it (gRFC A6, grpc-go and gRPC connection backoff), see
/// [`Backoff`](crate::Backoff).
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
}

impl Jitter {
    /// Checks the factor of [`Jitter::Proportional`]: finite and within `[0, 1]`.
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
    /// drawing at most one number from `rng`. The result is never negative
    /// and never NaN for a non-negative `v`.
    ///
    /// ```
    /// use steadfast::{Jitter, Rng};
    /// let mut rng = Rng::with_seed(9);
    /// let v = Jitter::Equal.apply(1000.0, &mut rng);
    /// assert!((500.0..=1000.0).contains(&v));
    /// assert_eq!(Jitter::None.apply(1000.0, &mut rng), 1000.0);
    /// ```
    #[inline]
    #[must_use]
    pub fn apply(self, v: f64, rng: &mut Rng) -> f64 {
        if self == Self::None {
            return v;
        }
        let (a, b) = self.affine();
        v * (a + b * rng.unit_f64())
    }

    /// This jitter as an affine map of one uniform draw `U` in `[0, 1)`: the
    /// delay is `v * (a + b * U)`. The built-in schedules precompute it, in
    /// fixed point (see "Exact form" on [`Jitter`]).
    ///
    /// ```
    /// use steadfast::Jitter;
    /// assert_eq!(Jitter::Full.affine(), (0.0, 1.0));
    /// assert_eq!(Jitter::Equal.affine(), (0.5, 0.5));
    /// assert_eq!(Jitter::Proportional(0.25).affine(), (0.75, 0.5));
    /// assert_eq!(Jitter::None.affine(), (1.0, 0.0));
    /// ```
    #[must_use]
    pub const fn affine(self) -> (f64, f64) {
        match self {
            Self::None => (1.0, 0.0),
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
        }
    }

    /// The largest factor this jitter can multiply the envelope by
    /// (`1 + f` for proportional jitter, else 1).
    ///
    /// ```
    /// assert_eq!(steadfast::Jitter::Proportional(0.25).max_factor(), 1.25);
    /// ```
    #[must_use]
    pub fn max_factor(self) -> f64 {
        match self {
            Self::Proportional(f) => 1.0 + f,
            _ => 1.0,
        }
    }

    /// The smallest factor this jitter can multiply the envelope by
    /// (`1 - f`, 0, 1/2 or 1).
    ///
    /// ```
    /// assert_eq!(steadfast::Jitter::Equal.min_factor(), 0.5);
    /// ```
    #[must_use]
    pub fn min_factor(self) -> f64 {
        match self {
            Self::None => 1.0,
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
        } else {
            v
        }
    }
}

/// `floor(x * y / 2^64)`: with `x` a uniform random word, uniform in `[0, y)`.
#[inline(always)]
pub(super) const fn mul_high(x: u64, y: u64) -> u64 {
    ((x as u128 * y as u128) >> 64) as u64
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
