//! Server-side load shedding over any `http` service: [`ShedLayer`] lets at
//! most as many requests in as a
//! [`ConcurrencyLimit`](steadfast::limit::ConcurrencyLimit) has slots, and
//! answers the rest at once with the refusal of its protocol
//! ([`Shedding`]). `steadfast-http`'s `server::ShedLayer` (a 503 with a
//! `Retry-After`) and `steadfast-grpc`'s (a Trailers-Only
//! `RESOURCE_EXHAUSTED`) are this layer with their protocol's `Shedding`.
//! [`RateShedLayer`] is its twin for a rate limit: a request the limit has
//! no room for is answered with the protocol's [`RateRefusal`], made from
//! the limit's own wait (`steadfast-http`'s 429 with `Retry-After`,
//! `steadfast-grpc`'s `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms`).
//!
//! - **One slot per request**, taken before the service is called
//!   ([`ConcurrencyLimit::try_acquire`](steadfast::limit::ConcurrencyLimit::try_acquire)),
//!   or, when the limit has a
//!   [queue](steadfast::limit::ConcurrencyLimitBuilder::queue), waited for
//!   in it for at most its
//!   [`max_queue_wait`](steadfast::limit::ConcurrencyLimit::max_queue_wait)
//!   on the layer's clock (tokio's by default). A clock that cannot sleep
//!   does not queue: what finds no slot is refused at once.
//! - **Held until the response is done**: the slot lives in the response
//!   body ([`ShedBody`]) and goes back when the body has been read to its
//!   end (its last data frame or its trailers), or when the request is
//!   dropped on the way (the client went away, the connection broke, a
//!   timeout above cancelled it): a cancelled request never keeps its slot.
//! - **What the limit learns** is the protocol's word: the signal of the
//!   response's head ([`Shedding::on_head`]), overridden by that of its
//!   trailers ([`Shedding::on_trailers`]), [`Signal::Ignored`] if neither
//!   says. An error of the service, a body that fails and a request dropped
//!   before its end say nothing.
//! - **Shared by every connection**: the layer and every service it makes
//!   hold clones of one limit, so it bounds the whole server however many
//!   connections (and per-connection service clones) the server makes.
//!
//! ```
//! use http::{Response, StatusCode, header::HeaderMap, response::Parts};
//! use steadfast::limit::{ConcurrencyLimit, LimitRefused, Signal};
//! use steadfast_tower::shed::{ShedLayer, Shedding};
//! use tower::{Layer, ServiceExt, service_fn};
//!
//! /// Refuses with a 429; a 5xx is a drop, anything else a success.
//! #[derive(Clone, Debug)]
//! struct TooMany;
//!
//! impl Shedding for TooMany {
//!     fn refused(&self, _: &LimitRefused) -> Response<()> {
//!         let mut response = Response::new(());
//!         *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
//!         response
//!     }
//!     fn on_head(&self, head: &Parts) -> Option<Signal> {
//!         Some(if head.status.is_server_error() { Signal::Dropped } else { Signal::Success })
//!     }
//!     fn on_trailers(&self, _: &HeaderMap) -> Option<Signal> {
//!         None
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let limit = ConcurrencyLimit::fixed(1).build()?;
//! let handler = service_fn(|_: http::Request<()>| async {
//!     Ok::<_, std::convert::Infallible>(Response::new(String::from("done")))
//! });
//! let server = ShedLayer::new(limit.clone(), TooMany).layer(handler);
//! let _busy = limit.try_acquire()?; // the one slot is taken
//! let shed = server.oneshot(http::Request::new(())).await?;
//! assert_eq!(shed.status(), StatusCode::TOO_MANY_REQUESTS);
//! # Ok(()) }
//! ```

mod body;
mod future;
mod layer;
mod rate;
mod service;

pub use body::ShedBody;
pub use future::ShedFuture;
pub use layer::ShedLayer;
pub use rate::{PerKey, RateRefusal, RateShed, RateShedFuture, RateShedLayer, RequestAdmission};
pub use service::Shed;

use http::{HeaderMap, Response, response::Parts};
use steadfast::limit::{LimitRefused, Signal};

/// What a protocol adds to a [`ShedLayer`]: its refusal, and what its
/// responses tell the limit.
///
/// It is cloned into each call (a refusal or a held slot takes its clone
/// along), so it should be cheap to clone: a few `HeaderValue`s, an `Arc`.
pub trait Shedding: Clone {
    /// The answer to a request the limit had no slot for (its status and
    /// headers; the body is empty). `refused` names the limit and says how
    /// full it was and how long the request waited in its queue.
    fn refused(&self, refused: &LimitRefused) -> Response<()>;

    /// What a response's head tells the limit, if it already says how the
    /// request ended (an HTTP status, a gRPC Trailers-Only head).
    fn on_head(&self, head: &Parts) -> Option<Signal>;

    /// What a response's trailers tell the limit (a gRPC status), if
    /// anything: it overrides the head's signal.
    fn on_trailers(&self, trailers: &HeaderMap) -> Option<Signal>;
}

#[cfg(test)]
mod tests;
