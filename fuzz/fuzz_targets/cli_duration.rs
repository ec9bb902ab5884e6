//! The duration parser of the command line (`--deadline`, `--attempt-timeout`,
//! `--kill-after`, durations inside specs):
//! `steadfast_cli::fuzzing::durations`, also replayed on stable from the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_cli::fuzzing::durations(data);
});
