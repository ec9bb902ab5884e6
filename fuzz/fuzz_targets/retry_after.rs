//! `Retry-After` values from a hostile server:
//! `steadfast_http::fuzzing::retry_after`, also replayed on stable from the
//! corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_http::fuzzing::retry_after(data);
});
