//! Human durations on the command line: `250ms`, `1.5s`, `2m`, `1h30m`, `10us`.
//!
//! Grammar: one or more `NUMBER UNIT` segments, without spaces between them
//! (leading and trailing blanks are ignored). `NUMBER` is decimal digits with
//! an optional fraction (`1`, `1.5`, `.5`, `0.25`); `UNIT` is one of
//! `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`, `d`. A bare `0` is zero. The
//! value is computed exactly in nanoseconds (no floating point); a value
//! finer than a nanosecond or larger than [`Duration::MAX`] is an error.
//!
//! ```
//! use std::time::Duration;
//! use steadfast_cli::duration::{parse_duration, format_duration_exact};
//!
//! assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
//! assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
//! assert!(parse_duration("10").is_err()); // a unit is required
//! let d = Duration::new(3723, 4_005_006);
//! assert_eq!(parse_duration(&format_duration_exact(d)), Ok(d));
//! ```

use std::fmt;
use std::time::Duration;

/// Why a duration did not parse; its `Display` is the message shown to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    input: String,
    problem: &'static str,
}

impl DurationError {
    fn new(input: &str, problem: &'static str) -> Self {
        Self {
            input: input.to_owned(),
            problem,
        }
    }

    /// What is wrong with the input, without the input itself.
    #[must_use]
    pub fn problem(&self) -> &'static str {
        self.problem
    }
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid duration {:?}: {} (expected forms like 250ms, 1.5s, 2m, 1h30m, 10us)",
            self.input, self.problem
        )
    }
}

impl std::error::Error for DurationError {}

/// Nanoseconds per unit, longest suffix first so that `ms` wins over `m`.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// Parses a human duration (see the [module docs](self) for the grammar).
///
/// # Errors
/// A [`DurationError`] naming the problem: empty input, a missing number or
/// unit, an unknown unit, a value finer than 1ns or too large.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(DurationError::new(input, "empty"));
    }
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.starts_with('-') && s[1..].starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(DurationError::new(
            input,
            "a duration cannot be negative (0 or more)",
        ));
    }
    let mut rest = s;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        // NUMBER: digits, optional '.', digits.
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..num_len];
        rest = &rest[num_len..];
        if number.is_empty() {
            return Err(DurationError::new(input, "expected a number"));
        }
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if frac_part.contains('.') {
            return Err(DurationError::new(input, "a number has more than one '.'"));
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(DurationError::new(input, "expected digits around '.'"));
        }
        // UNIT: the letters up to the next digit or '.'.
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        if unit.is_empty() {
            return Err(DurationError::new(
                input,
                "missing unit after a number (ns, us, ms, s, m, h or d)",
            ));
        }
        if (unit == "e" || unit == "E" || unit == "e-" || unit == "e+")
            && rest.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(DurationError::new(
                input,
                "exponents (1e3) are not supported: write the number out (1000s)",
            ));
        }
        let Some(&(_, per_unit)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(DurationError::new(
                input,
                "unknown unit (use ns, us, ms, s, m, h or d)",
            ));
        };
        let too_large = || DurationError::new(input, "too large");
        // Integer part, checked.
        let mut int_value: u128 = 0;
        for b in int_part.bytes() {
            int_value = int_value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(b - b'0')))
                .ok_or_else(too_large)?;
        }
        let mut nanos = int_value.checked_mul(per_unit).ok_or_else(too_large)?;
        // Fraction: exact, and it must land on whole nanoseconds.
        let frac_digits = frac_part.trim_end_matches('0');
        if !frac_digits.is_empty() {
            let Ok(exp) = u32::try_from(frac_digits.len()) else {
                return Err(DurationError::new(input, "finer than a nanosecond"));
            };
            let Some(scale) = 10u128.checked_pow(exp) else {
                return Err(DurationError::new(input, "finer than a nanosecond"));
            };
            let mut frac_value: u128 = 0;
            for b in frac_digits.bytes() {
                // At most 38 digits got here (10^exp fits in u128), so no overflow.
                frac_value = frac_value * 10 + u128::from(b - b'0');
            }
            let scaled = frac_value
                .checked_mul(per_unit)
                .ok_or_else(|| DurationError::new(input, "finer than a nanosecond"))?;
            if scaled % scale != 0 {
                return Err(DurationError::new(input, "finer than a nanosecond"));
            }
            nanos = nanos.checked_add(scaled / scale).ok_or_else(too_large)?;
        }
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(too_large)?;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000)
        .map_err(|_| DurationError::new(input, "too large"))?;
    let sub = u32::try_from(total_nanos % 1_000_000_000)
        .map_err(|_| DurationError::new(input, "too large"))?;
    Ok(Duration::new(secs, sub))
}

/// The exact form of `d` that [`parse_duration`] reads back to the same
/// value: segments from days down to nanoseconds, zero segments left out
/// (`1h2m3s4ms`), and `0s` for zero.
#[must_use]
pub fn format_duration_exact(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    let mut nanos = d.as_nanos();
    let mut out = String::new();
    for (name, per_unit) in [
        ("d", 86_400_000_000_000u128),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("ns", 1),
    ] {
        let n = nanos / per_unit;
        if n > 0 {
            out.push_str(&n.to_string());
            out.push_str(name);
            nanos %= per_unit;
        }
    }
    out
}

/// A short form of `d` for people, about three significant digits:
/// `0s`, `850ns`, `12.5us`, `250ms`, `1.3s`, `59.9s`, `2m5s`, `1h30m`, `3d4h`.
/// Parseable by [`parse_duration`], but rounded.
#[must_use]
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    let f = d.as_secs_f64();
    if nanos < 1_000 {
        format!("{nanos}ns")
    } else if nanos < 1_000_000 {
        format!("{}us", short_decimal(f * 1e6))
    } else if nanos < 1_000_000_000 {
        format!("{}ms", short_decimal(f * 1e3))
    } else if d < Duration::from_secs(60) {
        format!("{}s", short_decimal(f))
    } else {
        let secs = d.as_secs() + u64::from(d.subsec_nanos() >= 500_000_000);
        let (days, hours, mins, s) = (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60, secs % 60);
        if days > 0 {
            if hours > 0 {
                format!("{days}d{hours}h")
            } else {
                format!("{days}d")
            }
        } else if hours > 0 {
            if mins > 0 {
                format!("{hours}h{mins}m")
            } else {
                format!("{hours}h")
            }
        } else if s > 0 {
            format!("{mins}m{s}s")
        } else {
            format!("{mins}m")
        }
    }
}

/// `v` (between 1 and 1000) with one decimal below 100 and none above,
/// without a trailing `.0`.
fn short_decimal(v: f64) -> String {
    let text = if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    };
    match text.strip_suffix(".0") {
        Some(whole) => whole.to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples_from_the_brief() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("10µs"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration(" 0 "), Ok(Duration::ZERO));
        assert_eq!(parse_duration(".5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(
            parse_duration("1.5ns1ns"),
            Err(DurationError::new("1.5ns1ns", "finer than a nanosecond"))
        );
        assert_eq!(parse_duration("0.000000001s"), Ok(Duration::from_nanos(1)));
    }

    #[test]
    fn errors_name_the_problem() {
        for (input, problem) in [
            ("", "empty"),
            (
                "10",
                "missing unit after a number (ns, us, ms, s, m, h or d)",
            ),
            ("s", "expected a number"),
            ("1x", "unknown unit (use ns, us, ms, s, m, h or d)"),
            (
                "1e400s",
                "exponents (1e3) are not supported: write the number out (1000s)",
            ),
            ("1 s", "unknown unit (use ns, us, ms, s, m, h or d)"),
            ("-1s", "a duration cannot be negative (0 or more)"),
            ("1.2.3s", "a number has more than one '.'"),
            (".s", "expected digits around '.'"),
            ("1.5ns", "finer than a nanosecond"),
            ("99999999999999999999999d", "too large"),
            ("18446744073709551616s", "too large"),
        ] {
            let err = parse_duration(input).unwrap_err();
            assert_eq!(err.problem(), problem, "input {input:?}");
            assert!(err.to_string().contains("expected forms like"));
        }
        assert_eq!(
            parse_duration("18446744073709551615s"),
            Ok(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn short_format() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(850), "850ns"),
            (Duration::from_nanos(12_500), "12.5us"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_millis(1300), "1.3s"),
            (Duration::from_millis(1000), "1s"),
            (Duration::from_secs(125), "2m5s"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_secs(5400), "1h30m"),
            (Duration::from_secs(3 * 86_400 + 4 * 3600), "3d4h"),
        ] {
            assert_eq!(format_duration(d), text);
        }
    }

    fn any_duration() -> impl Strategy<Value = Duration> {
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n))
    }

    proptest! {
        #[test]
        fn never_panics(s in ".*") {
            let _ = parse_duration(&s);
        }

        #[test]
        fn never_panics_on_near_misses(s in "[0-9.µnumshd ]{0,40}") {
            let _ = parse_duration(&s);
        }

        #[test]
        fn exact_form_round_trips(d in any_duration()) {
            prop_assert_eq!(parse_duration(&format_duration_exact(d)), Ok(d));
        }

        #[test]
        fn short_form_parses_and_is_close(d in any_duration()) {
            let back = parse_duration(&format_duration(d)).expect("short form parses");
            let (a, b) = (d.as_secs_f64(), back.as_secs_f64());
            // Three significant digits below a minute; the nearest second,
            // minute or hour above it.
            prop_assert!((a - b).abs() <= a * 0.05 + 1.0, "{d:?} -> {back:?}");
        }

        #[test]
        fn integers_with_units(n in 0u64..1_000_000, unit in 0usize..UNITS.len()) {
            let (name, per) = UNITS[unit];
            let d = parse_duration(&format!("{n}{name}")).expect("parses");
            prop_assert_eq!(d.as_nanos(), u128::from(n) * per);
        }
    }
}
