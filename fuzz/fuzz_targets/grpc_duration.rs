//! The proto3 JSON duration parser of gRPC service configs:
//! `steadfast_grpc::fuzzing::durations`, also replayed on stable from the
//! corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_grpc::fuzzing::durations(data);
});
