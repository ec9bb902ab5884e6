//! The error of every deadline header decoder.

use std::fmt;

/// A timeout header value could not be decoded.
///
/// Returned by [`GrpcTimeout::parse`](super::GrpcTimeout::parse) and
/// [`DeadlineHeader::decode`](super::DeadlineHeader::decode); it says what
/// was wrong, never echoes the (untrusted) input.
///
/// ```
/// use steadfast::deadline::{GrpcTimeout, TimeoutParseErrorKind};
///
/// let err = GrpcTimeout::parse(b"123456789S").unwrap_err();
/// assert_eq!(err.kind(), TimeoutParseErrorKind::TooManyDigits);
/// assert_eq!(err.to_string(), "invalid timeout header value: too many digits");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeoutParseError {
    kind: TimeoutParseErrorKind,
}

/// What was wrong with a timeout header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutParseErrorKind {
    /// The value was empty.
    Empty,
    /// No digits before the unit.
    NoDigits,
    /// More digits than the format allows (8 for `grpc-timeout`).
    TooManyDigits,
    /// A byte that is not an ASCII digit where a digit was expected
    /// (including signs, spaces and decimal points).
    InvalidDigit,
    /// The value ends in a digit, but the format needs a unit after it.
    MissingUnit,
    /// The value ends in a byte that is not one of the format's units.
    InvalidUnit,
}

impl TimeoutParseError {
    pub(crate) const fn new(kind: TimeoutParseErrorKind) -> Self {
        Self { kind }
    }

    /// What was wrong.
    #[must_use]
    pub const fn kind(&self) -> TimeoutParseErrorKind {
        self.kind
    }
}

impl fmt::Display for TimeoutParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            TimeoutParseErrorKind::Empty => "empty",
            TimeoutParseErrorKind::NoDigits => "no digits before the unit",
            TimeoutParseErrorKind::TooManyDigits => "too many digits",
            TimeoutParseErrorKind::InvalidDigit => "not an ASCII digit",
            TimeoutParseErrorKind::MissingUnit => "missing unit",
            TimeoutParseErrorKind::InvalidUnit => "unknown unit",
        };
        write!(f, "invalid timeout header value: {what}")
    }
}

impl std::error::Error for TimeoutParseError {}

/// Parses `digits` as a decimal number of at most `max_digits` digits (at
/// most 19, so the result fits a `u64`).
pub(crate) fn parse_digits(digits: &[u8], max_digits: usize) -> Result<u64, TimeoutParseError> {
    debug_assert!(max_digits <= 19);
    if digits.is_empty() {
        return Err(TimeoutParseError::new(TimeoutParseErrorKind::NoDigits));
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return Err(TimeoutParseError::new(TimeoutParseErrorKind::InvalidDigit));
        }
    }
    if digits.len() > max_digits {
        return Err(TimeoutParseError::new(TimeoutParseErrorKind::TooManyDigits));
    }
    for &b in digits {
        // At most 19 digits: cannot overflow a u64.
        value = value * 10 + u64::from(b - b'0');
    }
    Ok(value)
}
