//! # steadfast-sim
//!
//! A discrete-event simulator that shows what backoff, retry control and
//! hedging strategies do to a server. It drives steadfast's **real** schedules,
//! retry policies and controls on virtual time: every delay comes from a
//! [`Schedule::next_delay`](steadfast::backoff::Schedule::next_delay), every retry
//! decision from the retry engine, every admission or refusal from a
//! [`RetryControl`](steadfast::RetryControl), every hedge from a
//! [`HedgePolicy`](steadfast::HedgePolicy), every rate limit's admission
//! from a [`RateLimit`](steadfast::rate::RateLimit). The simulator models
//! only the world around them: clients, a server with a capacity or a
//! provider with a quota, outages, latency.
//!
//! Scenarios:
//! - [`herd`]: clients reconnecting after an outage, per jitter strategy;
//! - [`storm`]: a retry storm during an incident, per retry control;
//! - [`metastable`]: a short trigger and a collapse that outlives it (a
//!   metastable failure), per retry strategy;
//! - [`tail`]: hedged requests against a heavy-tailed latency, per hedging
//!   delay (the core's `HedgePolicy` and `AdaptiveDelay`);
//! - [`breaker`]: a dependency down for a while, with and without a circuit
//!   breaker (the core's `CircuitBreaker`, alone and with a retry budget);
//! - [`overload`]: a server whose capacity drops and recovers, under a fixed
//!   arrival rate, with no concurrency limit, static limits and the core's
//!   adaptive limits (`ConcurrencyLimit` with AIMD, Vegas, Gradient2);
//! - [`quota`]: many clients sharing one provider's quota, which answers
//!   429 with `Retry-After`: no limit (retries ignoring or honouring the
//!   hint), per-client limits and one shared limit (the core's
//!   `RateLimit`, refusing at once or waiting);
//! - [`replicas`]: one bad replica among good ones, with retries anywhere,
//!   retries elsewhere (the core's `Endpoints` set in the gate) and retries
//!   elsewhere with outlier detection.
//!
//! ```no_run
//! let report = steadfast_sim::run_all(&steadfast_sim::SimConfig::default())?;
//! print!("{}", report.summary());
//! report.write_to(std::path::Path::new("steadfast-report"))?;
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```
//!
//! Same seed, same numbers, bit for bit: one seeded [`Rng`](steadfast::backoff::Rng)
//! per simulation, forked per client, and an event queue ordered by (time,
//! sequence number).
#![warn(missing_docs)]

mod agreement;
pub mod dist;
pub mod engine;
mod error;
pub mod metrics;
pub mod report;
mod scenario;
mod serde_util;
pub mod server;

pub use agreement::Agreement;
pub use dist::Latency;
pub use error::SimError;
pub use report::{Report, Scenario, SimConfig, run_all};
pub use scenario::{
    ScenarioResult, StrategyResult, breaker, herd, metastable, overload, quota, replicas, storm,
    tail,
};
