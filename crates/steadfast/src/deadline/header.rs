//! A configurable HTTP header that carries the time left, so plain HTTP
//! services propagate deadlines the way gRPC does.
//!
//! **Default: `x-steadfast-timeout`, in the `grpc-timeout` format** (for
//! example `x-steadfast-timeout: 2500000u`). Why:
//! - a header of our own name, because `grpc-timeout` on a plain HTTP request
//!   could be acted on by gRPC-aware proxies (or stripped by them), and
//!   `x-` plus the project name is unlikely to collide with anything;
//! - the `grpc-timeout` format, because it is already specified exactly,
//!   bounded (9 bytes at most), carries units from nanoseconds to hours
//!   without loss where it matters, and shares one tested and fuzzed codec
//!   with the gRPC side.
//!
//! Services that already speak another convention choose their own name and
//! a [`HeaderFormat`], for example whole milliseconds.
//!
//! The header carries a *relative* timeout, never an absolute time: clocks of
//! two machines disagree, the time left does not need them to agree.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::Deadline;
//! use steadfast::clock::{Clock, VirtualClock};
//! use steadfast::deadline::{DeadlineHeader, HeaderFormat};
//!
//! let clock = VirtualClock::new();
//! let header = DeadlineHeader::default();
//! let deadline = Deadline::after(clock.now(), Duration::from_millis(1500));
//! let value = header.encode_deadline(deadline, clock.now());
//! assert_eq!((header.name(), value.as_str()), ("x-steadfast-timeout", "1500000u"));
//!
//! // The receiving side: its own clock, the same time left.
//! let received = header.decode_deadline(value.as_bytes(), clock.now()).unwrap();
//! assert_eq!(received.remaining(clock.now()), Duration::from_millis(1500));
//!
//! let custom = DeadlineHeader::new("X-Request-Timeout-Ms", HeaderFormat::Milliseconds).unwrap();
//! assert_eq!(custom.name(), "x-request-timeout-ms");
//! assert_eq!(custom.encode(Duration::from_micros(1500)).as_str(), "2"); // rounded up
//! ```

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, Instant};

use super::Deadline;
use super::grpc_timeout::GrpcTimeout;
use super::parse_error::{TimeoutParseError, TimeoutParseErrorKind, parse_digits};
use crate::config_error::ConfigError;

/// The default header name: `x-steadfast-timeout`.
pub const DEFAULT_HEADER_NAME: &str = "x-steadfast-timeout";

/// The most digits [`HeaderFormat::Milliseconds`] writes or accepts
/// (about 31.7 million years).
pub const MAX_MILLIS_DIGITS: usize = 18;

const MAX_MILLIS: u64 = 999_999_999_999_999_999;

/// How a header writes the time left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum HeaderFormat {
    /// The `grpc-timeout` format: at most 8 digits and a unit of
    /// `H M S m u n`, see [`GrpcTimeout`].
    #[default]
    GrpcTimeout,
    /// Whole milliseconds as a decimal number (at most 18 digits), rounded
    /// up; `0` means expired.
    Milliseconds,
}

impl HeaderFormat {
    /// Writes `remaining` in this format (rounded up, clamped to the
    /// format's maximum).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::deadline::HeaderFormat;
    /// assert_eq!(HeaderFormat::GrpcTimeout.encode(Duration::from_secs(2)).as_str(), "2000000u");
    /// assert_eq!(HeaderFormat::Milliseconds.encode(Duration::from_secs(2)).as_str(), "2000");
    /// ```
    #[must_use]
    pub fn encode(self, remaining: Duration) -> HeaderText {
        match self {
            Self::GrpcTimeout => GrpcTimeout::from_duration(remaining).to_text(),
            Self::Milliseconds => {
                let millis = remaining.as_nanos().div_ceil(1_000_000);
                let millis = u64::try_from(millis).unwrap_or(MAX_MILLIS).min(MAX_MILLIS);
                HeaderText::from_u64(millis)
            }
        }
    }

    /// Reads a header value in this format. Never panics, on any bytes.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::deadline::HeaderFormat;
    /// assert_eq!(HeaderFormat::Milliseconds.decode(b"250"), Ok(Duration::from_millis(250)));
    /// assert!(HeaderFormat::Milliseconds.decode(b"250ms").is_err());
    /// assert_eq!(HeaderFormat::GrpcTimeout.decode(b"250m"), Ok(Duration::from_millis(250)));
    /// ```
    pub fn decode(self, value: &[u8]) -> Result<Duration, TimeoutParseError> {
        match self {
            Self::GrpcTimeout => GrpcTimeout::parse(value).map(GrpcTimeout::to_duration),
            Self::Milliseconds => {
                if value.is_empty() {
                    return Err(TimeoutParseError::new(TimeoutParseErrorKind::Empty));
                }
                parse_digits(value, MAX_MILLIS_DIGITS).map(Duration::from_millis)
            }
        }
    }
}

/// Which header carries the time left, and in which format.
///
/// Cheap to clone; build it once and share it.
///
/// ```
/// use steadfast::deadline::{DeadlineHeader, HeaderFormat};
///
/// assert_eq!(DeadlineHeader::default().name(), "x-steadfast-timeout");
/// assert_eq!(DeadlineHeader::GRPC.name(), "grpc-timeout");
/// assert!(DeadlineHeader::new("bad header", HeaderFormat::GrpcTimeout).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeadlineHeader {
    name: Cow<'static, str>,
    format: HeaderFormat,
}

impl Default for DeadlineHeader {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl DeadlineHeader {
    /// `x-steadfast-timeout` in the `grpc-timeout` format.
    pub const DEFAULT: Self = Self {
        name: Cow::Borrowed(DEFAULT_HEADER_NAME),
        format: HeaderFormat::GrpcTimeout,
    };

    /// gRPC's own header: `grpc-timeout` in its format.
    pub const GRPC: Self = Self {
        name: Cow::Borrowed("grpc-timeout"),
        format: HeaderFormat::GrpcTimeout,
    };

    /// A header called `name` (an HTTP token; stored in lower case, as
    /// HTTP/2 requires) written in `format`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when `name` is empty or holds a byte that is not
    /// allowed in an HTTP field name.
    ///
    /// ```
    /// use steadfast::deadline::{DeadlineHeader, HeaderFormat};
    /// let h = DeadlineHeader::new("X-Timeout-Ms", HeaderFormat::Milliseconds)?;
    /// assert_eq!((h.name(), h.format()), ("x-timeout-ms", HeaderFormat::Milliseconds));
    /// let err = DeadlineHeader::new("", HeaderFormat::Milliseconds).unwrap_err();
    /// assert_eq!(err.field(), "name");
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        format: HeaderFormat,
    ) -> Result<Self, ConfigError> {
        let name = name.into();
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(ConfigError::new(
                "deadline header",
                "name",
                "must be a non-empty HTTP token (letters, digits and !#$%&'*+-.^_`|~)",
                name,
            ));
        }
        let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(name.to_ascii_lowercase())
        } else {
            name
        };
        Ok(Self { name, format })
    }

    /// The header name, in lower case.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The format of the value.
    #[must_use]
    pub fn format(&self) -> HeaderFormat {
        self.format
    }

    /// The header value for `remaining` time left.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::deadline::DeadlineHeader;
    /// assert_eq!(DeadlineHeader::default().encode(Duration::from_secs(19)).as_str(), "19000000u");
    /// assert_eq!(DeadlineHeader::default().encode(Duration::ZERO).as_str(), "0n");
    /// ```
    #[must_use]
    pub fn encode(&self, remaining: Duration) -> HeaderText {
        self.format.encode(remaining)
    }

    /// The header value for the time left until `deadline` at `now`
    /// (zero, meaning expired, once it has passed).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::Deadline;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::deadline::DeadlineHeader;
    ///
    /// let clock = VirtualClock::new();
    /// let d = Deadline::after(clock.now(), Duration::from_millis(5));
    /// assert_eq!(DeadlineHeader::GRPC.encode_deadline(d, clock.now()).as_str(), "5000000n");
    /// ```
    #[must_use]
    pub fn encode_deadline(&self, deadline: Deadline, now: Instant) -> HeaderText {
        self.encode(deadline.remaining(now))
    }

    /// Reads the time left from a header value. Never panics, on any bytes.
    ///
    /// # Errors
    ///
    /// A [`TimeoutParseError`] when the value does not follow the format.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::deadline::DeadlineHeader;
    /// assert_eq!(DeadlineHeader::default().decode(b"3S"), Ok(Duration::from_secs(3)));
    /// assert!(DeadlineHeader::default().decode(b"3 S").is_err());
    /// ```
    pub fn decode(&self, value: &[u8]) -> Result<Duration, TimeoutParseError> {
        self.format.decode(value)
    }

    /// Reads a header value received at `now` into a deadline on the local
    /// clock (a value of zero gives a deadline that has already expired).
    ///
    /// # Errors
    ///
    /// A [`TimeoutParseError`] when the value does not follow the format.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::deadline::DeadlineHeader;
    ///
    /// let clock = VirtualClock::new();
    /// let d = DeadlineHeader::default().decode_deadline(b"0n", clock.now())?;
    /// assert!(d.is_expired(clock.now()));
    /// # Ok::<(), steadfast::deadline::TimeoutParseError>(())
    /// ```
    pub fn decode_deadline(
        &self,
        value: &[u8],
        now: Instant,
    ) -> Result<Deadline, TimeoutParseError> {
        self.decode(value).map(|left| Deadline::after(now, left))
    }
}

/// A tchar of RFC 9110 (section 5.6.2).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A short header value on the stack: what the encoders return, so encoding
/// a deadline on every call allocates nothing.
///
/// ```
/// use std::time::Duration;
/// use steadfast::deadline::DeadlineHeader;
/// let text = DeadlineHeader::default().encode(Duration::from_millis(7));
/// assert_eq!(text.as_str(), "7000000n");
/// assert_eq!(text.as_bytes(), b"7000000n");
/// assert_eq!(text.to_string(), "7000000n");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct HeaderText {
    buf: [u8; 24],
    len: u8,
}

impl HeaderText {
    /// The decimal digits of `n`.
    pub(crate) fn from_u64(mut n: u64) -> Self {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            // `n % 10` is a single digit.
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut text = Self {
            buf: [0; 24],
            len: 0,
        };
        for &d in &digits[start..] {
            text.push(d);
        }
        text
    }

    /// Appends one ASCII byte (ignored if the buffer is full, which the
    /// encoders never reach: 20 digits and a unit at most).
    pub(crate) fn push(&mut self, byte: u8) {
        if let Some(slot) = self.buf.get_mut(usize::from(self.len)) {
            *slot = byte;
            self.len += 1;
        }
    }

    /// The value as text (always ASCII).
    #[must_use]
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    /// The value as bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

impl fmt::Display for HeaderText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for HeaderText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl AsRef<str> for HeaderText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for HeaderText {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::clock::{Clock, VirtualClock};

    #[test]
    fn header_names_are_validated_and_lowercased() {
        assert!(DeadlineHeader::new("x-a_b.c~1", HeaderFormat::Milliseconds).is_ok());
        for bad in ["", "a b", "a:b", "a\nb", "é", "a\"b", "(x)"] {
            let err = DeadlineHeader::new(bad, HeaderFormat::Milliseconds).unwrap_err();
            assert_eq!((err.component(), err.field()), ("deadline header", "name"));
        }
        let h = DeadlineHeader::new(String::from("X-Deadline"), HeaderFormat::GrpcTimeout).unwrap();
        assert_eq!(h.name(), "x-deadline");
    }

    #[test]
    fn milliseconds_format_known_answers() {
        let f = HeaderFormat::Milliseconds;
        assert_eq!(f.encode(Duration::ZERO).as_str(), "0");
        assert_eq!(f.encode(Duration::from_nanos(1)).as_str(), "1");
        assert_eq!(f.encode(Duration::from_millis(1)).as_str(), "1");
        assert_eq!(f.encode(Duration::from_micros(1001)).as_str(), "2");
        assert_eq!(f.encode(Duration::MAX).as_str(), "999999999999999999");
        assert_eq!(
            f.decode(b"999999999999999999"),
            Ok(Duration::from_millis(MAX_MILLIS))
        );
        assert_eq!(f.decode(b"0"), Ok(Duration::ZERO));
        use TimeoutParseErrorKind::*;
        let kind = |v: &[u8]| f.decode(v).unwrap_err().kind();
        assert_eq!(kind(b""), Empty);
        assert_eq!(kind(b"1000000000000000000"), TooManyDigits);
        assert_eq!(kind(b"-1"), InvalidDigit);
        assert_eq!(kind(b"1.5"), InvalidDigit);
        assert_eq!(kind(b"10ms"), InvalidDigit);
    }

    #[test]
    fn expired_deadline_round_trips_as_expired() {
        let clock = VirtualClock::new();
        let d = Deadline::after(clock.now(), Duration::from_millis(10));
        clock.sleep_blocking(Duration::from_millis(30));
        for header in [
            DeadlineHeader::DEFAULT,
            DeadlineHeader::GRPC,
            DeadlineHeader::new("x-ms", HeaderFormat::Milliseconds).unwrap(),
        ] {
            let value = header.encode_deadline(d, clock.now());
            let received = header
                .decode_deadline(value.as_bytes(), clock.now())
                .unwrap();
            assert!(received.is_expired(clock.now()), "{value}");
        }
    }

    #[test]
    fn header_text_of_u64_extremes() {
        assert_eq!(HeaderText::from_u64(0).as_str(), "0");
        assert_eq!(
            HeaderText::from_u64(u64::MAX).as_str(),
            u64::MAX.to_string()
        );
    }

    proptest! {
        #[test]
        fn millis_round_trip(nanos in any::<u64>()) {
            let d = Duration::from_nanos(nanos);
            let f = HeaderFormat::Milliseconds;
            let back = f.decode(f.encode(d).as_bytes()).unwrap();
            prop_assert!(back >= d);
            prop_assert!(back - d < Duration::from_millis(1));
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            for format in [HeaderFormat::GrpcTimeout, HeaderFormat::Milliseconds] {
                if let Ok(d) = format.decode(&bytes) {
                    let again = format.decode(format.encode(d).as_bytes());
                    prop_assert_eq!(again, Ok(d));
                }
            }
        }
    }
}
