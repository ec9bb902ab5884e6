//! The size parser of the command line (`--stdin-limit`):
//! `steadfast_cli::fuzzing::sizes`, also replayed on stable from the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_cli::fuzzing::sizes(data);
});
