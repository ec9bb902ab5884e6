//! Replays the fuzz corpus of the deadline decoders (`fuzz/corpus/`, grown
//! by `fuzz/run.sh` on nightly) through the targets' own bodies, on stable.

use std::path::PathBuf;

#[allow(dead_code)] // shared with deadline_decoders.rs and the fuzz targets
mod fuzz_entry;

/// Every input of `target`'s corpus; fails when there is none.
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
fn grpc_timeout() {
    replay("grpc_timeout", fuzz_entry::grpc_timeout);
}

#[test]
fn deadline_header() {
    replay("deadline_header", fuzz_entry::deadline_header);
}
