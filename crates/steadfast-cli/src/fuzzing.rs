//! The bodies of the command line's fuzz targets (in `fuzz/`), here so that
//! proptests and the corpus replay (`tests/fuzz_corpus.rs`) run the same
//! checks on stable (cargo-fuzz needs nightly).
//!
//! Each takes the raw bytes libFuzzer made, parses them as text when they
//! are UTF-8, and panics only when a property is broken: a parser panicked,
//! a canonical form did not parse back to the same value, or the core's
//! builders panicked on a parsed spec.
//!
//! ```
//! steadfast_cli::fuzzing::cli_parsers(b"exponential:initial=100ms,max=5s");
//! steadfast_cli::fuzzing::durations(b"1h30m");
//! ```

use crate::codes::CodeSet;
use crate::duration::{format_duration, format_duration_exact, parse_duration};
use crate::input::parse_size;
use crate::spec::BackoffSpec;

/// Every command-line parser on `data` (the proptests' entry point).
pub fn cli_parsers(data: &[u8]) {
    durations(data);
    exit_codes(data);
    backoff_specs(data);
    sizes(data);
}

/// The duration parser (`--deadline`, `--attempt-timeout`, `--kill-after`,
/// spec values): what parses round-trips through both formatters.
pub fn durations(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = parse_duration(text) {
        assert_eq!(parse_duration(&format_duration_exact(d)), Ok(d));
        assert!(parse_duration(&format_duration(d)).is_ok());
    }
}

/// The exit-code list parser (`--retry-on`, `--stop-on`): what parses
/// round-trips through its canonical form.
pub fn exit_codes(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(set) = text.parse::<CodeSet>() {
        assert_eq!(set.to_string().parse::<CodeSet>(), Ok(set));
    }
}

/// The backoff spec parser (`--backoff`): what parses round-trips, the
/// core's builders refuse a bad value with an error, never a panic, and
/// what they build gives its first delays (the ones `steadfast schedule`
/// prints) without a panic or an overflow.
pub fn backoff_specs(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(spec) = text.parse::<BackoffSpec>() {
        assert_eq!(spec.to_string().parse::<BackoffSpec>(), Ok(spec));
        if let Ok(backoff) = crate::backoff::build(&spec, Some(0)) {
            let _ = crate::schedule::delays(&backoff, 0, 16);
        }
    }
}

/// The size parser (`--stdin-limit`): what parses is the same number of
/// bytes when written out plainly.
pub fn sizes(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(n) = parse_size(text) {
        assert_eq!(parse_size(&n.to_string()), Ok(n));
    }
}
