//! The parsers of `steadfast proxy`'s flags (rates, `--to`):
//! `steadfast_cli::fuzzing::proxy_flags`, also replayed on stable from the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_cli::fuzzing::proxy_flags(data);
});
