//! The `cli_spec` fuzz target's checks on stable: arbitrary bytes, arbitrary
//! text, and text close to each grammar.

use proptest::prelude::*;
use steadfast_cli::fuzzing::cli_parsers;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        cli_parsers(&data);
    }

    #[test]
    fn arbitrary_text(text in "\\PC{0,40}") {
        cli_parsers(text.as_bytes());
    }

    #[test]
    fn near_durations(text in "[0-9]{0,12}(\\.[0-9]{0,12})?(ns|us|µs|ms|s|m|h|d|x)?([0-9]{0,3}(ms|s|m))?") {
        cli_parsers(text.as_bytes());
    }

    #[test]
    fn near_code_lists(text in "([0-9]{1,3}(-[0-9]{1,3})?,){0,5}[0-9]{0,4}") {
        cli_parsers(text.as_bytes());
    }

    #[test]
    fn near_specs(
        text in "(grpc|exponential|constant|linear|fibonacci|decorrelated|a6)(:((initial|delay|step|max|multiplier|jitter|base|cap|factor)=([0-9]{1,6}(\\.[0-9]{1,3})?(ms|s|us|h|%)?|full|equal|none|additive:([0-9]{1,6}(\\.[0-9]{1,3})?(ns|us|ms|s|h|d)?)?)),{0,4}((initial|max|multiplier|jitter)=[0-9]{1,4}(ms|s)?))?"
    ) {
        cli_parsers(text.as_bytes());
    }
}
