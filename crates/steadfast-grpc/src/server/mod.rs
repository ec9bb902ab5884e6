//! Load shedding and faults on purpose for gRPC servers. [`ChaosLayer`]
//! delays calls and answers them with a Trailers-Only status as its
//! [`Chaos`](steadfast::chaos::Chaos) draws, and as a call's Envoy fault
//! headers ask (`x-envoy-fault-abort-grpc-request`, ...), capped by the
//! configured rates. [`ShedLayer`] is a tower layer for a
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
//! The machinery is steadfast-tower's
//! [`shed`](steadfast_tower::shed) layer; this module adds what gRPC says
//! ([`GrpcShedding`]): the Trailers-Only refusal and its pushback, and the
//! signal of a call's `grpc-status`.
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

mod chaos;
mod layer;
mod rate;
mod refusal;

pub use chaos::{
    ABORT_GRPC_HEADER, ABORT_HTTP_HEADER, ABORT_PERCENT_HEADER, ChaosLayer, ChaosResponse,
    ChaosService, DEFAULT_MAX_ASKED_DELAY, DELAY_HEADER, DELAY_PERCENT_HEADER, asked_abort,
};
pub use layer::ShedLayer;
pub use rate::{GrpcRateRefusal, RateLimitLayer};
pub use refusal::GrpcShedding;

use http::HeaderMap;
use steadfast::clock::DefaultClock;
use steadfast::limit::Signal;

use crate::Code;

/// A gRPC service behind a [`ShedLayer`]: each call takes a slot of the
/// layer's limit (every clone shares it) or is answered
/// `RESOURCE_EXHAUSTED`. It is [`steadfast_tower::shed::Shed`] with the
/// gRPC refusal ([`GrpcShedding`]).
///
/// ```
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_grpc::server::ShedLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = ConcurrencyLimit::fixed(2).build()?;
/// let handler = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("message")))
/// });
/// let service = ShedLayer::new(limit.clone()).layer(handler);
/// let response = service.oneshot(http::Request::new(())).await?;
/// assert_eq!(limit.in_flight(), 1); // until the response body is done
/// drop(response);
/// assert_eq!(limit.in_flight(), 0);
/// # Ok(()) }
/// ```
pub type Shed<S, C = DefaultClock> = steadfast_tower::shed::Shed<S, GrpcShedding, C>;

/// The future of a [`Shed`] call: the service's response with the call's
/// slot in its body, or a Trailers-Only `RESOURCE_EXHAUSTED` for a call the
/// limit had no slot for. Dropped before it is done (the connection went
/// away), it gives back the slot it holds, or leaves the limit's queue.
pub type ShedFuture<S, B, C = DefaultClock> =
    steadfast_tower::shed::ShedFuture<S, B, GrpcShedding, C>;

/// The body of a response through a [`Shed`] service: the service's own
/// body, holding the call's slot of the limit until its end (then the slot
/// goes back with what the call's `grpc-status` says, see the
/// [module docs](self)) or until it is dropped unfinished
/// ([`Signal::Ignored`]); or the empty body of a shed call.
///
/// ```
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_grpc::server::ShedLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = ConcurrencyLimit::fixed(4).build()?;
/// let handler = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("message")))
/// });
/// let response = ShedLayer::new(limit.clone()).layer(handler).oneshot(http::Request::new(())).await?;
/// assert!(response.body().holds_slot());
/// drop(response);
/// let handler = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// });
/// let response = ShedLayer::new(limit).layer(handler).oneshot(http::Request::new(())).await?;
/// assert!(!response.body().holds_slot()); // nothing to send: given back
/// # Ok(()) }
/// ```
pub type ShedBody<B> = steadfast_tower::shed::ShedBody<B, GrpcShedding>;

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
