//! The backoff spec parser of the command line (`--backoff`):
//! `steadfast_cli::fuzzing::backoff_specs`, also replayed on stable from the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_cli::fuzzing::backoff_specs(data);
});
