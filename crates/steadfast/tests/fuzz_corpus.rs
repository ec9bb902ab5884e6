//! Replays the fuzz corpus of the deadline decoders (`fuzz/corpus/`, grown
//! by `fuzz/run.sh` on nightly) through the targets' own bodies, on stable.

#[allow(dead_code)] // shared with deadline_decoders.rs and the fuzz targets
mod fuzz_entry;

use steadfast_corpus::replay;

#[test]
fn grpc_timeout() {
    replay("grpc_timeout", fuzz_entry::grpc_timeout);
}

#[test]
fn deadline_header() {
    replay("deadline_header", fuzz_entry::deadline_header);
}
