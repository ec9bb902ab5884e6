//! The command line's parsers of outside input: durations, exit-code lists
//! and backoff specs (`steadfast_cli::fuzzing::cli_parsers`, also run by a
//! proptest on stable).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_cli::fuzzing::cli_parsers(data);
});
