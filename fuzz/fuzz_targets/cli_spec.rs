//! The command line's parsers of outside input: durations, exit-code lists
//! and backoff specs. None may panic; what parses must print a canonical
//! form that parses back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use steadfast_cli::codes::CodeSet;
use steadfast_cli::duration::{format_duration, format_duration_exact, parse_duration};
use steadfast_cli::spec::BackoffSpec;

fuzz_target!(|data: &[u8]| {
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
        // The core's builders must refuse bad values with an error, not a panic.
        let _ = steadfast_cli::backoff::build(&spec, Some(0));
    }
});
