//! The atomics the controls are built on: `std`'s normally, `loom`'s under
//! `--cfg loom`, so the model checker can explore every interleaving of the
//! very code that ships.
//!
//! Run the model tests with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p steadfast --release --lib control::
//! ```

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// Keeps a hot atomic on its own cache line (128 bytes covers the adjacent-
/// line prefetch of x86 and the 128-byte lines of some ARM cores), so
/// threads writing it do not slow down threads reading its neighbours.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);
