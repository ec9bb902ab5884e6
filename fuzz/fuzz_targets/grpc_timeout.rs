//! Fuzzes the `grpc-timeout` decoder: it must never panic, and what it
//! accepts must round-trip. The body is shared with the stable proptest in
//! `crates/steadfast/tests/deadline_decoders.rs`.
#![no_main]

#[allow(dead_code)] // each target uses one of the shared entry points
#[path = "../../crates/steadfast/tests/fuzz_entry/mod.rs"]
mod fuzz_entry;

libfuzzer_sys::fuzz_target!(|data: &[u8]| fuzz_entry::grpc_timeout(data));
