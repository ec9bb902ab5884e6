//! gRPC status codes, as service configs name them.

use std::fmt;
use std::str::FromStr;

/// A gRPC status code (the 17 of the gRPC specification).
///
/// Service configs name codes as integers or as their names in any case
/// (`14`, `"UNAVAILABLE"`, `"unavailable"` are one code).
///
/// ```
/// use steadfast_grpc::Code;
/// assert_eq!("unavailable".parse::<Code>(), Ok(Code::Unavailable));
/// assert_eq!(Code::from_i64(14), Some(Code::Unavailable));
/// assert_eq!(Code::DeadlineExceeded.to_string(), "DEADLINE_EXCEEDED");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Code {
    /// 0: not an error.
    Ok,
    /// 1: cancelled by the caller.
    Cancelled,
    /// 2: unknown error.
    Unknown,
    /// 3: the client sent an invalid argument.
    InvalidArgument,
    /// 4: the deadline passed.
    DeadlineExceeded,
    /// 5: not found.
    NotFound,
    /// 6: already exists.
    AlreadyExists,
    /// 7: permission denied.
    PermissionDenied,
    /// 8: a resource is exhausted (quota, overload).
    ResourceExhausted,
    /// 9: the system is not in a state the operation needs.
    FailedPrecondition,
    /// 10: aborted (a concurrency conflict).
    Aborted,
    /// 11: out of the valid range.
    OutOfRange,
    /// 12: not implemented.
    Unimplemented,
    /// 13: an internal error.
    Internal,
    /// 14: the service is unavailable (the typical transient failure).
    Unavailable,
    /// 15: data loss.
    DataLoss,
    /// 16: the caller is not authenticated.
    Unauthenticated,
}

const ALL: [(Code, &str); 17] = [
    (Code::Ok, "OK"),
    (Code::Cancelled, "CANCELLED"),
    (Code::Unknown, "UNKNOWN"),
    (Code::InvalidArgument, "INVALID_ARGUMENT"),
    (Code::DeadlineExceeded, "DEADLINE_EXCEEDED"),
    (Code::NotFound, "NOT_FOUND"),
    (Code::AlreadyExists, "ALREADY_EXISTS"),
    (Code::PermissionDenied, "PERMISSION_DENIED"),
    (Code::ResourceExhausted, "RESOURCE_EXHAUSTED"),
    (Code::FailedPrecondition, "FAILED_PRECONDITION"),
    (Code::Aborted, "ABORTED"),
    (Code::OutOfRange, "OUT_OF_RANGE"),
    (Code::Unimplemented, "UNIMPLEMENTED"),
    (Code::Internal, "INTERNAL"),
    (Code::Unavailable, "UNAVAILABLE"),
    (Code::DataLoss, "DATA_LOSS"),
    (Code::Unauthenticated, "UNAUTHENTICATED"),
];

impl Code {
    /// The code with this number (0 to 16).
    #[must_use]
    pub fn from_i64(n: i64) -> Option<Self> {
        usize::try_from(n)
            .ok()
            .and_then(|i| ALL.get(i))
            .map(|(c, _)| *c)
    }

    /// The code's number.
    ///
    /// ```
    /// assert_eq!(steadfast_grpc::Code::Unavailable.number(), 14);
    /// ```
    #[must_use]
    pub fn number(self) -> u8 {
        // The declaration order is the numbering (0..=16).
        self as u8
    }

    /// The code's name in the specification, e.g. `"UNAVAILABLE"`.
    #[must_use]
    pub fn name(self) -> &'static str {
        ALL[usize::from(self.number())].1
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not one of the 17 codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCode;

impl fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a gRPC status code name")
    }
}

impl std::error::Error for UnknownCode {}

impl FromStr for Code {
    type Err = UnknownCode;

    /// A code by its name, in any case.
    fn from_str(s: &str) -> Result<Self, UnknownCode> {
        ALL.iter()
            .find(|(_, name)| name.eq_ignore_ascii_case(s))
            .map(|(c, _)| *c)
            .ok_or(UnknownCode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_names_and_parsing_agree_for_every_code() {
        for (i, (code, name)) in ALL.iter().enumerate() {
            assert_eq!(usize::from(code.number()), i);
            assert_eq!(code.name(), *name);
            assert_eq!(Code::from_i64(i as i64), Some(*code));
            assert_eq!(name.parse::<Code>(), Ok(*code));
            assert_eq!(name.to_ascii_lowercase().parse::<Code>(), Ok(*code));
        }
        assert_eq!(Code::from_i64(17), None);
        assert_eq!(Code::from_i64(-1), None);
        assert_eq!("UNAVAILABLE ".parse::<Code>(), Err(UnknownCode));
    }
}
