//! Replays the `retry_after` fuzz corpus (`fuzz/corpus/retry_after/`, grown
//! by `fuzz/run.sh` on nightly) through the same check, on stable.

use std::path::PathBuf;

#[test]
fn retry_after() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/retry_after");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the corpus {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    assert!(!inputs.is_empty(), "the corpus {} is empty", dir.display());
    inputs.sort();
    for path in inputs {
        let bytes = std::fs::read(&path).expect("a corpus file");
        let result = std::panic::catch_unwind(|| steadfast_http::fuzzing::retry_after(&bytes));
        assert!(
            result.is_ok(),
            "the input {} broke a property: {:?}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        );
    }
}
