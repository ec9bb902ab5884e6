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
use crate::proxy::{parse_rate, parse_target};
use crate::spec::BackoffSpec;

/// Every command-line parser on `data` (the proptests' entry point).
pub fn cli_parsers(data: &[u8]) {
    durations(data);
    exit_codes(data);
    backoff_specs(data);
    sizes(data);
    proxy_flags(data);
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

/// The parsers of `steadfast proxy`'s own flags (`--refuse` and the other
/// rates, `--to`): a rate that parses is in 0..=1 and parses back from its
/// fraction to the same rate; a target that parses has a host and a port in
/// 1..=65535.
pub fn proxy_flags(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(rate) = parse_rate(text) {
        let p = rate.get();
        assert!((0.0..=1.0).contains(&p));
        assert_eq!(parse_rate(&p.to_string()), Ok(rate));
    }
    if let Ok(target) = parse_target(text) {
        let (host, port) = target.rsplit_once(':').expect("a parsed target has a port");
        assert!(!host.is_empty());
        assert!(port.parse::<u16>().is_ok_and(|p| p > 0));
    }
}
