// The front page: the crate README (the tour, shared with crates.io, so the
// two cannot drift; its examples run as doctests here), then what only
// rustdoc can show: which type to reach for, with links, and the modules.
#![doc = include_str!("../README.md")]
//!
//! ## Which type to reach for
//!
//! The crate root holds what a program writes; everything that drives the
//! engine (per-call states, decisions, the output forms) is public in its
//! module.
//!
//! | you want to | reach for |
//! |---|---|
//! | retry an async call | [`Retryable::retry`] on any `FnMut(Attempt) -> Future`, with a [`RetryPolicy`] (built by [`RetryPolicy::builder`], shared by every call) |
//! | retry a blocking call | [`BlockingRetryable::retry_blocking`], same policy |
//! | cut the latency tail with a second copy | [`Hedgeable::hedge`] with a [`HedgePolicy`]; [`policy::AdaptiveDelay`] for a delay that follows a latency quantile |
//! | know which attempt this is, its time left, the wait before it | [`Attempt`] (`number`, `deadline`, `waited`, [`Attempt::time_left`]) |
//! | pick the waits between attempts | [`Backoff`]: `constant`, `linear`, `exponential`, `fibonacci`, `decorrelated`, `grpc_go`, `grpc_a6`... with a [`Jitter`]; [`backoff::GrpcConnectionBackoff`] for reconnects; any [`backoff::Schedule`] of yours |
//! | say which outcomes to retry, and honour a server's hint | `.when(predicate)`, or `.classify(..)` returning a [`Verdict`] (`Success`, `Retry`, `RetryAfter(hint)`, `Stop`, and `StopSending`: no more attempts, copies in flight run on); a [`Classify`] type of yours |
//! | know why a call gave up | [`RetryError`] (retried or hedged alike) and its [`StopReason`] |
//! | know how a call ended, success or not (attempts made, time waited, a retried `Ok` that ran out, the copies of a hedge) | `.report()`: a [`Report`]; without the result, its [`call::Ending`] |
//! | log or measure each retry | `.notify(..)`: a hook that gets a [`Notice`] (attempt, error, wait, time left) before each wait |
//! | bound a whole call chain in time | [`Deadline`]; [`deadline::scope`] / [`deadline::scope_async`] to set the ambient one, [`deadline::current`] to read it |
//! | send the time left to the next service, read it back | [`deadline::DeadlineHeader`] (`x-steadfast-timeout`, or `grpc-timeout`), [`deadline::GrpcTimeout`], [`deadline::TimeBudget`] |
//! | stop a server's work when its caller stops waiting | [`deadline::DeadlineGuard`], [`deadline::timeout_at`] |
//! | connect, retrying until a deadline | [`retry::Connector`] (the gRPC connection backoff) |
//! | keep retries from becoming a storm, across calls | a [`RetryControl`] shared through an `Arc`: [`control::RetryBudget`], [`control::TokenBucket`] (gRFC A6), [`control::AdaptiveThrottle`], [`control::FailureWindow`] |
//! | stop calling a dependency that is down | [`control::CircuitBreaker`]; several controls at once: [`control::AllOf`] |
//! | bound how many calls are in flight at once (a bulkhead, or a limit that finds the dependency's capacity) | [`limit::ConcurrencyLimit`] (`fixed(n)`, optional queue; `adaptive(..)` with [`limit::Gradient2`], [`limit::Aimd`], [`limit::Vegas`]), set with `.concurrency_limit(..)` on either builder; a refusal is [`StopReason::LimitReached`] |
//! | keep under a quota (100 calls a second, per key or for the process) | [`rate::RateLimit`] (one or more [`rate::Quota`]s, GCRA; [`rate::KeyedRateLimit`] per key), set with `.rate_limit(..)` (refuse at once) or `.rate_limit_waiting(..)` on the retry builder, `.rate_limit(..)` on the hedge builder; a refusal is [`StopReason::Throttled`] with the wait in [`RetryError::retry_after`] |
//! | bound retries and hedges alike (one cap on any wait, one overall limit, one control) | [`policy::Limits`], set on either builder with `.limits(..)`; [`policy::Limits::wait`] says the wait a server's hint really gets |
//! | stop a call from outside | [`CancelToken`] (`.cancel_on(token)`) |
//! | test retries without waiting | [`clock::VirtualClock`] (`.clock(clock)`) |
//! | wait on tokio, or on another executor | [`TokioClock`] (the default, feature `tokio`), [`FuturesTimerClock`] (feature `futures-timer`), [`AsyncIoClock`] (feature `async-io`) |
//! | drive the engine yourself (a simulator, an executor of your own) | [`RetryPolicy::decide`] with a [`policy::CallState`]; [`HedgePolicy::send_due`] and [`HedgePolicy::on_outcome`] with a [`policy::HedgeState`]; the words they share in [`call`] |
//! | the same in a tower stack, an HTTP client, a gRPC channel | `steadfast-tower`, `steadfast-http`, `steadfast-grpc` (see [The rest of the workspace](#the-rest-of-the-workspace)) |
//! | retry a program from a shell script | the `steadfast` command (`steadfast-cli`): `steadfast run --attempts 5 -- ./deploy.sh` |
//!
//! ## Modules
//!
//! From the bottom up: each module uses only those above it in this list,
//! and `deadline`, `clock` and `cancel`, which any module may use.
//!
//! - [`call`]: the words every executor and integration shares: the
//!   attempt, the verdict, the stop reason, the operation, the error and
//!   the report of a call.
//! - [`backoff`]: the schedules, their jitter and limits; how names from
//!   other libraries map onto them.
//! - [`classify`]: classifiers, from an outcome to a [`Verdict`].
//! - [`control`]: budgets, throttles and the circuit breaker, shared by
//!   retries and hedges.
//! - [`limit`]: concurrency limits, fixed and adaptive: a slot per attempt.
//! - [`rate`]: rate limits (GCRA): quotas, combined and per key; a turn per attempt.
//! - [`endpoint`]: the replicas a call may go to: their load, the pick,
//!   outlier detection (gRFC A50, Envoy).
//! - [`policy`]: the decision engine: [`RetryPolicy`], [`HedgePolicy`], and
//!   the [`policy::Limits`] they share.
//! - [`retry`]: the retry executors, async and blocking.
//! - [`hedge`]: the hedging executor.
//! - [`deadline`]: deadlines, the ambient deadline, the wire formats, the
//!   server side.
//! - [`clock`]: time, injected: the real clocks and the virtual one.
//! - [`cancel`]: explicit cancellation ([`CancelToken`]).
//!
//! How the pieces fit (the flow of one call, the invariants) is in
//! `ARCHITECTURE.md`, and the speed against backon, tokio-retry, backoff and
//! tower in `BENCHMARKS.md`, both at the root of the steadfast workspace's
//! source (they are not part of this package).
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
pub mod call;
pub mod cancel;
pub mod chaos;
pub mod classify;
pub mod clock;
mod config_error;
pub mod control;
pub mod deadline;
pub mod endpoint;
pub mod fallback;
pub mod hedge;
pub mod limit;
pub mod policy;
pub mod rate;
pub mod retry;
mod rng;
mod sync;
pub mod telemetry;

// The front door: what a program writes. Everything that drives the engine
// (per-call states, decisions, the output forms, the schedules' own state)
// stays public in its module.
pub use backoff::{Backoff, Jitter};
pub use call::{Attempt, Report, RetryError, StopReason, Verdict};
pub use cancel::CancelToken;
pub use classify::Classify;
pub use config_error::ConfigError;
pub use control::RetryControl;
pub use deadline::Deadline;
pub use hedge::Hedgeable;
pub use policy::{HedgePolicy, RetryPolicy};
pub use retry::{BlockingRetryable, Notice, Retryable};
