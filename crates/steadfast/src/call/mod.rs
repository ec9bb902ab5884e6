//! The words every executor and integration shares: one attempt, what a
//! classifier says of its outcome, why a call stopped, and how it ended.
//!
//! Retries and hedges are two ways to run the same call, so they speak one
//! language, defined here and nowhere else:
//!
//! - [`Attempt`]: what the operation knows of the attempt it is making (its
//!   number, its deadline, the copies already in flight), and [`AttemptSet`];
//! - [`Operation`]: what makes one attempt's future, and [`TryOperation`],
//!   one whose future gives a `Result` (the success and error types it names);
//! - [`Verdict`]: what a classifier says of one outcome;
//! - [`StopReason`]: why a call stopped without success;
//! - [`RetryError`]: the error of a call that failed, retried or hedged
//!   (with the copies' [`HedgeStats`] when it hedged);
//! - [`Report`]: the result together with how the call ended ([`Ending`]), and
//!   [`Finish`] with its two forms [`Plain`] (the result alone, the default)
//!   and [`Reported`] (the whole report);
//! - [`Lend`]: how an executor holds its policy (by value, `&`, `Arc`);
//! - [`EndpointId`] and [`Answer`]: the endpoint an attempt went to, and
//!   what its outcome says of that endpoint.
//!
//! A program names the first few (the crate root re-exports [`Attempt`],
//! [`Verdict`], [`StopReason`], [`RetryError`] and [`Report`]); the others
//! ([`Operation`], [`Finish`], [`Plain`], [`Reported`], [`Lend`],
//! [`AttemptSet`], [`Ending`]) are for code that drives or wraps the
//! executors.
//!
//! This module depends on nothing of the crate's but [`Deadline`]: the
//! policies, the controls, the executors and the integrations are built on
//! it, never the other way round.
//!
//! [`Deadline`]: crate::deadline::Deadline

mod attempt;
mod attempt_set;
mod endpoint;
mod error;
mod lend;
mod operation;
mod refused;
mod report;
mod stats;
mod stop;
mod verdict;

pub use attempt::Attempt;
pub use attempt_set::{AttemptSet, AttemptSetIter, MAX_HEDGE_ATTEMPTS};
pub use endpoint::{Answer, EndpointId};
pub use error::RetryError;
pub use lend::Lend;
pub use operation::{Operation, TryOperation};
pub use refused::{DEFAULT_LIMIT_NAME, LimitRefused, NO_ENDPOINT, RETRY_CAP, RateRefused, Refused};
pub use report::{Ending, Finish, Plain, Report, Reported};
pub use stats::HedgeStats;
pub use stop::StopReason;
pub use verdict::Verdict;

pub(crate) use endpoint::Tried;
pub(crate) use report::{Ended, ended_early};
