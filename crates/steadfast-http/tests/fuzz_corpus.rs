//! Replays the `retry_after` fuzz corpus (`fuzz/corpus/retry_after/`, grown
//! by `fuzz/run.sh` on nightly) through the same check, on stable.

#[test]
fn retry_after() {
    steadfast_corpus::replay("retry_after", steadfast_http::fuzzing::retry_after);
}
