//! # steadfast-http
//!
//! An HTTP client on [reqwest] whose calls survive flaky servers, driven by
//! the [`steadfast`] engine: safe retries with jittered backoff,
//! `Retry-After` honoured and clamped, hedged requests (the first success
//! wins), one overall deadline sent to the server on every attempt, and a
//! report of how each call went.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let client = steadfast_http::Client::builder()
//!     .attempts(4)                          // counting the first
//!     .deadline(Duration::from_secs(10))    // every attempt and wait included
//!     .attempt_timeout(Duration::from_secs(2))
//!     .build()?;
//! let response = client.get("http://127.0.0.1:8080/users/7").send().await?;
//! let report = response.ending();
//! println!("{} after {} attempts, {:?} waiting", response.status(), report.attempts, report.waited);
//! # Ok(())
//! # }
//! ```
//!
//! ## Safe by default
//!
//! - **What is retried** ([`DefaultClassifier`]): connection errors,
//!   timeouts, a connection closed before the response, and the statuses
//!   408, 429, 500, 502, 503, 504; not 501 nor any other 4xx. A custom
//!   [`Classify`](steadfast::Classify) sees the status, headers and error.
//! - **Which methods** ([`is_idempotent`]): GET, HEAD, OPTIONS, TRACE, PUT
//!   and DELETE. A POST or PATCH is sent once unless the caller opts in:
//!   per request ([`RequestBuilder::retry_non_idempotent`]), per client
//!   ([`ClientBuilder::retry_non_idempotent`]), or by setting an
//!   `Idempotency-Key` header. Hedging is for idempotent methods only.
//! - **`Retry-After`** ([`RetryAfter`]): delta-seconds or an HTTP-date
//!   (without one, a `RateLimit-Reset` or `X-RateLimit-Reset`: seconds or a
//!   Unix time, ignored past [`MAX_RATE_LIMIT_RESET`]), the
//!   next wait, clamped by `max_delay` (the core's default 5 minutes) and
//!   never past the deadline: a hint that would end past it stops the call
//!   at once with [`StopReason::Deadline`](steadfast::StopReason::Deadline).
//!   Garbage, negative values and dates in the past are ignored (the
//!   backoff schedule applies); nothing a server sends can panic or stall
//!   the client.
//! - **Bodies**: a buffered body (bytes, text) is shared by every attempt;
//!   a streaming body is sent once and never retried, and the error says
//!   so ([`NotRetried::StreamingBody`]), unless the caller asks to buffer
//!   it up to a limit ([`RequestBuilder::buffer_body`]; a stream longer
//!   than that is still sent, once: [`NotRetried::BodyTooLarge`]).
//! - **Attempts never multiply**: the inner `reqwest::Client` is built with
//!   reqwest's own retries off (`reqwest::retry::never()`). If you bring
//!   your own ([`ClientBuilder::reqwest_client`]), build it that way too.
//!
//! ## Load protection
//!
//! - **Client**: [`ClientBuilder::concurrency_limit`] holds every attempt
//!   (first, retry, hedged copy) to a shared
//!   [`ConcurrencyLimit`](steadfast::limit::ConcurrencyLimit), fixed or
//!   adaptive; an adaptive one shrinks on the signs of overload the
//!   classifier names (by default a 429, a 503, a timeout:
//!   [`DefaultClassifier::is_overload_status`]). A call it refuses is an
//!   [`Error`] with [`StopReason::LimitReached`](steadfast::StopReason::LimitReached)
//!   and [`Error::limit_refused`]; nothing is sent.
//! - **Server**: [`server::ShedLayer`] sheds the requests an axum or hyper
//!   server's limit has no slot for with 503 and `Retry-After`, holding each
//!   admitted request's slot until its response body has been sent (or the
//!   request is dropped), so an adaptive server limit learns from its own
//!   responses.
//!
//! ## One engine
//!
//! Nothing here decides a retry. Each call runs `steadfast-tower`'s
//! [`RetryLayer`](steadfast_tower::RetryLayer) or
//! [`HedgeLayer`](steadfast_tower::HedgeLayer) (so the core's
//! `RetryPolicy::decide` and `HedgePolicy`) over one *attempt service*,
//! which writes the attempt's time left into the deadline header
//! (`x-steadfast-timeout`), sends the request, classifies the outcome once
//! and emits the attempt's `tracing` event. [`ReqwestReplay`] makes each
//! attempt's request with `reqwest::Request::try_clone`. The
//! `reqwest-middleware` [`middleware`] (feature `middleware`, on by
//! default) runs the same layers over the rest of a middleware stack.
//!
//! ## Telemetry
//!
//! One `tracing` event per attempt (target `steadfast_http`): `debug` for
//! a success, `info` for a failure, with the method, the URL without
//! userinfo and with query values redacted ([`RedactedUrl`]), the attempt
//! number, the status or error, the wait before it, and a `Retry-After`
//! hint with the wait it really gets (`retry_after_clamped`: capped at
//! `max_delay`; `retry_after_past_deadline`: it does not fit the deadline,
//! so the call stops). The same facts, typed, reach a hook set with
//! [`ClientBuilder::on_attempt`] as an [`AttemptEvent`]. No header is ever
//! logged, so neither `Authorization`, `Cookie` nor `Proxy-Authorization`
//! can leak. How a whole call went (attempts, why it stopped, the time
//! waited, the hedges) is the core's [`Ending`](steadfast::call::Ending),
//! on the [`Response`] and the [`Error`].
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod attempt;
mod buffer;
mod chaos;
mod classify;
mod client;
pub mod connect;
mod engine;
mod error;
mod event;
pub mod fallback;
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "middleware")]
pub mod middleware;
mod redact;
mod replay;
mod retry_after;
pub mod server;

pub use chaos::chaos_response;
pub use classify::{DefaultClassifier, Outcome, is_idempotent};
pub use client::{BodyError, BuildError, Client, ClientBuilder, RequestBuilder, Response};
pub use connect::{ConnectCutOff, ConnectWithinDeadline};
pub use error::{Error, NotRetried};
pub use event::{AttemptEnd, AttemptEvent};
pub use redact::RedactedUrl;
pub use replay::ReqwestReplay;
pub use retry_after::{MAX_RATE_LIMIT_RESET, RetryAfter};

/// Whether this build speaks `https://`: the `rustls` feature is on
/// (reqwest's TLS). Without it an `https://` URL is refused only when the
/// connection is made (and retried as a transport error), so a front end
/// checks a URL's scheme up front with this (`steadfast get` does).
pub const TLS: bool = cfg!(feature = "rustls");

/// The crate README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
