//! The gRPC service-config parser (gRFC A6 JSON):
//! `steadfast_grpc::fuzzing::service_configs`, also replayed on stable from
//! the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_grpc::fuzzing::service_configs(data);
});
