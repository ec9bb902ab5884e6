//! Fleet-wide rate limits on Redis, for [steadfast](https://docs.rs/steadfast).
//!
//! A process alone keeps a provider's quota with a
//! [`RateLimit`](steadfast::rate::RateLimit); a fleet of instances sharing
//! one quota needs the quota's state in one place. [`RedisQuota`] keeps it
//! in Redis, an engine most fleets already run: the same generic cell rate
//! algorithm as the core's limits, run atomically by a Lua script inside
//! Redis (loaded once, called by its SHA), one key per quota and limit key.
//! It is a [`QuotaBackend`](steadfast::rate::QuotaBackend): put it in a
//! [`FleetRateLimit`](steadfast::rate::FleetRateLimit), which around every
//! check bounds the wait for Redis (20 ms by default), remembers keys over
//! their quota until their time (a hot key costs Redis nothing), and fails
//! open under a local limit or closed, as you choose when you build it.
//!
//! ```no_run
//! use steadfast::rate::{FleetRateLimit, FleetRefused, Quota};
//! use steadfast_redis::RedisQuota;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let quota = FleetRateLimit::builder(RedisQuota::open("redis://127.0.0.1:6379/")?)
//!     .name("payments api")
//!     .quota(Quota::per_second(50)?)
//!     .quota(Quota::per_minute(1_000)?)
//!     .fail_closed() // over-spending this quota costs money: refuse while Redis is away
//!     .build()?;
//! match quota.check("merchant-42").await {
//!     Ok(()) => { /* call the provider */ }
//!     Err(FleetRefused::Quota(refused)) => println!("back in {:?}", refused.retry_after),
//!     Err(other) => println!("{other}"),
//! }
//! # Ok(()) }
//! ```
//!
//! `redis` is re-exported, so a [`redis::Client`] of your own (TLS, a
//! password, a unix socket) builds a backend with [`RedisQuota::builder`].

mod quota;
mod reply;

pub use quota::{DEFAULT_PREFIX, RedisQuota, RedisQuotaBuilder};
pub use redis;

/// The crate README's program, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
