//! # steadfast-tower
//!
//! The [steadfast] toolkit as tower middleware: retries, hedged
//! requests, deadlines that travel between services, and shared retry
//! controls, for any [`tower::Service`](tower_service::Service) — a hyper
//! or reqwest client, a tonic channel, an axum handler — in the
//! `ServiceBuilder` stack you already have.
//!
//! Every layer is a thin executor of the core's decision engine
//! ([`RetryPolicy::decide`](steadfast::RetryPolicy::decide),
//! [`HedgePolicy`](steadfast::HedgePolicy)): the same policies, schedules,
//! classifiers and controls drive the blocking loop, the async future, the
//! simulator and these layers, so a policy behaves the same everywhere.
//!
//! | layer | what it does |
//! |---|---|
//! | [`RetryLayer`] | retries under a `RetryPolicy`: attempts counting the first, backoff, one overall deadline, server hints clamped, a shared control |
//! | [`HedgeLayer`] | sends a copy after a (fixed or adaptive) delay; the first success wins and the other copies are dropped |
//! | [`DeadlineLayer`] | runs each call under the earliest of the ambient deadline and a timeout; a distinct error when it passes |
//! | [`SetDeadlineHeaderLayer`] | writes the time left into an outgoing HTTP request (`x-steadfast-timeout`, `grpc-timeout`, ...) |
//! | [`ServerDeadlineLayer`] | reads it back on the server into the handler's ambient deadline; drops the handler when it passes |
//! | [`ControlLayer`] | a shared `RetryControl` at the front door: client-side throttling refuses locally; outcomes are recorded |
//! | [`ConcurrencyLimitLayer`] | a shared concurrency limit (fixed or adaptive, shared by every clone): refuses at once, or holds callers back in `poll_ready` |
//! | [`balance::Balance`] | one service over the replicas a `Discover` gives: each call to the less loaded of two ready, non-ejected endpoints of a shared `Endpoints` set (peak-EWMA load, gRFC A50 outlier detection), never to one that is not ready |
//! | [`ShedLayer`] | server-side load shedding over `http`: a slot of a shared limit per request (or a bounded wait in its queue), held by the response body until its end, the rest answered with a protocol's refusal ([`Shedding`]) |
//!
//! ## The tower contract
//!
//! Every layer is `Clone`, composes in `ServiceBuilder` in any order, passes
//! its inner service's readiness (and backpressure) through its own
//! `poll_ready`, and buffers nothing without a bound. The retry and hedge
//! layers call `poll_ready` on a service before *every* attempt and copy:
//! the first goes to the service their own `poll_ready` readied, every later
//! one to a fresh clone, readied first. They call the inner service when
//! their future is first polled (a request may need its body buffered
//! first, and each attempt is made inside its own deadline scope).
//! `tests/contract.rs` runs these rules as a matrix over every layer.
//!
//! ## Replay
//!
//! A request is retried or hedged only if it can be sent again
//! ([`replay`]): `Clone` requests are cloned per attempt
//! ([`CloneReplay`](replay::CloneReplay), the default); `http::Request`s
//! have their body buffered once, up to a limit (64 KiB by default), and
//! shared by every attempt ([`HttpReplay`](replay::HttpReplay)). A request
//! that cannot be replayed is sent exactly once, and the error says why
//! ([`StopReason::NotReplayable`](steadfast::StopReason::NotReplayable)).
//!
//! ## Lending the policy
//!
//! A layer's response futures are `'static`, so each call takes its policy
//! along: `RetryLayer::new(policy)` keeps it in an `Arc` (a reference count
//! per call), `RetryLayer::lend(&POLICY)` lends a `&'static` one (a pointer
//! per call, the cheapest), and `RetryLayer::lend(policy)` copies the whole
//! policy per call (the dearest). All behave the same; `BENCHMARKS.md` has
//! their costs.
//!
//! ## Time
//!
//! Layers read time and sleep on a [`Clock`](steadfast::clock::Clock): tokio's by
//! default (with the default `tokio` feature), a virtual one in tests, or
//! [`PreciseClock`], whose sleeps end when they are due instead of on
//! tokio's next millisecond tick: what hedging delays of a millisecond or
//! two need.
//!
//! ## A client stack
//!
//! ```
//! use std::time::Duration;
//! use steadfast::RetryPolicy;
//! use steadfast::deadline::DeadlineHeader;
//! use steadfast_tower::replay::HttpReplay;
//! use steadfast_tower::{DeadlineLayer, RetryLayer, SetDeadlineHeaderLayer};
//! use tower::ServiceBuilder;
//!
//! # fn stack<S: Clone>(client: S) -> Result<(), Box<dyn std::error::Error>> {
//! let policy = RetryPolicy::builder()
//!     .max_attempts(4)
//!     .max_elapsed(Duration::from_secs(10))
//!     .build()?;
//! let client = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(10)))
//!     .layer(RetryLayer::new(policy).replay(HttpReplay::default()))
//!     .layer(SetDeadlineHeaderLayer::new(DeadlineHeader::DEFAULT)?) // each attempt's time left
//!     .service(client);
//! # let _ = client;
//! # Ok(())
//! # }
//! ```
//!
//! The crate's README has the complete program over a hyper client, and
//! `examples/hyper_stack.rs` runs it against a local server that fails.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

mod attempt;
pub mod balance;
pub mod body;
pub mod chaos;
mod control;
pub mod deadline;
pub mod fallback;
pub mod fault_headers;
pub mod hedge;
pub mod layer;
mod limit;
mod policy;
mod prepare;
mod rate;
pub mod replay;
pub mod retry;
pub mod shed;
mod timer;
#[cfg(feature = "h2")]
mod unprocessed;

pub use chaos::{ChaosLayer, ChaosService};
pub use control::{Control, ControlError, ControlFuture, ControlLayer};
pub use deadline::{DeadlineLayer, ServerDeadlineLayer, SetDeadlineHeaderLayer};
pub use fallback::{FallbackLayer, FallbackService};
pub use hedge::{HedgeLayer, HedgeService};
pub use layer::{PolicyLayer, PolicyService};
pub use limit::{ConcurrencyLimitLayer, ConcurrencyLimitService, LimitError, LimitFuture};
pub use rate::{RateLimitError, RateLimitFuture, RateLimitLayer, RateLimitService};
pub use retry::{RetryLayer, RetryService};
pub use shed::{ShedLayer, Shedding};
pub use timer::{PreciseClock, PreciseSleep};
#[cfg(feature = "h2")]
pub use unprocessed::unprocessed;

/// The crate README's program, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
