//! Load protection: how many calls may start per unit of time.
//!
//! A [`ConcurrencyLimit`](crate::limit::ConcurrencyLimit) bounds the calls
//! in flight; a rate limit bounds how often they start, which is what a
//! provider's quota ("100 requests per second per key") and a server that
//! must not be flooded both ask for. Every limit here is the generic cell
//! rate algorithm (GCRA): a quota's whole state is one timestamp, moved by
//! one compare-and-swap per call, exact at every instant (no fixed windows
//! whose edges let twice the rate through).
//!
//! - [`Quota`]: `count` per `period`, with a burst (by default `count`).
//!   Over any stretch of time `t`, at most `burst + t / interval` calls are
//!   admitted (the interval is `period / count`): after a quiet spell a
//!   burst comes on top of the rate, so "at most N in any minute" is a
//!   quota of N/2 per minute with a burst of N/2, or N per minute with a
//!   burst of 1 spread evenly.
//! - [`RateLimit`]: one or more quotas that must all admit a call ("10 per
//!   second and 100 per minute"), shared by every clone; weighted calls
//!   ([`check_n`](RateLimit::check_n)); refuse at once with the exact time
//!   until admission ([`RateRefused::retry_after`]), or book the call's turn
//!   within a bound ([`reserve`](RateLimit::reserve)), given back if the
//!   caller goes away.
//! - [`KeyedRateLimit`]: the same quotas per key, in a bounded key set.
//!
//! Time comes from the limit's [`Clock`](crate::clock::Clock), so tests
//! and the simulator run it on virtual time, exactly.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::clock::VirtualClock;
//! use steadfast::rate::{Quota, RateLimit};
//!
//! let clock = VirtualClock::manual();
//! let provider = RateLimit::builder()
//!     .name("geo api")
//!     .quota(Quota::per_second(10)?)
//!     .quota(Quota::per_minute(60)?.with_burst(15)?)
//!     .build_with_clock(clock.clone())?;
//! // A burst of 10, then one per 100 ms...
//! for _ in 0..10 {
//!     provider.check()?;
//! }
//! assert_eq!(provider.check().unwrap_err().retry_after, Some(Duration::from_millis(100)));
//! // ...until the minute's burst of 15 is spent: then one a second.
//! for _ in 0..5 {
//!     clock.advance(Duration::from_millis(100));
//!     provider.check()?;
//! }
//! clock.advance(Duration::from_millis(100));
//! assert_eq!(provider.check().unwrap_err().retry_after, Some(Duration::from_millis(400)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Model checking
//!
//! The compare-and-swap and the give-back of a combined limit are checked
//! with loom (no admission beyond a quota, none lost, under racing calls):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p steadfast --release --lib rate::
//! ```

mod backend;
mod fleet;
mod gcra;
mod key_map;
mod keyed;
mod limiter;
mod over_limit;
mod quota;

#[cfg(all(test, not(loom)))]
mod fleet_tests;
#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

pub use crate::call::RateRefused;
pub use backend::{BackendError, Decision, QuotaBackend, QuotaCheck};
pub use fleet::{
    DEFAULT_BACKEND_TIMEOUT, FleetRateLimit, FleetRateLimitBuilder, FleetRefused, FleetStats,
};
pub use keyed::{DEFAULT_MAX_KEYS, KeyedRateLimit, KeyedRateLimitBuilder};
pub use limiter::{DEFAULT_RATE_LIMIT_NAME, RateLimit, RateLimitBuilder, Reservation};
pub use quota::Quota;
