//! The `grpc-timeout` header (gRPC over HTTP/2): encoding and decoding.
//!
//! On the wire a timeout is `TimeoutValue TimeoutUnit`: at most 8 ASCII
//! digits, then one of `H` (hours), `M` (minutes), `S` (seconds),
//! `m` (milliseconds), `u` (microseconds), `n` (nanoseconds).
//!
//! **Encoding** picks the smallest unit whose value, rounded up, fits in 8
//! digits, so the receiver never sees less time than the sender had and sees
//! at most one unit more. Durations beyond `99999999H` (about 11 400 years)
//! are clamped to it.
//!
//! **Zero** (a deadline that has already passed) encodes as `0n`. The
//! protocol's grammar (`{1..8}Digit`) admits it, and it decodes to zero time
//! left: a receiving deadline of "now", already expired. (`1n` would decode to
//! a deadline one nanosecond in the future, which a receiver on a coarse or
//! virtual clock may not see as expired.) A caller should not send a request
//! whose deadline has passed at all; `0n` is what goes out if it does.
//!
//! **Decoding** is strict: no sign, no spaces, no decimal point, 1 to 8 digits
//! (leading zeros allowed, as the grammar allows them) and a unit; anything
//! else is a [`TimeoutParseError`]. It never panics, on any bytes.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::deadline::GrpcTimeout;
//!
//! assert_eq!(GrpcTimeout::from_duration(Duration::from_millis(100)).to_string(), "100000u");
//! assert_eq!(GrpcTimeout::parse(b"1S").unwrap().to_duration(), Duration::from_secs(1));
//! assert!(GrpcTimeout::parse(b"1X").is_err());
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::header::HeaderText;
use super::parse_error::{TimeoutParseError, TimeoutParseErrorKind, parse_digits};

/// The largest `TimeoutValue`: 8 digits.
pub const MAX_TIMEOUT_VALUE: u32 = 99_999_999;

/// The unit of a `grpc-timeout` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimeoutUnit {
    /// `n`
    Nanoseconds,
    /// `u`
    Microseconds,
    /// `m`
    Milliseconds,
    /// `S`
    Seconds,
    /// `M`
    Minutes,
    /// `H`
    Hours,
}

impl TimeoutUnit {
    /// Every unit, smallest first (the order in which encoding tries them).
    pub const ALL: [Self; 6] = [
        Self::Nanoseconds,
        Self::Microseconds,
        Self::Milliseconds,
        Self::Seconds,
        Self::Minutes,
        Self::Hours,
    ];

    /// The unit's byte on the wire.
    ///
    /// ```
    /// use steadfast::deadline::TimeoutUnit;
    /// assert_eq!(TimeoutUnit::Minutes.symbol(), b'M');
    /// assert_eq!(TimeoutUnit::Milliseconds.symbol(), b'm');
    /// ```
    #[must_use]
    pub const fn symbol(self) -> u8 {
        match self {
            Self::Nanoseconds => b'n',
            Self::Microseconds => b'u',
            Self::Milliseconds => b'm',
            Self::Seconds => b'S',
            Self::Minutes => b'M',
            Self::Hours => b'H',
        }
    }

    /// The unit for a byte on the wire (case-sensitive: `M` is minutes, `m`
    /// milliseconds).
    ///
    /// ```
    /// use steadfast::deadline::TimeoutUnit;
    /// assert_eq!(TimeoutUnit::from_symbol(b'H'), Some(TimeoutUnit::Hours));
    /// assert_eq!(TimeoutUnit::from_symbol(b'h'), None);
    /// ```
    #[must_use]
    pub const fn from_symbol(symbol: u8) -> Option<Self> {
        match symbol {
            b'n' => Some(Self::Nanoseconds),
            b'u' => Some(Self::Microseconds),
            b'm' => Some(Self::Milliseconds),
            b'S' => Some(Self::Seconds),
            b'M' => Some(Self::Minutes),
            b'H' => Some(Self::Hours),
            _ => None,
        }
    }

    /// Nanoseconds in one of this unit.
    ///
    /// ```
    /// use steadfast::deadline::TimeoutUnit;
    /// assert_eq!(TimeoutUnit::Minutes.nanos(), 60_000_000_000);
    /// ```
    #[must_use]
    pub const fn nanos(self) -> u64 {
        match self {
            Self::Nanoseconds => 1,
            Self::Microseconds => 1_000,
            Self::Milliseconds => 1_000_000,
            Self::Seconds => 1_000_000_000,
            Self::Minutes => 60_000_000_000,
            Self::Hours => 3_600_000_000_000,
        }
    }
}

/// A `grpc-timeout` value: at most 8 digits and a unit.
///
/// ```
/// use std::time::Duration;
/// use steadfast::deadline::{GrpcTimeout, TimeoutUnit};
///
/// let t: GrpcTimeout = "250m".parse().unwrap();
/// assert_eq!((t.value(), t.unit()), (250, TimeoutUnit::Milliseconds));
/// assert_eq!(t.to_duration(), Duration::from_millis(250));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrpcTimeout {
    value: u32,
    unit: TimeoutUnit,
}

impl GrpcTimeout {
    /// The longest timeout the header can carry: `99999999H`.
    pub const MAX: Self = Self {
        value: MAX_TIMEOUT_VALUE,
        unit: TimeoutUnit::Hours,
    };

    /// Zero time left: `0n`, what an expired deadline encodes as.
    pub const EXPIRED: Self = Self {
        value: 0,
        unit: TimeoutUnit::Nanoseconds,
    };

    /// `value` of `unit`; `None` when `value` has more than 8 digits.
    ///
    /// ```
    /// use steadfast::deadline::{GrpcTimeout, TimeoutUnit};
    /// assert!(GrpcTimeout::new(99_999_999, TimeoutUnit::Seconds).is_some());
    /// assert!(GrpcTimeout::new(100_000_000, TimeoutUnit::Seconds).is_none());
    /// ```
    #[must_use]
    pub const fn new(value: u32, unit: TimeoutUnit) -> Option<Self> {
        if value <= MAX_TIMEOUT_VALUE {
            Some(Self { value, unit })
        } else {
            None
        }
    }

    /// The encoding of `duration`: the smallest unit whose value, rounded
    /// up, fits in 8 digits; clamped to [`MAX`](Self::MAX); zero is
    /// [`EXPIRED`](Self::EXPIRED) (`0n`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::deadline::GrpcTimeout;
    ///
    /// let enc = |ns| GrpcTimeout::from_duration(Duration::from_nanos(ns)).to_string();
    /// assert_eq!(enc(99_999_999), "99999999n");
    /// assert_eq!(enc(100_000_000), "100000u");
    /// assert_eq!(enc(100_000_001), "100001u"); // rounded up, never down
    /// assert_eq!(enc(0), "0n");
    /// ```
    #[must_use]
    pub fn from_duration(duration: Duration) -> Self {
        let nanos = duration.as_nanos();
        for unit in TimeoutUnit::ALL {
            let value = nanos.div_ceil(u128::from(unit.nanos()));
            if value <= u128::from(MAX_TIMEOUT_VALUE) {
                // Fits in 8 digits, so in a u32.
                let value = u32::try_from(value).unwrap_or(MAX_TIMEOUT_VALUE);
                return Self { value, unit };
            }
        }
        Self::MAX
    }

    /// The duration this value stands for (exact: no rounding).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::deadline::GrpcTimeout;
    /// assert_eq!(GrpcTimeout::MAX.to_duration(), Duration::from_secs(99_999_999 * 3600));
    /// ```
    #[must_use]
    pub const fn to_duration(self) -> Duration {
        let value = self.value as u64;
        match self.unit {
            TimeoutUnit::Nanoseconds => Duration::from_nanos(value),
            TimeoutUnit::Microseconds => Duration::from_micros(value),
            TimeoutUnit::Milliseconds => Duration::from_millis(value),
            TimeoutUnit::Seconds => Duration::from_secs(value),
            TimeoutUnit::Minutes => Duration::from_secs(value * 60),
            TimeoutUnit::Hours => Duration::from_secs(value * 3600),
        }
    }

    /// The number before the unit.
    #[must_use]
    pub const fn value(self) -> u32 {
        self.value
    }

    /// The unit.
    #[must_use]
    pub const fn unit(self) -> TimeoutUnit {
        self.unit
    }

    /// Decodes a header value. Never panics; rejects anything but 1 to 8
    /// ASCII digits followed by one of `H M S m u n`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::deadline::{GrpcTimeout, TimeoutParseErrorKind};
    ///
    /// assert_eq!(GrpcTimeout::parse(b"100m").unwrap().to_duration(), Duration::from_millis(100));
    /// for (bad, kind) in [
    ///     (&b""[..], TimeoutParseErrorKind::Empty),
    ///     (b"1", TimeoutParseErrorKind::MissingUnit),
    ///     (b"123456789S", TimeoutParseErrorKind::TooManyDigits),
    ///     (b"-1S", TimeoutParseErrorKind::InvalidDigit),
    ///     (b"1X", TimeoutParseErrorKind::InvalidUnit),
    ///     (b"S", TimeoutParseErrorKind::NoDigits),
    /// ] {
    ///     assert_eq!(GrpcTimeout::parse(bad).unwrap_err().kind(), kind);
    /// }
    /// ```
    pub fn parse(value: &[u8]) -> Result<Self, TimeoutParseError> {
        let Some((&last, digits)) = value.split_last() else {
            return Err(TimeoutParseError::new(TimeoutParseErrorKind::Empty));
        };
        let Some(unit) = TimeoutUnit::from_symbol(last) else {
            let kind = if last.is_ascii_digit() {
                TimeoutParseErrorKind::MissingUnit
            } else {
                TimeoutParseErrorKind::InvalidUnit
            };
            return Err(TimeoutParseError::new(kind));
        };
        let value = parse_digits(digits, 8)?;
        // 8 digits always fit a u32; the fallback is unreachable.
        let value = u32::try_from(value)
            .map_err(|_| TimeoutParseError::new(TimeoutParseErrorKind::TooManyDigits))?;
        Ok(Self { value, unit })
    }

    /// The value as header text, without allocating.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::deadline::GrpcTimeout;
    /// let t = GrpcTimeout::from_duration(Duration::from_secs(23));
    /// assert_eq!(t.to_text().as_str(), "23000000u");
    /// ```
    #[must_use]
    pub fn to_text(self) -> HeaderText {
        let mut text = HeaderText::from_u64(u64::from(self.value));
        text.push(self.unit.symbol());
        text
    }
}

impl fmt::Display for GrpcTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_text().as_str())
    }
}

impl FromStr for GrpcTimeout {
    type Err = TimeoutParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn enc(d: Duration) -> String {
        GrpcTimeout::from_duration(d).to_string()
    }

    fn dec(s: &str) -> Result<Duration, TimeoutParseErrorKind> {
        GrpcTimeout::parse(s.as_bytes())
            .map(GrpcTimeout::to_duration)
            .map_err(|e| e.kind())
    }

    #[test]
    fn known_answers_decode() {
        assert_eq!(dec("1S"), Ok(Duration::from_secs(1)));
        assert_eq!(dec("100m"), Ok(Duration::from_millis(100)));
        assert_eq!(dec("99999999n"), Ok(Duration::from_nanos(99_999_999)));
        assert_eq!(dec("5u"), Ok(Duration::from_micros(5)));
        assert_eq!(dec("2M"), Ok(Duration::from_secs(120)));
        assert_eq!(dec("3H"), Ok(Duration::from_secs(3 * 3600)));
        assert_eq!(dec("00000001S"), Ok(Duration::from_secs(1)));
        assert_eq!(dec("0n"), Ok(Duration::ZERO));
        assert_eq!(dec("99999999H"), Ok(Duration::from_secs(99_999_999 * 3600)));
    }

    #[test]
    fn known_answers_encode() {
        assert_eq!(enc(Duration::from_nanos(1)), "1n");
        assert_eq!(enc(Duration::from_nanos(99_999_999)), "99999999n");
        assert_eq!(enc(Duration::from_nanos(100_000_000)), "100000u");
        assert_eq!(enc(Duration::from_nanos(100_000_001)), "100001u");
        assert_eq!(enc(Duration::from_secs(1)), "1000000u");
        assert_eq!(enc(Duration::from_micros(99_999_999)), "99999999u");
        assert_eq!(
            enc(Duration::from_micros(99_999_999) + Duration::from_nanos(1)),
            "100000m"
        );
        assert_eq!(enc(Duration::from_secs(100_000)), "100000S");
        assert_eq!(enc(Duration::from_secs(99_999_999)), "99999999S");
        assert_eq!(enc(Duration::from_secs(100_000_000)), "1666667M");
        assert_eq!(enc(Duration::from_secs(99_999_999 * 60)), "99999999M");
        assert_eq!(enc(Duration::from_secs(99_999_999 * 60 + 1)), "1666667H");
        assert_eq!(enc(Duration::from_secs(99_999_999 * 3600)), "99999999H");
        assert_eq!(enc(Duration::MAX), "99999999H");
    }

    #[test]
    fn expired_encodes_as_zero_and_decodes_as_expired() {
        assert_eq!(enc(Duration::ZERO), "0n");
        assert_eq!(
            GrpcTimeout::from_duration(Duration::ZERO),
            GrpcTimeout::EXPIRED
        );
        assert_eq!(dec("0n"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_bad_values() {
        use TimeoutParseErrorKind::*;
        assert_eq!(dec(""), Err(Empty));
        assert_eq!(dec("1"), Err(MissingUnit));
        assert_eq!(dec("123456789S"), Err(TooManyDigits));
        assert_eq!(dec("-1S"), Err(InvalidDigit));
        assert_eq!(dec("+1S"), Err(InvalidDigit));
        assert_eq!(dec("1X"), Err(InvalidUnit));
        assert_eq!(dec("1s"), Err(InvalidUnit));
        assert_eq!(dec("1h"), Err(InvalidUnit));
        assert_eq!(dec("S"), Err(NoDigits));
        assert_eq!(dec(" 1S"), Err(InvalidDigit));
        assert_eq!(dec("1S "), Err(InvalidUnit));
        assert_eq!(dec("1.5S"), Err(InvalidDigit));
        assert_eq!(dec("1SS"), Err(InvalidDigit));
        assert_eq!(dec("١S"), Err(InvalidDigit));
    }

    proptest! {
        #[test]
        fn round_trip_never_shortens_and_is_within_one_unit(
            bits in any::<u64>(),
            shift in 0u32..64,
            sub in 0u32..1_000_000_000,
        ) {
            // Log-uniform seconds, so every unit is exercised.
            let d = Duration::new(bits >> shift, sub).min(GrpcTimeout::MAX.to_duration());
            let t = GrpcTimeout::from_duration(d);
            prop_assert!(t.value() <= MAX_TIMEOUT_VALUE);
            let text = t.to_string();
            let back = GrpcTimeout::parse(text.as_bytes()).unwrap();
            prop_assert_eq!(back, t);
            let back = back.to_duration();
            prop_assert!(back >= d, "{} decoded to {:?} < {:?}", text, back, d);
            prop_assert!(back - d < Duration::from_nanos(t.unit().nanos()));
            // The smallest unit that fits: the one below would need 9 digits.
            if let Some(i) = TimeoutUnit::ALL.iter().position(|&u| u == t.unit()).filter(|&i| i > 0) {
                let below = TimeoutUnit::ALL[i - 1];
                prop_assert!(d.as_nanos().div_ceil(u128::from(below.nanos())) > u128::from(MAX_TIMEOUT_VALUE));
            }
        }

        #[test]
        fn small_durations_round_trip(nanos in 0u64..1_000_000_000_000) {
            let d = Duration::from_nanos(nanos);
            let back = GrpcTimeout::parse(enc(d).as_bytes()).unwrap().to_duration();
            prop_assert!(back >= d);
            prop_assert!(back - d < Duration::from_nanos(GrpcTimeout::from_duration(d).unit().nanos()));
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            if let Ok(t) = GrpcTimeout::parse(&bytes) {
                // What parses re-encodes to a value of the same meaning.
                prop_assert!(t.to_duration() <= GrpcTimeout::MAX.to_duration());
                prop_assert_eq!(GrpcTimeout::parse(t.to_string().as_bytes()), Ok(t));
            }
        }

        #[test]
        fn decoding_arbitrary_strings_never_panics(s in "\\PC{0,12}") {
            let _ = GrpcTimeout::parse(s.as_bytes());
        }

        #[test]
        fn decoding_near_valid_strings(s in "[-+ 0-9]{0,10}[HMSmunXs ]?") {
            if let Ok(t) = s.parse::<GrpcTimeout>() {
                prop_assert!(s.len() >= 2 && s.len() <= 9);
                prop_assert!(s.as_bytes()[..s.len() - 1].iter().all(u8::is_ascii_digit));
                prop_assert_eq!(t.unit().symbol(), s.as_bytes()[s.len() - 1]);
            }
        }
    }
}
