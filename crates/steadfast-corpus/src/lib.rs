//! Replays the fuzz corpus (`fuzz/corpus/<target>/`, grown by `fuzz/run.sh`
//! on nightly) through a fuzz target's body, on stable: every crate with a
//! fuzz target runs its corpus in `cargo test` with this, so an input that
//! once broke a parser stays a test without nightly.
//!
//! ```
//! // A body that holds for every input.
//! steadfast_corpus::replay("grpc_timeout", |bytes| assert!(bytes.len() < 1 << 20));
//! ```

use std::path::PathBuf;

/// Every input of `target`'s corpus, sorted by file name.
///
/// # Panics
/// When the corpus folder cannot be read or is empty: a missing corpus
/// would make a replay pass vacuously.
#[must_use]
pub fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
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

/// Runs `body` on every input of `target`'s corpus.
///
/// # Panics
/// When an input breaks a property (`body` panics on it), naming the input;
/// or when the corpus is missing or empty.
pub fn replay(target: &str, body: fn(&[u8])) {
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
