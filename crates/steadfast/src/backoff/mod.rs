//! Backoff schedules: how long to wait before each retry.
//!
//! A schedule is a pure value: given the per-call [`ScheduleState`] and a
//! random source it gives the next delay. It holds no clock and does no I/O,
//! so it is cheap to clone, trivially testable and deterministic under a seed.
//!
//! - [`Backoff`]: the built-in schedules as one `Copy` value — constant,
//!   linear, exponential, shift-exponential, Fibonacci, decorrelated jitter
//!   (AWS and Polly V2), grpc-go, and gRFC A6 (current and legacy) — each
//!   made by a [`BackoffBuilder`] with documented defaults, plus the limits
//!   every schedule shares (`max_attempts` counting the first attempt,
//!   `max_delay`, `min_delay`, `max_total_delay`) and an optional seed.
//! - [`Jitter`]: none, proportional (±f), full, equal, or additive (up to a
//!   fixed amount on top of the curve) — a separate choice, capped by
//!   `max_delay` like the curve.
//! - [`Delays`]: any schedule as an `Iterator<Item = Duration>`.
//! - [`GrpcConnectionBackoff`] / [`ConnectionBackoff`]: gRPC's connection
//!   backoff, with the connect deadline of each attempt.
//!
//! The files are layered, each importing only from those below it:
//!
//! 1. `nanos.rs` (nanosecond arithmetic) and `schedule.rs` ([`Schedule`],
//!    [`ScheduleState`]);
//! 2. the curve math, pure functions of the step, the state's curve memory
//!    and the random source: `linear.rs`, `exponential.rs`, `shift.rs`,
//!    `fibonacci.rs`, `decorrelated.rs`; and the jitter, `jitter.rs`;
//! 3. `kind.rs` (which built-in schedule) and `curve.rs` (its curve and
//!    parameters);
//! 4. `value.rs` (the [`Backoff`] value: fields, defaults, accessors);
//! 5. over the value, `pipeline.rs` (the one pipeline every built-in curve
//!    goes through, and its [`Schedule`] impl) and `builder.rs`
//!    ([`BackoffBuilder`] and its validation);
//! 6. on top, imported by none: `presets.rs` (the constructors:
//!    [`Backoff::exponential`] and its siblings, [`Backoff::named`]),
//!    `delays.rs` (the iterator) and `grpc_connection.rs` (gRPC connection
//!    backoff).
//!
//! # Coming from another library
//!
//! Names differ between libraries; the curves are the same. What to use
//! here for a schedule you know:
//!
//! | library | its schedule | in steadfast |
//! |---|---|---|
//! | lancet (Go) | `RetryWithLinearBackoff` (the same wait every time) | [`Backoff::constant`] |
//! | lancet (Go) | `RetryWithExponentialWithJitterBackoff(interval, base, maxJitter)` | [`Backoff::exponential`] with [`Jitter::Additive`]`(maxJitter)`, and `max_delay(Duration::MAX)` (lancet has no cap) |
//! | pester (Go) | `LinearBackoff` (`n` × base) | [`Backoff::linear`] |
//! | pester (Go) | `ExponentialBackoff` | [`Backoff::exponential`] |
//! | backon (Rust) | `ConstantBuilder`, `ExponentialBuilder`, `FibonacciBuilder` | [`Backoff::constant`], [`Backoff::exponential`], [`Backoff::fibonacci`] |
//! | backon (Rust) | `.with_jitter()` (adds `U(0, min_delay)`; constant: `U(0, delay)`) | [`Jitter::Additive`]`(min_delay)` (or `(delay)`) |
//! | tokio-retry (Rust) | `FixedInterval`, `ExponentialBackoff`, `FibonacciBackoff` | [`Backoff::constant`], [`Backoff::exponential`], [`Backoff::fibonacci`] |
//! | grpc-go | `backoff.DefaultConfig` (reconnects) | [`GrpcConnectionBackoff`] (with connect deadlines), or [`Backoff::grpc_go`] |
//! | gRPC service config | `retryPolicy` backoff (gRFC A6) | [`Backoff::grpc_a6`] (`grpc_a6_legacy` for the pre-2024 full jitter) |
//! | Polly (.NET) | `DelayBackoffType.Constant`, `.Linear`, `.Exponential` | [`Backoff::constant`], [`Backoff::linear`], [`Backoff::exponential`] |
//! | Polly (.NET) | `UseJitter` with `Exponential` (decorrelated jitter V2) | [`Backoff::decorrelated_v2`] |
//! | AWS Architecture Blog | "full", "equal", "decorrelated" jitter | [`Jitter::Full`], [`Jitter::Equal`], [`Backoff::decorrelated`] |
//!
//! lancet's and backon's jitter adds a random amount up to a fixed maximum
//! on top of the curve: that is [`Jitter::Additive`]. One difference: here
//! `max_delay` holds after the addition (as after every jitter), while
//! backon adds after its cap, so on the plateau backon waits up to
//! `max_delay + min_delay` and steadfast `max_delay` exactly. backon's
//! `ExponentialBuilder::default().with_jitter()` (1 s, ×2, max 60 s,
//! 3 retries, plus `U(0, 1 s)`) is, in steadfast:
//!
//! ```
//! use std::time::Duration;
//! use steadfast::{Backoff, Jitter};
//! let backoff = Backoff::exponential()
//!     .initial(Duration::from_secs(1))
//!     .max_delay(Duration::from_secs(60))
//!     .jitter(Jitter::Additive(Duration::from_secs(1)))
//!     .max_attempts(4)
//!     .build()?;
//! let delays: Vec<Duration> = backoff.delays().collect();
//! assert_eq!(delays.len(), 3);
//! assert!(delays[2] >= Duration::from_secs(4) && delays[2] < Duration::from_secs(5));
//! # Ok::<(), steadfast::ConfigError>(())
//! ```
//!
//! # Cost
//!
//! `next_delay` keeps the unjittered envelope in the state and multiplies it
//! once per step: no `powf`, no `Duration::from_secs_f64`, no lock, no
//! allocation. An exponential curve with a whole multiplier (the default ×2)
//! runs in exact integer nanoseconds; other multipliers keep the envelope as
//! `f64` nanoseconds and convert it once per delay. The jitter takes one raw
//! 64-bit random word and applies it with an integer multiply (full jitter:
//! `floor(v * r / 2^64)`, see [`Jitter`]), the limits are precomputed
//! integers, and the state counts in whole nanoseconds. Every step saturates:
//! any step up to `u32::MAX` gives a valid delay, at most `u64::MAX`
//! nanoseconds.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::backoff::{Rng, Schedule, ScheduleState};
//! use steadfast::{Backoff, Jitter};
//!
//! let backoff = Backoff::exponential()
//!     .initial(Duration::from_millis(100))
//!     .max_delay(Duration::from_secs(5))
//!     .jitter(Jitter::Full)
//!     .max_attempts(4)
//!     .build()?;
//! // What an executor does, once a call has failed:
//! let mut state = ScheduleState::new();
//! let mut rng = Rng::seeded_or_entropy(backoff.seed());
//! while let Some(delay) = backoff.next_delay(&mut state, &mut rng) {
//!     assert!(delay <= Duration::from_secs(5));
//! }
//! assert_eq!(state.retries, 3);
//! # Ok::<(), steadfast::ConfigError>(())
//! ```

mod builder;
mod curve;
mod decorrelated;
mod delays;
mod exponential;
mod fibonacci;
mod grpc_connection;
mod jitter;
mod kind;
mod linear;
mod nanos;
mod pipeline;
mod presets;
mod schedule;
mod shift;
#[cfg(test)]
mod tests;
mod value;

pub use builder::BackoffBuilder;
pub use delays::Delays;
pub use grpc_connection::{
    ConnectAttempt, ConnectionBackoff, GrpcConnectionBackoff, GrpcConnectionBackoffBuilder,
};
pub use jitter::Jitter;
pub use schedule::{Schedule, ScheduleState};
pub use value::Backoff;

/// The random source a [`Schedule`] draws its jitter from.
pub use crate::rng::Rng;
