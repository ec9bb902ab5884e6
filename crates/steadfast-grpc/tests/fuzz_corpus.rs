//! Replays the fuzz corpus of the gRPC crate's parsers (`fuzz/corpus/`,
//! grown by `fuzz/run.sh` on nightly) through the same checks, on stable.

use std::path::PathBuf;

use steadfast_grpc::fuzzing;

/// Every input of `target`'s corpus; fails when there is none (a missing
/// corpus would make this test pass vacuously).
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the corpus {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a directory entry").path();
            let bytes = std::fs::read(&path).expect("a corpus file");
            (path, bytes)
        })
        .collect();
    assert!(!inputs.is_empty(), "the corpus {} is empty", dir.display());
    inputs.sort();
    inputs
}

fn replay(target: &str, body: fn(&[u8])) {
    for (path, bytes) in corpus(target) {
        let result = std::panic::catch_unwind(|| body(&bytes));
        assert!(
            result.is_ok(),
            "{target}: the input {} broke a property: {:?}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        );
    }
}

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
