// The front page: the crate README (the tour, shared with crates.io, so the
// two cannot drift; its examples run as doctests here), then what only
// rustdoc can show: which type to reach for, with links, and the modules.
#![doc = include_str!("../README.md")]
//!
//! ## Which type to reach for
//!
//! | you want to | reach for |
//! |---|---|
//! | retry an async call | [`Retryable::retry`] on any `FnMut(Attempt) -> Future`, with a [`RetryPolicy`] (built by [`RetryPolicy::builder`], shared by every call) |
//! | retry a blocking call | [`BlockingRetryable::retry_blocking`], same policy |
//! | know which attempt this is, and its time left | [`Attempt`] (`number`, `deadline`, [`Attempt::time_left`]) |
//! | pick the waits between attempts | [`Backoff`]: `constant`, `linear`, `exponential`, `fibonacci`, `decorrelated`, `grpc_go`, `grpc_a6`... with a [`Jitter`]; [`GrpcConnectionBackoff`] for reconnects; any [`Schedule`] of yours |
//! | say which outcomes to retry, and honour a server's hint | `.when(predicate)`, or `.classify(..)` returning a [`Verdict`] (`Success`, `Retry`, `RetryAfter(hint)`, `Stop`, and `StopSending`: no more attempts, copies in flight run on); a [`Classify`] type of yours |
//! | know why a call gave up | [`RetryError`] and its [`StopReason`] |
//! | know how a call ended, success or not (attempts made, time waited, a retried `Ok` that ran out) | `.report()`: a [`Report`] (retries) or a [`hedge::HedgeReport`] (hedges, with the copies' stats) |
//! | log or measure each retry | `.notify(..)`: a hook that gets a [`Notice`] (attempt, error, wait, time left) before each wait |
//! | bound a whole call chain in time | [`Deadline`]; [`deadline::scope`] / [`deadline::scope_async`] to set the ambient one, [`deadline::current`] to read it |
//! | send the time left to the next service, read it back | [`deadline::DeadlineHeader`] (`x-steadfast-timeout`, or `grpc-timeout`), [`deadline::GrpcTimeout`], [`deadline::TimeBudget`] |
//! | stop a server's work when its caller stops waiting | [`deadline::DeadlineGuard`], [`deadline::timeout_at`] |
//! | connect, retrying until a deadline | [`deadline::Connector`] (the gRPC connection backoff) |
//! | keep retries from becoming a storm, across calls | a [`RetryControl`] shared through an `Arc`: [`control::RetryBudget`], [`control::TokenBucket`] (gRFC A6), [`control::AdaptiveThrottle`], [`control::FailureWindow`] |
//! | stop calling a dependency that is down | [`control::CircuitBreaker`]; several controls at once: [`control::AllOf`] |
//! | cut the latency tail with a second copy | [`Hedgeable::hedge`] with a [`HedgePolicy`]; [`hedge::AdaptiveDelay`] for a delay that follows a latency quantile |
//! | stop a call from outside | [`CancelToken`] (`.cancel_on(token)`) |
//! | test retries without waiting | [`clock::VirtualClock`] (`.clock(clock)`) |
//! | wait on tokio, or on another executor | [`TokioClock`] (the default, feature `tokio`), [`FuturesTimerClock`] (feature `futures-timer`), [`AsyncIoClock`] (feature `async-io`) |
//! | drive the engine yourself (a simulator, an executor of your own) | [`RetryPolicy::decide`] with a [`CallState`]; [`HedgePolicy::send_due`] and [`HedgePolicy::on_outcome`] |
//! | the same in a tower stack, an HTTP client, a gRPC channel | `steadfast-tower`, `steadfast-http`, `steadfast-grpc` (see [The rest of the workspace](#the-rest-of-the-workspace)) |
//! | retry a program from a shell script | the `steadfast` command (`steadfast-cli`): `steadfast run --attempts 5 -- ./deploy.sh` |
//!
//! ## Modules
//!
//! - [`retry`]: the executors, async and blocking, and [`Attempt`].
//! - [`policy`]: [`RetryPolicy`], the decision engine every executor drives.
//! - [`backoff`]: the schedules, their jitter and limits; how names from other
//!   libraries map onto them.
//! - [`deadline`]: deadlines, the ambient deadline, the wire formats, the
//!   server side.
//! - [`control`]: budgets, throttles and the circuit breaker, shared by retries
//!   and hedges.
//! - [`hedge`]: hedged requests, and the hedging engine without its executor.
//! - [`clock`]: time, injected: the real clocks and the virtual one.
//! - [`cancel`]: explicit cancellation ([`CancelToken`]).
//!
#![doc = concat!(
    "How the pieces fit (the flow of one call, the invariants) is in the repository's [ARCHITECTURE.md](",
    env!("CARGO_PKG_REPOSITORY"),
    "/blob/main/ARCHITECTURE.md); speed against backon, tokio-retry, backoff and tower in [BENCHMARKS.md](",
    env!("CARGO_PKG_REPOSITORY"),
    "/blob/main/BENCHMARKS.md)."
)]
//!
//! [`Retryable::retry`]: retry::Retryable::retry
//! [`BlockingRetryable::retry_blocking`]: retry::BlockingRetryable::retry_blocking
//! [`Hedgeable::hedge`]: hedge::Hedgeable::hedge
#![cfg_attr(feature = "tokio", doc = "[`TokioClock`]: clock::TokioClock")]
#![cfg_attr(
    not(feature = "tokio"),
    doc = "[`TokioClock`]: https://docs.rs/steadfast/latest/steadfast/clock/struct.TokioClock.html"
)]
#![cfg_attr(
    feature = "futures-timer",
    doc = "[`FuturesTimerClock`]: clock::FuturesTimerClock"
)]
#![cfg_attr(
    not(feature = "futures-timer"),
    doc = "[`FuturesTimerClock`]: https://docs.rs/steadfast/latest/steadfast/clock/struct.FuturesTimerClock.html"
)]
#![cfg_attr(feature = "async-io", doc = "[`AsyncIoClock`]: clock::AsyncIoClock")]
#![cfg_attr(
    not(feature = "async-io"),
    doc = "[`AsyncIoClock`]: https://docs.rs/steadfast/latest/steadfast/clock/struct.AsyncIoClock.html"
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod backoff;
pub mod cancel;
mod classify;
pub mod clock;
mod config_error;
pub mod control;
pub mod deadline;
mod error;
pub mod hedge;
pub mod policy;
pub mod retry;
mod rng;

pub use backoff::{Backoff, GrpcConnectionBackoff, Jitter, Schedule, ScheduleState};
pub use cancel::CancelToken;
pub use classify::{AnyError, Classify, ClassifyFn, Verdict, When};
pub use clock::{AsyncClock, Clock};
pub use config_error::ConfigError;
pub use control::{Outcome, Refusal, RetryControl};
pub use deadline::Deadline;
pub use error::RetryError;
pub use hedge::{
    HedgeAction, HedgeDecision, HedgeError, HedgePolicy, HedgeState, HedgeStats, Hedgeable,
};
pub use policy::{CallState, Decision, RetryPolicy, RetryPolicyBuilder, StopReason};
pub use retry::{Attempt, BlockingRetryable, Notice, Report, Retryable};
pub use rng::Rng;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
