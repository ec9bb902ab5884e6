//! The policies: the one place that decides *go again, when, or stop*.
//!
//! A policy is configuration: built once, cheap to clone, shared by many
//! calls. Each call keeps its own small state (on the stack), which the
//! policy advances after every attempt. The executors ([`retry`](crate::retry),
//! [`hedge`](crate::hedge)), the simulator and every integration are loops
//! around exactly these values; none holds a rule of its own.
//!
//! - [`RetryPolicy`] with [`CallState`]: one attempt at a time;
//! - [`HedgePolicy`] with [`HedgeState`]: copies that overlap, the first
//!   success wins; its delay a fixed one or an [`AdaptiveDelay`];
//! - [`Limits`]: what both share (the cap on a single wait, the overall
//!   limit, the retry control) and the rules that go with it: the call's
//!   effective deadline, the wait a server's hint will really get
//!   ([`Limits::wait`]), and what the control hears of each verdict
//!   ([`Outcome::of`](crate::control::Outcome::of));
//! - [`gate`]: the one admission before every attempt and hedged copy
//!   (the rate limit, then the concurrency limit: [`Limits::admit`]), and
//!   the [`Ticket`](gate::Ticket) an attempt holds while in flight;
//! - [`Policy`]: what both are to an integration that runs calls under
//!   either.
//!
//! A program names the policies (both are at the crate root), and perhaps
//! [`AdaptiveDelay`] or [`Limits`]. The rest of this module drives the
//! engine: [`CallState`], [`Decision`], [`HedgeState`], [`HedgeAction`],
//! [`HedgeDecision`] and [`Wait`] are for an executor of your own, a
//! simulator or an integration; `.retry(..)` and `.hedge(..)` never make
//! you name them.
//!
//! ## Retrying
//!
//! A [`RetryPolicy`] is configuration: built once, cheap to clone, shared by
//! many calls. Each call keeps its own small [`CallState`] (on the stack),
//! which the policy advances after every attempt with
//! [`RetryPolicy::decide`]. Every executor in steadfast (blocking loop, async
//! future, hedger, simulator, integrations) is a loop around exactly this.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::policy::Decision;
//! use steadfast::{RetryPolicy, StopReason, Verdict};
//! use steadfast::clock::{Clock, VirtualClock};
//! use steadfast::backoff::Backoff;
//!
//! let policy = RetryPolicy::builder()
//!     .max_attempts(3)
//!     .backoff(Backoff::constant(Duration::from_millis(100)).build()?)
//!     .build()?;
//! let clock = VirtualClock::new();
//! let mut call = policy.start(&clock, None);
//! assert_eq!(policy.decide(&mut call, Verdict::Retry, &clock), Decision::Retry(Duration::from_millis(100)));
//! assert_eq!(policy.decide(&mut call, Verdict::Retry, &clock), Decision::Retry(Duration::from_millis(100)));
//! // The third attempt was the last one allowed: attempts count the first.
//! assert_eq!(policy.decide(&mut call, Verdict::Retry, &clock), Decision::Stop(StopReason::Exhausted));
//! # Ok::<(), steadfast::ConfigError>(())
//! ```
//!
//! ## Hedging
//!
//! All the decisions live in [`HedgePolicy`] and a per-call [`HedgeState`]:
//! [`HedgePolicy::start`], [`HedgePolicy::send_due`] (send, wait until, or
//! stop) and [`HedgePolicy::on_outcome`] (succeed, continue, or stop). A
//! simulator drives exactly these on virtual time (the `_at` variants take
//! its own instants). A complete event loop for one simulated call:
//!
//! ```
//! use std::time::{Duration, Instant};
//! use steadfast::policy::{HedgeAction, HedgeDecision};
//! use steadfast::{HedgePolicy, Verdict};
//!
//! let ms = Duration::from_millis;
//! // The simulated world: copy 1 is slow, the others fast.
//! let latency = |copy: u32| if copy == 1 { ms(900) } else { ms(40) };
//!
//! let policy = HedgePolicy::builder(ms(100)).max_attempts(3).build()?;
//! let t0 = Instant::now();
//! let mut now = t0;
//! let mut call = policy.start_at(now, None);
//! let mut in_flight: Vec<(Instant, u32)> = Vec::new(); // (reply time, copy)
//! let (winner, took) = loop {
//!     let wake = loop {
//!         match policy.send_due_at(&mut call, now) {
//!             HedgeAction::Send(a) => in_flight.push((now + latency(a.number), a.number)),
//!             HedgeAction::WaitUntil(t) => break Some(t),
//!             HedgeAction::WaitForOutcome => break None,
//!             HedgeAction::Stop(reason) => panic!("gave up: {reason}"),
//!         }
//!     };
//!     in_flight.sort();
//!     match (in_flight.first().copied(), wake) {
//!         // The next event is a reply.
//!         (Some((at, copy)), w) if w.is_none_or(|w| at <= w) => {
//!             now = at;
//!             in_flight.remove(0);
//!             match policy.on_outcome_at(&mut call, copy, Verdict::Success, now) {
//!                 HedgeDecision::Succeed => break (copy, now - t0),
//!                 other => panic!("unexpected {other:?}"),
//!             }
//!         }
//!         // The next event is a copy falling due.
//!         (_, Some(w)) => now = w,
//!         (_, None) => unreachable!("a reply or a due copy is always next"),
//!     }
//! };
//! // Copy 2 went out at 100 ms and answered at 140 ms; copy 1 is cancelled.
//! assert_eq!((winner, took), (2, ms(140)));
//! assert_eq!(call.stats(now).cancelled, 1);
//! # Ok::<(), steadfast::ConfigError>(())
//! ```
//!

mod call_state;
mod decision;
pub mod gate;
mod hedge;
mod hedge_builder;
mod hedge_delay;
mod hedge_state;
mod interface;
mod limits;
mod retry;

pub use call_state::CallState;
pub use decision::Decision;
pub use hedge::HedgePolicy;
pub use hedge_builder::HedgePolicyBuilder;
pub use hedge_delay::{AdaptiveDelay, AdaptiveDelayBuilder, HedgeDelay, MAX_WINDOW};
pub use hedge_state::{HedgeAction, HedgeDecision, HedgeState};
pub use interface::Policy;
pub use limits::{DEFAULT_MAX_DELAY, Limits, Wait};
pub use retry::{DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_REQUEUES, RetryPolicy, RetryPolicyBuilder};

#[cfg(all(test, not(loom)))]
mod gate_tests;
#[cfg(test)]
mod tests;
