//! Latency distributions for the server model.
//!
//! A [`Latency`] is a plain value: it is sampled with the simulation's seeded
//! [`Rng`], so the same seed gives the same latencies. It can be written and
//! parsed as text, which is how the CLI takes it:
//!
//! | text | meaning |
//! | --- | --- |
//! | `const:1ms` | always 1 ms |
//! | `exp:10ms` | exponential with mean 10 ms |
//! | `lognormal:5ms:0.8` | log-normal with median 5 ms and shape σ = 0.8 |
//! | `0.98*exp:1ms + 0.02*exp:200ms` | a mixture: 98 % from the first, 2 % from the second |
//!
//! Units: `ns`, `us`, `ms`, `s`, `m`, `h`. Weights may also be written as `98%`.
//!
//! ```
//! use steadfast::backoff::Rng;
//! use steadfast_sim::Latency;
//!
//! let latency: Latency = "0.98*exp:1ms + 0.02*exp:200ms".parse()?;
//! let mut rng = Rng::with_seed(1);
//! let sample = latency.sample(&mut rng);
//! assert!(sample.as_secs() < 60);
//! assert_eq!(latency.to_string(), "0.98*exp:1ms + 0.02*exp:200ms");
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Serialize, Serializer};
use steadfast::backoff::Rng;

use crate::SimError;

/// The longest latency a sample may take (one hour): draws beyond it are
/// clamped, so a heavy tail cannot overflow virtual time.
pub const MAX_SAMPLE: Duration = Duration::from_secs(3600);

/// A distribution of latencies (service times).
///
/// Build one directly or parse it from text (see the [module docs](self));
/// [`validate`](Self::validate) (called by every scenario) rejects negative,
/// NaN and infinite parameters.
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::Latency;
///
/// let fixed = Latency::Constant(Duration::from_millis(2));
/// assert_eq!(fixed.mean(), Duration::from_millis(2));
/// let bad = Latency::LogNormal { median: Duration::from_millis(1), sigma: f64::NAN };
/// assert!(bad.validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Latency {
    /// Always the same.
    Constant(Duration),
    /// Exponential (memoryless) with the given mean.
    Exponential {
        /// The mean.
        mean: Duration,
    },
    /// Log-normal: `median * exp(sigma * Z)` with `Z` standard normal.
    LogNormal {
        /// The median (50th percentile).
        median: Duration,
        /// The shape: the standard deviation of the logarithm (finite, >= 0).
        sigma: f64,
    },
    /// A weighted mixture: each sample picks one component with probability
    /// proportional to its weight, then samples it.
    Mixture(Vec<(f64, Latency)>),
}

impl Latency {
    /// Checks every parameter: weights finite and >= 0 with a positive sum,
    /// sigma finite and >= 0, no empty mixture.
    ///
    /// ```
    /// use steadfast_sim::Latency;
    /// assert!(Latency::Mixture(vec![]).validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), SimError> {
        const SCOPE: &str = "latency distribution";
        match self {
            Self::Constant(_) | Self::Exponential { .. } => Ok(()),
            Self::LogNormal { sigma, .. } => {
                if sigma.is_finite() && *sigma >= 0.0 {
                    Ok(())
                } else {
                    Err(SimError::config(
                        SCOPE,
                        "sigma",
                        "must be a finite number >= 0",
                        sigma,
                    ))
                }
            }
            Self::Mixture(parts) => {
                if parts.is_empty() {
                    return Err(SimError::config(
                        SCOPE,
                        "mixture",
                        "needs at least one component",
                        0,
                    ));
                }
                let mut sum = 0.0;
                for (weight, part) in parts {
                    if !(weight.is_finite() && *weight >= 0.0) {
                        return Err(SimError::config(
                            SCOPE,
                            "weight",
                            "must be a finite number >= 0",
                            weight,
                        ));
                    }
                    sum += weight;
                    part.validate()?;
                }
                if sum > 0.0 {
                    Ok(())
                } else {
                    Err(SimError::config(
                        SCOPE,
                        "weight",
                        "must add up to more than zero",
                        sum,
                    ))
                }
            }
        }
    }

    /// One draw, clamped to [`MAX_SAMPLE`]. Assumes a validated distribution
    /// (an invalid one still returns a value, never panics).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::backoff::Rng;
    /// use steadfast_sim::Latency;
    /// let mut rng = Rng::with_seed(3);
    /// let d = Latency::Exponential { mean: Duration::from_millis(10) }.sample(&mut rng);
    /// assert!(d < Duration::from_secs(10));
    /// ```
    pub fn sample(&self, rng: &mut Rng) -> Duration {
        Duration::from_nanos(self.sample_nanos(rng))
    }

    /// One draw in nanoseconds, clamped to [`MAX_SAMPLE`].
    ///
    /// ```
    /// use steadfast::backoff::Rng;
    /// use steadfast_sim::Latency;
    /// let fixed: Latency = "const:1ms".parse()?;
    /// assert_eq!(fixed.sample_nanos(&mut Rng::with_seed(0)), 1_000_000);
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    pub fn sample_nanos(&self, rng: &mut Rng) -> u64 {
        let max = MAX_SAMPLE.as_nanos() as f64;
        let nanos = match self {
            Self::Constant(d) => d.as_nanos() as f64,
            Self::Exponential { mean } => {
                // 1 - u lies in (0, 1], so the logarithm is finite.
                -(mean.as_nanos() as f64) * (1.0 - rng.unit_f64()).ln()
            }
            Self::LogNormal { median, sigma } => {
                median.as_nanos() as f64 * (sigma * standard_normal(rng)).exp()
            }
            Self::Mixture(parts) => {
                let total: f64 = parts.iter().map(|(w, _)| w).sum();
                let mut pick = rng.unit_f64() * total;
                for (weight, part) in parts {
                    if pick < *weight {
                        return part.sample_nanos(rng);
                    }
                    pick -= weight;
                }
                match parts.last() {
                    Some((_, part)) => return part.sample_nanos(rng),
                    None => 0.0,
                }
            }
        };
        if nanos.is_nan() {
            return 0;
        }
        // `as` saturates; the clamp keeps a heavy tail inside the horizon.
        nanos.clamp(0.0, max) as u64
    }

    /// The mean of the distribution (before the [`MAX_SAMPLE`] clamp).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_sim::Latency;
    /// let mix: Latency = "0.5*const:2ms + 0.5*const:4ms".parse()?;
    /// assert_eq!(mix.mean(), Duration::from_millis(3));
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    #[must_use]
    pub fn mean(&self) -> Duration {
        Duration::from_secs_f64(self.mean_secs().clamp(0.0, MAX_SAMPLE.as_secs_f64()))
    }

    fn mean_secs(&self) -> f64 {
        match self {
            Self::Constant(d) => d.as_secs_f64(),
            Self::Exponential { mean } => mean.as_secs_f64(),
            Self::LogNormal { median, sigma } => median.as_secs_f64() * (sigma * sigma / 2.0).exp(),
            Self::Mixture(parts) => {
                let total: f64 = parts.iter().map(|(w, _)| w).sum();
                if total > 0.0 {
                    parts.iter().map(|(w, p)| w * p.mean_secs()).sum::<f64>() / total
                } else {
                    0.0
                }
            }
        }
    }
}

/// A standard normal draw (Box–Muller).
fn standard_normal(rng: &mut Rng) -> f64 {
    let u1 = 1.0 - rng.unit_f64(); // (0, 1]
    let u2 = rng.unit_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Constant(d) => write!(f, "const:{}", DurationText(*d)),
            Self::Exponential { mean } => write!(f, "exp:{}", DurationText(*mean)),
            Self::LogNormal { median, sigma } => {
                write!(f, "lognormal:{}:{sigma}", DurationText(*median))
            }
            Self::Mixture(parts) => {
                for (i, (weight, part)) in parts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" + ")?;
                    }
                    write!(f, "{weight}*{part}")?;
                }
                Ok(())
            }
        }
    }
}

/// A duration written with the largest unit that keeps it exact (or in
/// milliseconds with a fraction).
pub(crate) struct DurationText(pub(crate) Duration);

impl fmt::Display for DurationText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        if ns == 0 {
            f.write_str("0ms")
        } else if ns.is_multiple_of(1_000_000_000) {
            write!(f, "{}s", ns / 1_000_000_000)
        } else if ns.is_multiple_of(1_000_000) {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns.is_multiple_of(1_000) {
            write!(f, "{}us", ns / 1_000)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

impl Serialize for Latency {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl FromStr for Latency {
    type Err = SimError;

    fn from_str(input: &str) -> Result<Self, SimError> {
        let err = |reason: String| SimError::Parse {
            input: input.to_owned(),
            reason,
        };
        let text = input.trim();
        if text.contains('*') || text.contains('+') {
            let mut parts = Vec::new();
            for piece in text.split('+') {
                let piece = piece.trim();
                let (weight, dist) = piece.split_once('*').ok_or_else(|| {
                    err(format!(
                        "mixture component {piece:?} is not WEIGHT*DISTRIBUTION"
                    ))
                })?;
                let weight = parse_weight(weight.trim()).map_err(&err)?;
                parts.push((weight, parse_simple(dist.trim()).map_err(&err)?));
            }
            let latency = Self::Mixture(parts);
            latency.validate().map_err(|e| err(e.to_string()))?;
            return Ok(latency);
        }
        let latency = parse_simple(text).map_err(&err)?;
        latency.validate().map_err(|e| err(e.to_string()))?;
        Ok(latency)
    }
}

fn parse_weight(text: &str) -> Result<f64, String> {
    let (number, scale) = match text.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (text, 1.0),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("weight {text:?} is not a number"))?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(format!("weight {text:?} must be a finite number >= 0"));
    }
    Ok(value * scale)
}

fn parse_simple(text: &str) -> Result<Latency, String> {
    let mut fields = text.split(':').map(str::trim);
    let kind = fields.next().unwrap_or_default();
    let first = fields.next();
    let second = fields.next();
    if fields.next().is_some() {
        return Err(format!("too many `:` fields in {text:?}"));
    }
    fn need<'a>(field: Option<&'a str>, kind: &str, what: &str) -> Result<&'a str, String> {
        field.ok_or_else(|| format!("{kind:?} needs {what} (e.g. `{kind}:10ms`)"))
    }
    match kind {
        "const" | "constant" => {
            no_extra(second, kind)?;
            Ok(Latency::Constant(parse_duration(need(
                first,
                kind,
                "a duration",
            )?)?))
        }
        "exp" | "exponential" => {
            no_extra(second, kind)?;
            Ok(Latency::Exponential {
                mean: parse_duration(need(first, kind, "a mean")?)?,
            })
        }
        "lognormal" | "lognorm" => {
            let median = parse_duration(need(first, kind, "a median")?)?;
            let sigma_text = second.ok_or_else(|| {
                "lognormal needs a median and a sigma (e.g. `lognormal:5ms:0.8`)".to_owned()
            })?;
            let sigma: f64 = sigma_text
                .parse()
                .map_err(|_| format!("sigma {sigma_text:?} is not a number"))?;
            if !(sigma.is_finite() && sigma >= 0.0) {
                return Err(format!("sigma {sigma_text:?} must be a finite number >= 0"));
            }
            Ok(Latency::LogNormal { median, sigma })
        }
        other => Err(format!(
            "unknown distribution {other:?} (expected const, exp, lognormal or a mixture W*D + W*D)"
        )),
    }
}

fn no_extra(field: Option<&str>, kind: &str) -> Result<(), String> {
    match field {
        Some(extra) => Err(format!("{kind} takes one value, got an extra {extra:?}")),
        None => Ok(()),
    }
}

/// Parses `12ms`, `1.5s`, `250us`, `800ns`: a finite, non-negative number
/// and a unit (the same syntax as inside a [`Latency`]), for a caller that
/// maps text flags onto a configuration.
///
/// # Errors
/// A message saying what is wrong (no unit, not a number, NaN, negative,
/// too large).
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::dist::parse_duration;
/// assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// assert!(parse_duration("-1s").is_err());
/// assert!(parse_duration("NaNms").is_err());
/// assert!(parse_duration("10").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    const UNITS: [(&str, f64); 7] = [
        ("ns", 1e-9),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
    ];
    const KNOWN: &str = "ns, us, ms, s, m, h";
    let text = text.trim();
    // What a number followed by an unknown unit looks like: the trailing
    // run of letters after something that parses as a number.
    let unknown_unit = || {
        let split = text
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_alphabetic())
            .last()
            .map(|(i, _)| i)?;
        let (number, unit) = text.split_at(split);
        number.trim().parse::<f64>().ok()?;
        Some(format!(
            "duration {text:?} has an unknown unit {unit:?} ({KNOWN})"
        ))
    };
    let Some((number, scale)) = UNITS
        .iter()
        .find_map(|(unit, scale)| text.strip_suffix(unit).map(|n| (n, *scale)))
    else {
        return Err(
            unknown_unit().unwrap_or_else(|| format!("duration {text:?} has no unit ({KNOWN})"))
        );
    };
    let value: f64 = number.trim().parse().map_err(|_| {
        unknown_unit().unwrap_or_else(|| format!("duration {text:?} does not start with a number"))
    })?;
    if value.is_nan() || value < 0.0 {
        return Err(format!("duration {text:?} must be a number >= 0"));
    }
    Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("duration {text:?} is too large (at most about 584 years)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_round_trips() {
        for text in [
            "const:1ms",
            "exp:10ms",
            "lognormal:5ms:0.8",
            "0.98*exp:1ms + 0.02*exp:200ms",
            "const:250us",
            "const:2s",
        ] {
            let latency: Latency = text.parse().unwrap();
            assert_eq!(latency.to_string(), text);
            assert_eq!(latency.to_string().parse::<Latency>().unwrap(), latency);
        }
        let pct: Latency = "98%*const:1ms + 2%*const:200ms".parse().unwrap();
        assert_eq!(pct, "0.98*const:1ms + 0.02*const:200ms".parse().unwrap());
    }

    #[test]
    fn rejects_bad_text_with_reasons() {
        for (text, needle) in [
            ("const:-1ms", "a number >= 0"),
            ("exp:NaNms", "a number >= 0"),
            ("exp:1e400ms", "too large"),
            ("exp:1e400s", "too large"),
            ("exp:10", "no unit"),
            ("exp:10 parsecs", "unknown unit \"parsecs\""),
            ("lognormal:5ms", "sigma"),
            ("lognormal:5ms:inf", "finite"),
            ("weird:1ms", "unknown distribution"),
            ("0*const:1ms", "more than zero"),
            ("-1*const:1ms", "finite number >= 0"),
            ("const:1ms + exp:1ms", "WEIGHT*DISTRIBUTION"),
            ("const:1y", "unknown unit \"y\" (ns, us, ms, s, m, h)"),
            ("const:xms", "does not start with a number"),
        ] {
            let err = text.parse::<Latency>().unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn sample_means_are_close_to_the_mean() {
        let mut rng = Rng::with_seed(42);
        for latency in [
            Latency::Exponential {
                mean: Duration::from_millis(10),
            },
            Latency::LogNormal {
                median: Duration::from_millis(10),
                sigma: 0.5,
            },
            "0.98*const:1ms + 0.02*const:200ms".parse().unwrap(),
        ] {
            let n = 200_000;
            let sum: f64 = (0..n).map(|_| latency.sample_nanos(&mut rng) as f64).sum();
            let mean = sum / f64::from(n);
            let want = latency.mean().as_nanos() as f64;
            assert!(
                (mean / want - 1.0).abs() < 0.03,
                "{latency}: {mean} vs {want}"
            );
        }
    }

    #[test]
    fn lognormal_median_is_the_median() {
        let mut rng = Rng::with_seed(7);
        let latency = Latency::LogNormal {
            median: Duration::from_millis(5),
            sigma: 1.0,
        };
        let mut v: Vec<u64> = (0..100_001)
            .map(|_| latency.sample_nanos(&mut rng))
            .collect();
        v.sort_unstable();
        let median = v[50_000] as f64 / 1e6;
        assert!((median - 5.0).abs() < 0.15, "{median}");
    }

    #[test]
    fn samples_are_clamped() {
        let mut rng = Rng::with_seed(1);
        let huge = Latency::LogNormal {
            median: Duration::from_secs(3000),
            sigma: 50.0,
        };
        for _ in 0..1000 {
            assert!(huge.sample(&mut rng) <= MAX_SAMPLE);
        }
    }
}
