//! Load protection: how many attempts may be in flight at once.
//!
//! Retries, budgets and breakers decide whether to send *again*; a
//! [`ConcurrencyLimit`] decides whether to send *now*. It is a shared value
//! like every control: build it once, hand clones to every policy,
//! service clone and connection that calls the same dependency (they share
//! one set of slots), and every executor takes a slot before each attempt
//! (a retry, a hedged copy) and gives it back after, on every path.
//!
//! - **Fixed** ([`ConcurrencyLimit::fixed`]): a bulkhead of `n` slots, with
//!   an optional bounded [queue](ConcurrencyLimitBuilder::queue) and a
//!   maximum wait in it. A full limit refuses with a [`LimitRefused`] that
//!   names it and says how many were in flight.
//! - **Adaptive** ([`ConcurrencyLimit::adaptive`]): an [`Algorithm`] finds
//!   the concurrency the dependency can take and follows it.
//!   [`Gradient2`] (the default: `ConcurrencyLimit::default()`), [`Aimd`] and
//!   [`Vegas`] carry Netflix concurrency-limits' published rules and
//!   defaults. Every algorithm moves once per sample window (at least 1 s
//!   and 10 attempts by default, [`ConcurrencyLimitBuilder::window`]), does
//!   not grow while fewer than half its slots are in use, and shrinks on a
//!   drop signal ([`Signal::Dropped`]: a timeout, an overload status, a
//!   server's pushback), Gradient2 included.
//!
//! Latency is measured per attempt by the executor that holds the slot
//! (from taking it to giving it back), so a backoff wait or a wait in the
//! queue is never counted as the dependency's latency. Time comes from the
//! limit's [`Clock`](crate::clock::Clock), so tests and the simulator run
//! the algorithms on virtual time, exactly.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::clock::VirtualClock;
//! use steadfast::limit::{Aimd, ConcurrencyLimit, Signal};
//!
//! let clock = VirtualClock::manual();
//! let aimd = Aimd::builder().initial_limit(4).min_limit(1).build()?;
//! let limit = ConcurrencyLimit::adaptive(aimd)
//!     .window(Duration::from_secs(1), 4)
//!     .build_with_clock(clock.clone())?;
//! // A busy second: four attempts at once, all fine.
//! let permits: Vec<_> = (0..4).map(|_| limit.try_acquire()).collect::<Result<_, _>>()?;
//! clock.advance(Duration::from_secs(1));
//! permits.into_iter().for_each(|p| p.finish(Signal::Success));
//! assert_eq!(limit.limit(), 5); // AIMD: +1
//! // Then the dependency starts timing out.
//! let permits: Vec<_> = (0..4).map(|_| limit.try_acquire()).collect::<Result<_, _>>()?;
//! clock.advance(Duration::from_secs(1));
//! permits.into_iter().for_each(|p| p.finish(Signal::Dropped));
//! assert_eq!(limit.limit(), 4); // ×0.9, truncated
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! With the retry engine, set it on the policy: every attempt, first or
//! retry, takes a slot, and a call the limit refuses stops as
//! [`StopReason::LimitReached`](crate::StopReason::LimitReached):
//!
//! ```
//! use steadfast::limit::ConcurrencyLimit;
//! use steadfast::{RetryPolicy, Retryable, StopReason};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = ConcurrencyLimit::fixed(1).name("inventory").build()?;
//! let policy = RetryPolicy::builder().concurrency_limit(pool.clone()).build()?;
//! let held = pool.try_acquire()?; // someone else holds the only slot
//! let err = (|_| async { Ok::<_, std::io::Error>(()) }).retry(&policy).await.unwrap_err();
//! assert_eq!(err.reason(), StopReason::LimitReached);
//! assert_eq!(err.limit_refused().map(|r| r.in_flight), Some(1));
//! drop(held);
//! assert!((|_| async { Ok::<_, std::io::Error>(()) }).retry(&policy).await.is_ok());
//! # Ok(()) }
//! ```
//!
//! ## Model checking
//!
//! The slot accounting is checked with loom (no slot lost or given twice
//! under racing takes, releases and window closes):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p steadfast --release --lib limit::
//! ```
//!
//! `.ci/run` runs them with the controls' models, bounded by
//! `LOOM_MAX_PREEMPTIONS=2`.

mod acquire;
mod aimd;
mod algorithm;
mod concurrency;
mod gradient2;
mod permit;
mod queue;
mod signal;
mod vegas;
mod window;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

/// The name of a limit that was not given one: `"concurrency limit"`.
pub use crate::call::DEFAULT_LIMIT_NAME as DEFAULT_NAME;
pub use crate::call::LimitRefused;
pub use acquire::Acquire;
pub use aimd::{Aimd, AimdBuilder};
pub use algorithm::{AimdStep, Algorithm, AlgorithmState, Window};
pub use concurrency::{ConcurrencyLimit, ConcurrencyLimitBuilder, ConcurrencyLimitSnapshot};
pub use gradient2::{Gradient2, Gradient2Builder};
pub use permit::Permit;
pub use signal::Signal;
pub use vegas::{Vegas, VegasBuilder};
