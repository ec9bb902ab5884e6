//! `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date; and,
//! where a server sends none, the rate-limit reset headers
//! (`RateLimit-Reset`, `X-RateLimit-Reset`: seconds or a Unix time), read
//! as Envoy's `rate_limited_retry_back_off` reads them.
//!
//! The parser is total and linear: it never panics, never allocates and
//! reads each byte at most once, whatever the server sends (a year, a date
//! in 1970, garbage, a negative number, megabytes of digits). What it
//! returns is only a *hint*: the policy clamps it by `max_delay` and the
//! call's deadline before anything waits on it.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::RETRY_AFTER;

/// The longest text taken as a date: an IMF-fixdate is 29 bytes, the
/// obsolete RFC 850 and asctime forms are shorter than 40. Anything longer
/// is not a date, so it is never handed to the date parser.
const MAX_DATE_LEN: usize = 64;

/// What a `Retry-After` value asks for.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use steadfast_http::RetryAfter;
///
/// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// assert_eq!(RetryAfter::parse(b"120", now), RetryAfter::Delay(Duration::from_secs(120)));
/// assert_eq!(RetryAfter::parse(b"soon", now), RetryAfter::Invalid);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryAfter {
    /// Wait this long (a delta, or a date in the future); saturates at
    /// `u64::MAX` seconds for absurd values, which the policy then clamps.
    Delay(Duration),
    /// The value is a date that has already passed, or `0`: retry on the
    /// normal schedule.
    Now,
    /// Not a delta-seconds nor an HTTP-date (negative, garbage, too long):
    /// ignored.
    Invalid,
}

impl RetryAfter {
    /// Parses one header value, reading dates against `now` (the wall
    /// clock: HTTP-dates are civil time).
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use steadfast_http::RetryAfter;
    ///
    /// let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
    /// assert_eq!(
    ///     RetryAfter::parse(b"Sun, 06 Nov 1994 08:50:37 GMT", now),
    ///     RetryAfter::Delay(Duration::from_secs(60)),
    /// );
    /// assert_eq!(RetryAfter::parse(b"Thu, 01 Jan 1970 00:00:00 GMT", now), RetryAfter::Now);
    /// assert_eq!(RetryAfter::parse(b"-5", now), RetryAfter::Invalid);
    /// ```
    #[must_use]
    pub fn parse(value: &[u8], now: SystemTime) -> Self {
        let value = value.trim_ascii();
        if value.is_empty() {
            return Self::Invalid;
        }
        if value.iter().all(u8::is_ascii_digit) {
            return Self::from_seconds(saturating_seconds(value));
        }
        if value.len() > MAX_DATE_LEN {
            return Self::Invalid;
        }
        let Ok(text) = std::str::from_utf8(value) else {
            return Self::Invalid;
        };
        match httpdate::parse_http_date(text) {
            Ok(at) => match at.duration_since(now) {
                Ok(d) if !d.is_zero() => Self::Delay(d),
                _ => Self::Now,
            },
            Err(_) => Self::Invalid,
        }
    }

    /// The hint in a response's headers: the first `Retry-After` value, or
    /// `None` if there is none.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use http::HeaderMap;
    /// use steadfast_http::RetryAfter;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert("retry-after", "3".parse().unwrap());
    /// assert_eq!(
    ///     RetryAfter::from_headers(&headers, SystemTime::now()),
    ///     Some(RetryAfter::Delay(Duration::from_secs(3))),
    /// );
    /// ```
    #[must_use]
    pub fn from_headers(headers: &HeaderMap, now: SystemTime) -> Option<Self> {
        headers
            .get(RETRY_AFTER)
            .map(|v| Self::parse(v.as_bytes(), now))
    }

    /// Parses one rate-limit reset value (`RateLimit-Reset`,
    /// `X-RateLimit-Reset`): seconds from now, or, from 1 000 000 000 on
    /// (September 2001), a Unix time, read against `now`. As Envoy's
    /// `rate_limited_retry_back_off`, a reset further than [`MAX_RATE_LIMIT_RESET`]
    /// (300 s) away is ignored ([`Invalid`](Self::Invalid)): a window's
    /// reset that far off is no hint for a retry.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use steadfast_http::RetryAfter;
    /// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    /// assert_eq!(RetryAfter::parse_reset(b"12", now), RetryAfter::Delay(Duration::from_secs(12)));
    /// assert_eq!(RetryAfter::parse_reset(b"1700000030", now), RetryAfter::Delay(Duration::from_secs(30)));
    /// assert_eq!(RetryAfter::parse_reset(b"1699999990", now), RetryAfter::Now);
    /// assert_eq!(RetryAfter::parse_reset(b"3600", now), RetryAfter::Invalid);
    /// assert_eq!(RetryAfter::parse_reset(b"-1", now), RetryAfter::Invalid);
    /// ```
    #[must_use]
    pub fn parse_reset(value: &[u8], now: SystemTime) -> Self {
        let value = value.trim_ascii();
        if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
            return Self::Invalid;
        }
        let n = saturating_seconds(value);
        let seconds = if n >= UNIX_TIME_FROM {
            let now = now
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            n.saturating_sub(now)
        } else {
            n
        };
        if seconds > MAX_RATE_LIMIT_RESET.as_secs() {
            return Self::Invalid;
        }
        Self::from_seconds(seconds)
    }

    /// The rate-limit reset in a response's headers: the first of
    /// `RateLimit-Reset` and `X-RateLimit-Reset` present
    /// ([`parse_reset`](Self::parse_reset)), or `None`.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use http::HeaderMap;
    /// use steadfast_http::RetryAfter;
    /// let mut headers = HeaderMap::new();
    /// headers.insert("x-ratelimit-reset", "4".parse().unwrap());
    /// assert_eq!(
    ///     RetryAfter::from_reset_headers(&headers, SystemTime::now()),
    ///     Some(RetryAfter::Delay(Duration::from_secs(4))),
    /// );
    /// ```
    #[must_use]
    pub fn from_reset_headers(headers: &HeaderMap, now: SystemTime) -> Option<Self> {
        RESET_HEADERS
            .iter()
            .find_map(|name| headers.get(*name))
            .map(|v| Self::parse_reset(v.as_bytes(), now))
    }

    /// The delay asked for, if any.
    #[must_use]
    pub fn delay(self) -> Option<Duration> {
        match self {
            Self::Delay(d) => Some(d),
            Self::Now | Self::Invalid => None,
        }
    }

    fn from_seconds(seconds: u64) -> Self {
        if seconds == 0 {
            Self::Now
        } else {
            Self::Delay(Duration::from_secs(seconds))
        }
    }
}

/// The furthest rate-limit reset taken as a hint (Envoy's
/// `rate_limited_retry_back_off` ignores one past its `max_interval`,
/// 300 s by default).
pub const MAX_RATE_LIMIT_RESET: Duration = Duration::from_secs(300);

/// A reset value from here on is a Unix time (September 2001), below it
/// seconds from now.
const UNIX_TIME_FROM: u64 = 1_000_000_000;

/// The reset headers read, in order.
const RESET_HEADERS: [&str; 2] = ["ratelimit-reset", "x-ratelimit-reset"];

/// The decimal value of ASCII digits, saturating at `u64::MAX`.
fn saturating_seconds(digits: &[u8]) -> u64 {
    let mut n: u64 = 0;
    for d in digits {
        n = n.saturating_mul(10).saturating_add(u64::from(d - b'0'));
        if n == u64::MAX {
            break;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn epoch(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn delta_seconds() {
        assert_eq!(
            RetryAfter::parse(b" 7 ", epoch(0)),
            RetryAfter::Delay(Duration::from_secs(7))
        );
        assert_eq!(RetryAfter::parse(b"0", epoch(0)), RetryAfter::Now);
        assert_eq!(RetryAfter::parse(b"", epoch(0)), RetryAfter::Invalid);
        assert_eq!(RetryAfter::parse(b"1.5", epoch(0)), RetryAfter::Invalid);
        assert_eq!(RetryAfter::parse(b"+3", epoch(0)), RetryAfter::Invalid);
    }

    #[test]
    fn one_year_and_huge_values_saturate_without_panicking() {
        let year = 365 * 24 * 3600;
        assert_eq!(
            RetryAfter::parse(year.to_string().as_bytes(), epoch(0)),
            RetryAfter::Delay(Duration::from_secs(year))
        );
        let ten_mb = vec![b'9'; 10 * 1024 * 1024];
        assert_eq!(
            RetryAfter::parse(&ten_mb, epoch(0)),
            RetryAfter::Delay(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn dates_in_all_three_formats() {
        let now = epoch(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        for text in [
            "Sun, 06 Nov 1994 08:49:47 GMT",
            "Sunday, 06-Nov-94 08:49:47 GMT",
            "Sun Nov  6 08:49:47 1994",
        ] {
            assert_eq!(
                RetryAfter::parse(text.as_bytes(), now),
                RetryAfter::Delay(Duration::from_secs(10)),
                "{text}"
            );
        }
        assert_eq!(
            RetryAfter::parse(b"Sun, 06 Nov 1994 08:49:37 GMT", now),
            RetryAfter::Now
        );
    }

    proptest! {
        #[test]
        fn a_reset_is_never_past_its_cap(bytes in proptest::collection::vec(any::<u8>(), 0..40), now in 0_u64..4_000_000_000) {
            match RetryAfter::parse_reset(&bytes, epoch(now)) {
                RetryAfter::Delay(d) => prop_assert!(!d.is_zero() && d <= MAX_RATE_LIMIT_RESET),
                RetryAfter::Now | RetryAfter::Invalid => {}
            }
        }

        #[test]
        fn resets_as_seconds_or_unix_times(now in 1_000_000_000_u64..4_000_000_000, ahead in 1_u64..=300) {
            let seconds = ahead.to_string();
            prop_assert_eq!(RetryAfter::parse_reset(seconds.as_bytes(), epoch(now)), RetryAfter::Delay(Duration::from_secs(ahead)));
            let unix = (now + ahead).to_string();
            prop_assert_eq!(RetryAfter::parse_reset(unix.as_bytes(), epoch(now)), RetryAfter::Delay(Duration::from_secs(ahead)));
            let far = (now + 301).to_string();
            prop_assert_eq!(RetryAfter::parse_reset(far.as_bytes(), epoch(now)), RetryAfter::Invalid);
        }

        #[test]
        fn any_bytes_parse_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = RetryAfter::parse(&bytes, SystemTime::now());
        }

        #[test]
        fn any_delta_round_trips(n in 1_u64..u64::MAX) {
            prop_assert_eq!(
                RetryAfter::parse(n.to_string().as_bytes(), epoch(0)),
                RetryAfter::Delay(Duration::from_secs(n))
            );
        }

        #[test]
        fn long_digit_runs_saturate(extra in 21_usize..2_000) {
            let digits = vec![b'1'; extra];
            prop_assert_eq!(
                RetryAfter::parse(&digits, epoch(0)),
                RetryAfter::Delay(Duration::from_secs(u64::MAX))
            );
        }

        #[test]
        fn negative_numbers_are_invalid(n in 1_u64..u64::MAX) {
            prop_assert_eq!(RetryAfter::parse(format!("-{n}").as_bytes(), epoch(0)), RetryAfter::Invalid);
        }

        #[test]
        fn dates_give_the_time_until_them(now in 0_u64..4_000_000_000, ahead in 0_u64..100_000_000) {
            let at = httpdate::fmt_http_date(epoch(now + ahead));
            let expected = if ahead == 0 { RetryAfter::Now } else { RetryAfter::Delay(Duration::from_secs(ahead)) };
            prop_assert_eq!(RetryAfter::parse(at.as_bytes(), epoch(now)), expected);
        }

        #[test]
        fn past_dates_mean_now(now in 1_u64..4_000_000_000, back in 1_u64..1_000_000) {
            let at = httpdate::fmt_http_date(epoch(now.saturating_sub(back)));
            prop_assert_eq!(RetryAfter::parse(at.as_bytes(), epoch(now)), RetryAfter::Now);
        }
    }
}
