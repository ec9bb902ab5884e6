//! Deadlines across services: enforce one on a call, send it on the wire,
//! and read it back on the server for everything the handler calls.
//!
//! - [`DeadlineLayer`] (client): the call's deadline is the earliest of the
//!   ambient one and the layer's timeout; the inner service runs with it as
//!   the ambient deadline, and the call ends with
//!   [`DeadlineError::Exceeded`] when it passes.
//! - [`SetDeadlineHeaderLayer`] (HTTP client): writes the time left of the
//!   ambient deadline into a header (`x-steadfast-timeout`, `grpc-timeout`
//!   or your own), so the server knows it. Under a
//!   [`RetryLayer`](crate::RetryLayer) each attempt sends its own time left.
//! - [`ServerDeadlineLayer`] (HTTP server): reads that header into the
//!   ambient deadline of the handler, so every call the handler makes
//!   inherits the time left; the handler's future is dropped when it passes.
//!
//! A two-hop chain: the client sends 1 s; service A spends 200 ms, then
//! calls B, whose handler sees about 800 ms left.

mod client;
mod error;
mod header;
mod server;

pub use client::{DeadlineFuture, DeadlineLayer, DeadlineService};
pub use error::DeadlineError;
pub use header::{SetDeadlineHeader, SetDeadlineHeaderLayer};
pub use server::{
    ErrorOnExpiry, OnExpiry, RespondOnExpiry, ServerDeadline, ServerDeadlineFuture,
    ServerDeadlineLayer,
};
