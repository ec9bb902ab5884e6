//! Load shedding for HTTP servers: [`ShedLayer`], a tower layer for axum
//! and hyper services that lets at most as many requests in as a
//! [`ConcurrencyLimit`](steadfast::limit::ConcurrencyLimit) has slots, and
//! answers the rest at once with `503 Service Unavailable` and a
//! `Retry-After`.
//!
//! - **One slot per request**, taken before the handler is called
//!   ([`ConcurrencyLimit::try_acquire`](steadfast::limit::ConcurrencyLimit::try_acquire)),
//!   or, when the limit has a
//!   [queue](steadfast::limit::ConcurrencyLimitBuilder::queue), waited for
//!   in it for at most its
//!   [`max_queue_wait`](steadfast::limit::ConcurrencyLimit::max_queue_wait)
//!   (on the layer's clock: tokio's by default).
//! - **Held until the response is done**: the slot lives in the response
//!   body ([`ShedBody`]) and goes back when the body has been sent to its
//!   end, or when the request is dropped on the way (the client went away,
//!   the connection broke, a timeout above cancelled it): a cancelled
//!   request never keeps its slot.
//! - **An adaptive limit learns from its own server**: a response that is
//!   not a 5xx is a latency sample (from taking the slot to the end of the
//!   body); a 503 or 504 (the handler is overloaded or timed out, or a
//!   [`ServerDeadlineLayer`](steadfast_tower::ServerDeadlineLayer) answered
//!   for it) is a drop that shrinks the limit; any other 5xx, an error of
//!   the service and a request dropped before its end say nothing
//!   ([`Signal::Ignored`]).
//! - **Shared by every connection**: the layer holds a clone of the limit,
//!   and so does every service it makes, so it bounds the whole server
//!   however many connections (and per-connection service clones) axum or
//!   hyper makes.
//!
//! ```
//! use std::time::Duration;
//! use axum::{Router, routing::get};
//! use steadfast::limit::ConcurrencyLimit;
//! use steadfast_http::server::ShedLayer;
//!
//! # fn main() -> Result<(), steadfast::ConfigError> {
//! let limit = ConcurrencyLimit::fixed(64).name("api").build()?;
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(ShedLayer::new(limit.clone()).retry_after(Duration::from_secs(2)));
//! # let _ = app;
//! # Ok(()) }
//! ```
//!
//! A client built with steadfast-http classifies the 503 as a sign of
//! overload, so an adaptive limit on the client
//! ([`ClientBuilder::concurrency_limit`](crate::ClientBuilder::concurrency_limit))
//! shrinks while the server sheds, and waits the `Retry-After` (clamped by
//! its `max_delay` and deadline) before it retries.

mod body;
mod future;
mod layer;
mod service;

pub use body::ShedBody;
pub use future::ShedFuture;
pub use layer::{DEFAULT_RETRY_AFTER, ShedLayer};
pub use service::Shed;

use http::StatusCode;
use steadfast::limit::Signal;

/// What a response with `status` tells the server's limit.
fn signal_of(status: StatusCode) -> Signal {
    match status {
        StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT => Signal::Dropped,
        s if s.is_server_error() => Signal::Ignored,
        _ => Signal::Success,
    }
}

#[cfg(test)]
mod tests;
