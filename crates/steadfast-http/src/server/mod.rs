//! Load shedding for HTTP servers: [`RateLimitLayer`] (a shared rate limit
//! answering `429` with the limit's exact `Retry-After`), and [`ShedLayer`], a tower layer for axum
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
//! The machinery is steadfast-tower's
//! [`shed`](steadfast_tower::shed) layer; this module adds what HTTP says
//! ([`HttpShedding`]): the 503 and its `Retry-After`, and the signal of a
//! response's status.
//!
//! A client built with steadfast-http classifies the 503 as a sign of
//! overload, so an adaptive limit on the client
//! ([`ClientBuilder::concurrency_limit`](crate::ClientBuilder::concurrency_limit))
//! shrinks while the server sheds, and waits the `Retry-After` (clamped by
//! its `max_delay` and deadline) before it retries.

mod chaos;
mod layer;
mod rate;

pub use chaos::{
    ABORT_HEADER, ABORT_PERCENT_HEADER, ChaosBody, ChaosLayer, ChaosResponse, ChaosService,
    DEFAULT_MAX_ASKED_DELAY, DELAY_HEADER, DELAY_PERCENT_HEADER, WithChaosBody, asked_faults,
};
pub use layer::{DEFAULT_RETRY_AFTER, HttpShedding, ShedLayer};
pub use rate::{RateLimitLayer, TooManyRequests};

use http::StatusCode;
use steadfast::clock::DefaultClock;
use steadfast::limit::Signal;

/// A service behind a [`ShedLayer`]: each request takes a slot of the
/// layer's limit (every clone shares it) or is answered 503. It is
/// [`steadfast_tower::shed::Shed`] with the HTTP refusal ([`HttpShedding`]).
///
/// ```
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_http::server::ShedLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = ConcurrencyLimit::fixed(2).build()?;
/// let handler = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// });
/// let service = ShedLayer::new(limit.clone()).layer(handler);
/// let response = service.clone().oneshot(http::Request::new(())).await?;
/// // An empty body is done as soon as the response is made: the slot is back.
/// assert_eq!((response.status(), limit.in_flight()), (http::StatusCode::OK, 0));
/// # Ok(()) }
/// ```
pub type Shed<S, C = DefaultClock> = steadfast_tower::shed::Shed<S, HttpShedding, C>;

/// The future of a [`Shed`] call: the service's response with the
/// request's slot in its body, or a 503 for a request the limit had no slot
/// for. Dropped before it is done (the connection went away), it gives back
/// the slot it holds, or leaves the limit's queue.
pub type ShedFuture<S, B, C = DefaultClock> =
    steadfast_tower::shed::ShedFuture<S, B, HttpShedding, C>;

/// The body of a response through a [`Shed`] service: the service's own
/// body, holding the request's slot of the limit until its last frame has
/// been read (then the slot goes back with what the response's status
/// says, see the [module docs](self)) or until it is dropped unfinished
/// (the slot goes back as [`Signal::Ignored`]); or the empty body of a shed
/// request.
///
/// ```
/// use http_body_util::BodyExt;
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_http::server::ShedLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = ConcurrencyLimit::fixed(4).build()?;
/// let handler = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("report")))
/// });
/// let response = ShedLayer::new(limit.clone()).layer(handler).oneshot(http::Request::new(())).await?;
/// assert_eq!(limit.in_flight(), 1); // the body is not sent yet
/// assert!(response.body().holds_slot());
/// let body = response.into_body().collect().await?.to_bytes();
/// assert_eq!((&body[..], limit.in_flight()), (&b"report"[..], 0));
/// # Ok(()) }
/// ```
pub type ShedBody<B> = steadfast_tower::shed::ShedBody<B, HttpShedding>;

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
