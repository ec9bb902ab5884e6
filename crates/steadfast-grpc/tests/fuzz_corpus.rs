//! Replays the fuzz corpus of the gRPC crate's parsers (`fuzz/corpus/`,
//! grown by `fuzz/run.sh` on nightly) through the same checks, on stable.

use steadfast_grpc::fuzzing;

use steadfast_corpus::replay;

#[test]
fn grpc_service_config() {
    replay("grpc_service_config", fuzzing::service_configs);
}

#[test]
fn grpc_duration() {
    replay("grpc_duration", fuzzing::durations);
}

#[test]
fn grpc_response_head() {
    replay("grpc_response_head", fuzzing::response_heads);
}
