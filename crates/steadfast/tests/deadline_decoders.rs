//! The fuzz targets' entry points (see `fuzz/`), run over random bytes on
//! stable: cargo-fuzz needs a nightly toolchain, this does not.

mod fuzz_entry;

use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn grpc_timeout_decoder_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..32)) {
        fuzz_entry::grpc_timeout(&data);
    }

    #[test]
    fn grpc_timeout_decoder_on_near_valid_input(text in "[0-9]{0,10}[HMSmun]?") {
        fuzz_entry::grpc_timeout(text.as_bytes());
    }

    #[test]
    fn deadline_header_decoders_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..32)) {
        fuzz_entry::deadline_header(&data);
    }

    #[test]
    fn deadline_header_decoders_on_near_valid_input(text in "[0-9]{0,20}[HMSmun]?") {
        fuzz_entry::deadline_header(text.as_bytes());
    }
}
