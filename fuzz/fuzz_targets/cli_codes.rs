//! The exit-code list parser of the command line (`--retry-on`, `--stop-on`):
//! `steadfast_cli::fuzzing::exit_codes`, also replayed on stable from the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_cli::fuzzing::exit_codes(data);
});
