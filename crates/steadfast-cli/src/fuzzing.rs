//! The body of the `cli_spec` fuzz target (in `fuzz/`), here so that a
//! proptest runs the same checks on stable (cargo-fuzz needs nightly).

use crate::codes::CodeSet;
use crate::duration::{format_duration, format_duration_exact, parse_duration};
use crate::spec::BackoffSpec;

/// Feeds `data` (as text, when it is UTF-8) to the duration, exit-code and
/// backoff-spec parsers. Panics only when a property is broken: a parser
/// panicked, a canonical form did not parse back to the same value, or the
/// core's builders panicked on a parsed spec.
pub fn cli_parsers(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = parse_duration(text) {
        assert_eq!(parse_duration(&format_duration_exact(d)), Ok(d));
        assert!(parse_duration(&format_duration(d)).is_ok());
    }
    if let Ok(set) = text.parse::<CodeSet>() {
        assert_eq!(set.to_string().parse::<CodeSet>(), Ok(set));
    }
    if let Ok(spec) = text.parse::<BackoffSpec>() {
        assert_eq!(spec.to_string().parse::<BackoffSpec>(), Ok(spec));
        // Refusal is an error value, never a panic.
        let _ = crate::backoff::build(&spec, Some(0));
    }
}
