//! Hedged requests: cut the tail, not the server.
//!
//! When most replies are fast and a few are very slow, a second copy of a
//! slow request, sent after a short delay, usually comes back long before
//! the first would have ("The Tail at Scale", Dean & Barroso, 2013). A
//! hedged call sends its first copy at once and, while no copy has
//! succeeded, one more every *hedging delay*, up to `max_attempts` copies in
//! all (gRFC A6 hedging). **The first success wins** and every other copy is
//! cancelled at once (its future dropped).
//!
//! # Only hedge idempotent operations
//!
//! Every copy may reach a server and run to completion: a hedged call can
//! execute several times. Hedge reads, lookups, and writes that are safe to
//! repeat (a `PUT` of the same value, an operation keyed by a request id the
//! server deduplicates). **Never hedge** a payment, an increment, an append,
//! a message send, or anything else whose repetition changes the outcome.
//!
//! When to hedge, and when not:
//! - hedge when latency has a long tail caused by something that is not the
//!   request itself (a GC pause, a busy replica, a lost packet), and send the
//!   copies to different replicas (see [`Attempt::in_flight`]);
//! - do not hedge when every request is slow (an overloaded server: copies
//!   only add load; use a [`RetryControl`](crate::control::RetryControl) so hedges
//!   stop when failures mount) or when the slowness follows the request (a
//!   big query is slow on every replica);
//! - pick the delay near a high quantile of latency (the 95th percentile
//!   sends about 5 % extra requests): [`AdaptiveDelay`] follows it for you.
//!
//! # Outcomes (gRFC A6)
//!
//! The classifier's [`Verdict`](crate::call::Verdict) for each copy decides:
//!
//! | verdict | effect |
//! |---|---|
//! | `Success` | this copy wins; the others are cancelled |
//! | `Retry` (non-fatal) | the next copy goes **now**, shortcutting the delay |
//! | `RetryAfter(d)` (pushback) | the next copy goes after `d`; later ones `delay` apart from there |
//! | `Stop` (fatal, or pushback "do not retry") | every copy is cancelled; the error is returned |
//!
//! When every copy has failed, the last error is returned in a
//! [`RetryError`] with [`StopReason::Exhausted`](crate::call::StopReason) (one error
//! type for retried and hedged calls; its [`hedge_stats`](RetryError::hedge_stats)
//! says what the copies did). Each
//! copy after the first asks the policy's retry control first; a refused
//! copy is not sent, and neither is any after it. A deadline (the policy's
//! `max_elapsed`, [`Hedge::deadline`], or the [ambient
//! deadline](crate::deadline::current)) bounds the whole call, and every
//! copy runs with it as its ambient deadline.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use steadfast::call::HedgeStats;
//! use steadfast::{Attempt, HedgePolicy, Hedgeable};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let replicas = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];
//! let policy = HedgePolicy::builder(Duration::from_millis(20)).max_attempts(3).build()?;
//! let mut stats = HedgeStats::default();
//!
//! let reply = (|attempt: Attempt| {
//!     // Each copy goes to its own replica: copy n to replica n - 1.
//!     let replica = replicas[(attempt.number - 1) as usize % replicas.len()];
//!     async move {
//!         // Replica 1 is stuck in a GC pause; the others answer in 5 ms.
//!         let ms = if replica == "10.0.0.1" { 5_000 } else { 5 };
//!         tokio::time::sleep(Duration::from_millis(ms)).await;
//!         Ok::<_, std::io::Error>(format!("value from {replica}"))
//!     }
//! })
//! .hedge(&policy)
//! .name("get_user")
//! .on_finish(|s: &HedgeStats| stats = *s)
//! .await?;
//!
//! assert_eq!(reply, "value from 10.0.0.2");
//! assert_eq!((stats.sent, stats.winner, stats.cancelled), (2, Some(2), 1));
//! assert_eq!(stats.elapsed, Duration::from_millis(25)); // not 5 s
//! # Ok(())
//! # }
//! ```
//!
//! # What it costs
//!
//! When the first copy succeeds before the hedging delay, a call reads the
//! clock a few times, arms **one timer** (only if the first poll of the copy
//! is pending; whatever the clock's sleep costs, e.g. a tokio timer entry)
//! and **allocates nothing of its own**: the first copy's future lives inline
//! in the [`HedgeFuture`], and the per-call state is a plain value (no
//! `FuturesUnordered` is made, no task, no `Arc`). A copy whose reply is
//! already there when its hedge falls due is handled first, so no needless
//! hedge is made.
//! Sending the first hedge of a call costs three allocations (the
//! `FuturesUnordered`'s ready queue and stub node, and the copy's task node),
//! each further hedge one more; re-arming the timer for the next copy makes
//! a new sleep. `tests/hedge_allocations.rs` checks these counts with a
//! counting allocator. An [`AdaptiveDelay`] costs one atomic load
//! per call and one ring-buffer store per success.

mod builder;
mod future;

pub use builder::{FinishFn, Hedge, Hedgeable, OnFinish};
pub use future::HedgeFuture;

#[cfg(doc)]
use crate::call::{Attempt, RetryError};
#[cfg(doc)]
use crate::policy::{AdaptiveDelay, HedgePolicy};

#[cfg(test)]
mod tests;
