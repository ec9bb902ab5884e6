//! **Chaos**: faults injected on purpose, so a test can prove that a
//! service survives them before production does it.
//!
//! A [`Chaos`] is a plain value, like a policy: the faults (a latency with
//! jitter, an error, a substituted outcome), each at its own
//! [`InjectionRate`] and rolled with its own random draw (gRFC A33's
//! compounding), a ceiling on the faults active at once, a seed, and a
//! switch that is **off unless turned on**. Executors drive it:
//! [`Chaos::inject`] around one call's future (what the tower layer, the
//! HTTP client and the gRPC layer run), [`Chaos::inject_blocking`] around a
//! blocking call, [`Chaos::wrap`] around an operation for the core's retry
//! and hedge executors. Latencies are slept on the executor's clock, so a
//! seeded test on virtual time is exactly repeatable and takes no time.
//!
//! On the server side, [`Chaos::draw_asked`] takes the faults a request
//! asks for (Envoy's `x-envoy-fault-*` headers, read by the HTTP crate's
//! server layer), each capped by the configured rate.

mod future;
mod injection;
mod rate;
mod roll;
mod value;

pub use future::{ChaosFuture, Chaotic};
pub use injection::{FaultKind, Injection};
pub use rate::InjectionRate;
pub use value::{Asked, Chaos, ChaosBuilder, ChaosStats, ChaosSwitch};

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;
