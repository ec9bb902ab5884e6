//! The built-in schedules end to end, one file per curve: made by their
//! constructors and driven through the pipeline of
//! [`Backoff`](super::value::Backoff). A curve file holds only its math, and
//! tests only that.

mod a6;
mod constant;
mod decorrelated;
mod exponential;
mod fibonacci;
mod grpc_go;
mod linear;
