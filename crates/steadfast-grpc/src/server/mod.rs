//! Load shedding for gRPC servers: [`ShedLayer`], a tower layer for a
//! tonic server (`tonic::transport::Server::builder().layer(..)`) or any
//! gRPC service over `http`, that lets at most as many calls in as a
//! [`ConcurrencyLimit`](steadfast::limit::ConcurrencyLimit) has slots and
//! answers the rest at once with a Trailers-Only `RESOURCE_EXHAUSTED`.
//!
//! - **One slot per call**, taken before the service is called
//!   ([`try_acquire`](steadfast::limit::ConcurrencyLimit::try_acquire)), or,
//!   when the limit has a
//!   [queue](steadfast::limit::ConcurrencyLimitBuilder::queue), waited for
//!   in it for at most its
//!   [`max_queue_wait`](steadfast::limit::ConcurrencyLimit::max_queue_wait)
//!   (on the layer's clock: tokio's by default).
//! - **The refusal** is a response head with `grpc-status: 8`
//!   (`RESOURCE_EXHAUSTED`), a `grpc-message` naming the limit
//!   (`concurrency limit NAME full: N in flight, limit L`) and, if asked
//!   for ([`ShedLayer::pushback`]), `grpc-retry-pushback-ms`, which a gRPC
//!   client retrying `RESOURCE_EXHAUSTED` waits exactly (gRFC A6). A client
//!   that does not retry it sees the status at once.
//! - **Held until the call is done**: the slot lives in the response body
//!   ([`ShedBody`]) and goes back at its end (the trailers, for a call that
//!   streams its response), or when the call is dropped on the way (the
//!   client cancelled, the deadline passed, the connection went away).
//! - **An adaptive limit learns from its own server** by the call's
//!   `grpc-status` (in the head of a Trailers-Only response, else in the
//!   trailers): `OK` and the codes of a call the server answered normally
//!   (`INVALID_ARGUMENT`, `NOT_FOUND`, ...) are latency samples (from taking
//!   the slot to the end of the response); `RESOURCE_EXHAUSTED`,
//!   `UNAVAILABLE` and `DEADLINE_EXCEEDED` are drops that shrink it;
//!   `CANCELLED`, `UNKNOWN`, `INTERNAL`, `UNIMPLEMENTED`, `DATA_LOSS`, a
//!   response without a status and a dropped call say nothing.
//! - **Shared by every connection**: the layer and every service it makes
//!   hold clones of one limit.
//!
//! ```no_run
//! use steadfast::limit::ConcurrencyLimit;
//! use steadfast_grpc::server::ShedLayer;
//!
//! # fn main() -> Result<(), steadfast::ConfigError> {
//! let limit = ConcurrencyLimit::fixed(128).name("echo server").build()?;
//! let layer = ShedLayer::new(limit).pushback(std::time::Duration::from_millis(50));
//! // tonic::transport::Server::builder().layer(layer).add_service(..).serve(..)
//! # let _ = layer;
//! # Ok(()) }
//! ```

mod body;
mod future;
mod layer;
mod service;

pub use body::ShedBody;
pub use future::ShedFuture;
pub use layer::ShedLayer;
pub use service::Shed;

use http::HeaderMap;
use steadfast::limit::Signal;

use crate::Code;

/// What a call that ended with `code` tells the server's limit.
fn signal_of(code: Code) -> Signal {
    match code {
        Code::ResourceExhausted | Code::Unavailable | Code::DeadlineExceeded => Signal::Dropped,
        Code::Cancelled | Code::Unknown | Code::Internal | Code::Unimplemented | Code::DataLoss => {
            Signal::Ignored
        }
        _ => Signal::Success,
    }
}

/// The signal of the `grpc-status` among `headers` (a Trailers-Only head
/// or the trailers), if there is one.
fn status_signal(headers: &HeaderMap) -> Option<Signal> {
    crate::head_status(headers).map(signal_of)
}

#[cfg(test)]
mod tests;
