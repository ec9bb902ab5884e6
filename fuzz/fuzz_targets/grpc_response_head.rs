//! What a gRPC server's response head can say to the retry layer:
//! `grpc-status` and `grpc-retry-pushback-ms`
//! (`steadfast_grpc::fuzzing::response_heads`), also replayed on stable from
//! the corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    steadfast_grpc::fuzzing::response_heads(data);
});
