//! # steadfast
//!
//! Calls over the network that survive failure: backoff schedules, a retry
//! engine (async and blocking), deadlines that propagate, hedged requests and
//! adaptive retry control, all driven by one decision engine.
//!
//! See the crate README and `ARCHITECTURE.md` for the tour and the map.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]

pub mod backoff;
pub mod cancel;
pub mod clock;
mod config_error;
pub mod control;
pub mod deadline;
mod rng;

pub use backoff::{Backoff, GrpcConnectionBackoff, Jitter, Schedule, ScheduleState};
pub use cancel::CancelToken;
pub use clock::{AsyncClock, Clock};
pub use config_error::ConfigError;
pub use control::{Outcome, Refusal, RetryControl};
pub use deadline::Deadline;
pub use rng::Rng;
