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
mod classify;
pub mod clock;
mod config_error;
pub mod control;
pub mod deadline;
mod error;
pub mod hedge;
pub mod policy;
pub mod retry;
mod rng;

pub use backoff::{Backoff, GrpcConnectionBackoff, Jitter, Schedule, ScheduleState};
pub use cancel::CancelToken;
pub use classify::{AnyError, Classify, ClassifyFn, Verdict, When};
pub use clock::{AsyncClock, Clock};
pub use config_error::ConfigError;
pub use control::{Outcome, Refusal, RetryControl};
pub use deadline::Deadline;
pub use error::RetryError;
pub use hedge::{
    HedgeAction, HedgeDecision, HedgeError, HedgePolicy, HedgeState, HedgeStats, Hedgeable,
};
pub use policy::{CallState, Decision, RetryPolicy, RetryPolicyBuilder, StopReason};
pub use retry::{Attempt, BlockingRetryable, Notice, Report, Retryable};
pub use rng::Rng;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
