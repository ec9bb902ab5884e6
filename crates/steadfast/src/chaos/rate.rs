//! [`InjectionRate`]: how often a fault is injected.

use std::fmt;

use crate::config_error::ConfigError;

/// The scale of a rate: a draw's top 53 bits against `rate · 2^53`, so
/// every rate an `f64` in `0..=1` can say is exact to one part in 2^53,
/// and 1 always hits.
const SCALE: u64 = 1 << 53;

/// How often a fault is injected: a probability in `0..=1`, checked when
/// made, and compared with a random draw in integers.
///
/// ```
/// use steadfast::chaos::InjectionRate;
/// let rate = InjectionRate::new(0.25)?;
/// assert_eq!(rate.get(), 0.25);
/// assert!(InjectionRate::new(1.5).is_err());
/// assert!(InjectionRate::new(f64::NAN).is_err());
/// assert!(InjectionRate::percent(30)?.get() > 0.29);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct InjectionRate(u64);

impl InjectionRate {
    /// Never injects.
    pub const NEVER: Self = Self(0);
    /// Injects every time.
    pub const ALWAYS: Self = Self(SCALE);

    /// The rate `p`, a probability in `0..=1`.
    ///
    /// # Errors
    /// A [`ConfigError`] for a `p` outside `0..=1` or not a number.
    pub fn new(p: f64) -> Result<Self, ConfigError> {
        if !(0.0..=1.0).contains(&p) {
            return Err(ConfigError::new(
                "chaos",
                "rate",
                "must be a probability in 0..=1",
                p,
            ));
        }
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        Ok(Self((p * SCALE as f64).round() as u64))
    }

    /// The rate `pct` percent (0..=100), as Envoy and gRFC A33 write it.
    ///
    /// # Errors
    /// A [`ConfigError`] above 100.
    pub fn percent(pct: u32) -> Result<Self, ConfigError> {
        Self::new(f64::from(pct) / 100.0)
    }

    /// The rate `numerator / denominator` (`denominator` 100, 10,000 or
    /// 1,000,000 in Envoy's and A33's fractional percents).
    ///
    /// # Errors
    /// A [`ConfigError`] for a zero denominator; a numerator above the
    /// denominator is read as 1 (A33: "values above 100% are treated as 100%").
    pub fn fraction(numerator: u32, denominator: u32) -> Result<Self, ConfigError> {
        if denominator == 0 {
            return Err(ConfigError::new(
                "chaos",
                "denominator",
                "must be positive",
                denominator,
            ));
        }
        let n = u128::from(numerator.min(denominator));
        #[allow(clippy::cast_possible_truncation)]
        Ok(Self(
            (n * u128::from(SCALE) / u128::from(denominator)) as u64,
        ))
    }

    /// The probability.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn get(self) -> f64 {
        self.0 as f64 / SCALE as f64
    }

    /// Whether the rate is zero.
    #[must_use]
    pub const fn is_never(self) -> bool {
        self.0 == 0
    }

    /// Whether a random 64-bit `draw` hits this rate.
    #[must_use]
    #[inline]
    pub const fn hits(self, draw: u64) -> bool {
        (draw >> 11) < self.0
    }

    /// The smaller of two rates: a rate asked for (by a request header)
    /// capped by the configured one.
    #[must_use]
    pub fn capped_by(self, cap: Self) -> Self {
        self.min(cap)
    }
}

impl fmt::Debug for InjectionRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InjectionRate({})", self.get())
    }
}

impl fmt::Display for InjectionRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.get() * 100.0)
    }
}
