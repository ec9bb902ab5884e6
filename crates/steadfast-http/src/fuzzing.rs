//! The body of the HTTP crate's fuzz target (`fuzz/fuzz_targets/retry_after.rs`),
//! here so that the corpus replay (`tests/fuzz_corpus.rs`) runs the same
//! check on stable (cargo-fuzz needs nightly).
//!
//! ```
//! steadfast_http::fuzzing::retry_after(b"\x01Wed, 21 Oct 2015 07:28:00 GMT");
//! steadfast_http::fuzzing::retry_after(b"\x7f120");
//! ```

use std::time::{Duration, SystemTime};

use crate::RetryAfter;

/// `Retry-After` values from a hostile server: the first byte picks "now"
/// (1970, today-ish or far in the future), the rest is the header value.
/// The parser never panics, and a delay it returns is never zero (zero is
/// `Now`); read as a rate-limit reset, the same holds, and a delay is never
/// past [`MAX_RATE_LIMIT_RESET`](crate::MAX_RATE_LIMIT_RESET).
pub fn retry_after(data: &[u8]) {
    let Some((&first, value)) = data.split_first() else {
        return;
    };
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(first) * 40_000_000);
    match RetryAfter::parse(value, now) {
        RetryAfter::Delay(d) => assert!(!d.is_zero()),
        RetryAfter::Now | RetryAfter::Invalid => {}
    }
    // The same bytes as a rate-limit reset: never zero, never past the cap.
    match RetryAfter::parse_reset(value, now) {
        RetryAfter::Delay(d) => assert!(!d.is_zero() && d <= crate::MAX_RATE_LIMIT_RESET),
        RetryAfter::Now | RetryAfter::Invalid => {}
    }
}
