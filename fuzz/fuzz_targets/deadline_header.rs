//! Fuzzes the configurable deadline header's decoders (every format) and its
//! name validation. The body is shared with the stable proptest in
//! `crates/steadfast/tests/deadline_decoders.rs`.
#![no_main]

#[allow(dead_code)] // each target uses one of the shared entry points
#[path = "../../crates/steadfast/tests/fuzz_entry/mod.rs"]
mod fuzz_entry;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_entry::deadline_header(data));
