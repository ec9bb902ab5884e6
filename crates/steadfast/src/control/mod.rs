//! Adaptive retry control: shared objects that decide whether a retry (or a
//! hedge, or even a first attempt) may happen at all.
//!
//! A policy still owns delays and attempt counts; a control only says yes or
//! no, from what it has seen of recent outcomes across every call that shares
//! it. Controls live behind an `Arc` and are lock-free.

use std::fmt;
use std::sync::Arc;

/// What happened to one attempt, as a control sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The attempt succeeded (or failed in a way that says the server is
    /// healthy, such as a permanent client error).
    Success,
    /// The attempt failed in a way that would be retried: the server may be
    /// in trouble.
    RetryableFailure,
}

/// Why a control refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// Which control refused (for example `"token bucket"`).
    pub by: &'static str,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused by {}", self.by)
    }
}

impl std::error::Error for Refusal {}

/// A shared decider of whether a call may go (again).
///
/// Executors call, in order: [`admit`](Self::admit) before a call's first
/// attempt, [`record`](Self::record) after every attempt that was classified
/// (successes and retryable failures; a permanent error is reported as a
/// [`Outcome::Success`] only by controls that choose to), and
/// [`allow_retry`](Self::allow_retry) before every retry or hedge.
pub trait RetryControl: fmt::Debug + Send + Sync {
    /// May a new call start? Only client-side throttling refuses first
    /// attempts; the default admits every call.
    fn admit(&self) -> Result<(), Refusal> {
        Ok(())
    }

    /// Reports the outcome of one attempt.
    fn record(&self, outcome: Outcome);

    /// May one more attempt (a retry or a hedge) be sent now? A `Ok` may
    /// consume budget.
    fn allow_retry(&self) -> Result<(), Refusal>;
}

impl<C: RetryControl + ?Sized> RetryControl for Arc<C> {
    fn admit(&self) -> Result<(), Refusal> {
        (**self).admit()
    }
    fn record(&self, outcome: Outcome) {
        (**self).record(outcome);
    }
    fn allow_retry(&self) -> Result<(), Refusal> {
        (**self).allow_retry()
    }
}
