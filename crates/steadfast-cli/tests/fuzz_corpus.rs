//! Replays the fuzz corpus of the command line's parsers (`fuzz/corpus/`,
//! grown by `fuzz/run.sh` on nightly) through the same checks, on stable.

use steadfast_cli::fuzzing;

use steadfast_corpus::replay;

#[test]
fn cli_duration() {
    replay("cli_duration", fuzzing::durations);
}

#[test]
fn cli_codes() {
    replay("cli_codes", fuzzing::exit_codes);
}

#[test]
fn cli_spec() {
    replay("cli_spec", fuzzing::backoff_specs);
}

#[test]
fn cli_size() {
    replay("cli_size", fuzzing::sizes);
}

#[test]
fn cli_proxy() {
    replay("cli_proxy", fuzzing::proxy_flags);
}
