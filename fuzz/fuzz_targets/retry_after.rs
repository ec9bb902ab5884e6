//! `Retry-After` values from a hostile server: the parser never panics, and
//! a date is read against any wall-clock time.
#![no_main]

use std::time::{Duration, SystemTime};

use libfuzzer_sys::fuzz_target;
use steadfast_http::RetryAfter;

fuzz_target!(|data: &[u8]| {
    let Some((&first, value)) = data.split_first() else {
        return;
    };
    // The first byte picks "now": 1970, today-ish, or far in the future.
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::from(first) * 40_000_000);
    match RetryAfter::parse(value, now) {
        RetryAfter::Delay(d) => assert!(!d.is_zero()),
        RetryAfter::Now | RetryAfter::Invalid => {}
    }
});
