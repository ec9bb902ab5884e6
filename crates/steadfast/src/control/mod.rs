//! Adaptive retry control: shared objects that decide whether a retry (or a
//! hedge, or even a first attempt) may happen at all.
//!
//! Retries help against a blip and hurt during an outage: if every client
//! retries three times, a struggling server sees three times its load just
//! when it can least take it. A control watches the outcomes of every call
//! that shares it and, when things look bad, refuses retries (and hedges) as
//! a group. A policy still owns delays and attempt counts; a control only
//! says yes or no.
//!
//! | control | rule | source |
//! |---|---|---|
//! | [`FailureWindow`] | refuse while more than `threshold` of the last `8·n` attempts failed | ring of bits |
//! | [`TokenBucket`] | tokens: failure −1, success +ratio; refuse while tokens ≤ max/2 | gRFC A6 retry throttling |
//! | [`RetryBudget`] | retries ≤ percent of recent calls + a minimum per second | Finagle `RetryBudget` |
//! | [`AdaptiveThrottle`] | reject locally with probability `max(0, (req − K·acc) / (req + 1))` | Google SRE book, "Handling Overload" |
//! | [`AllOf`] | every member must allow; refunds the members that had already said yes | steadfast |
//!
//! Every control lives behind an `Arc`, is lock-free (atomic words only; no
//! mutex on any path), exposes a typed `snapshot()` for telemetry, emits a
//! `tracing` event at `info` level when it starts refusing and when it
//! recovers, and names itself in the [`Refusal`] it returns.
//!
//! The retry engine, the hedger, the tower layer and the gRPC layer all take
//! an `Arc<dyn RetryControl>`; give the *same* object to the retry policy and
//! the hedging policy so hedges cannot bypass retry control:
//!
//! ```
//! use std::sync::Arc;
//! use steadfast::control::{AllOf, RetryBudget, RetryControl, TokenBucket};
//!
//! # fn main() -> Result<(), steadfast::ConfigError> {
//! let shared: Arc<dyn RetryControl> = Arc::new(AllOf::new(vec![
//!     Arc::new(TokenBucket::builder().max_tokens(10).token_ratio(0.1).build()?),
//!     Arc::new(RetryBudget::builder().percent(10.0).build()?),
//! ]));
//! let for_retries = Arc::clone(&shared);
//! let for_hedges = Arc::clone(&shared);
//! assert!(for_retries.admit().is_ok());
//! assert!(for_hedges.allow_retry().is_ok());
//! # Ok(()) }
//! ```
//!
//! ## Model checking
//!
//! The atomics come from a small shim that switches to `loom`'s under
//! `--cfg loom`; the model tests (no lost update, no torn read, no overdraw
//! under two or three threads) run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p steadfast --release --lib control::
//! ```

mod adaptive_throttle;
mod all_of;
mod budget;
mod failure_window;
mod slots;
pub(crate) mod sync;
mod token_bucket;

use std::fmt;
use std::sync::Arc;

pub use adaptive_throttle::{AdaptiveThrottle, AdaptiveThrottleBuilder, AdaptiveThrottleSnapshot};
pub use all_of::{AllOf, AllOfSnapshot};
pub use budget::{RetryBudget, RetryBudgetBuilder, RetryBudgetSnapshot};
pub use failure_window::{FailureWindow, FailureWindowBuilder, FailureWindowSnapshot};
pub use token_bucket::{TokenBucket, TokenBucketBuilder, TokenBucketSnapshot};

use sync::{AtomicBool, Ordering};

/// What happened to one attempt, as a control sees it.
///
/// ```
/// use steadfast::control::Outcome;
/// assert_ne!(Outcome::Success, Outcome::RetryableFailure);
/// ```
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
///
/// ```
/// use steadfast::control::Refusal;
/// let refusal = Refusal { by: "token bucket" };
/// assert_eq!(refusal.to_string(), "refused by token bucket");
/// ```
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

/// A permission a control gave and may take back: see
/// [`RetryControl::refund`].
///
/// ```
/// use steadfast::control::Grant;
/// assert_ne!(Grant::Admit, Grant::Retry);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grant {
    /// An `Ok` from [`RetryControl::admit`].
    Admit,
    /// An `Ok` from [`RetryControl::allow_retry`].
    Retry,
}

/// A shared decider of whether a call may go (again).
///
/// Executors call, in order: [`admit`](Self::admit) before a call's first
/// attempt, [`record`](Self::record) after every attempt that was classified
/// (successes and retryable failures; a permanent error is reported as a
/// [`Outcome::Success`] only by controls that choose to), and
/// [`allow_retry`](Self::allow_retry) before every retry or hedge.
///
/// ```
/// use steadfast::control::{Outcome, Refusal, RetryControl};
///
/// /// Allows retries only while the last attempt succeeded.
/// #[derive(Debug, Default)]
/// struct LastOutcome(std::sync::atomic::AtomicBool);
///
/// impl RetryControl for LastOutcome {
///     fn record(&self, outcome: Outcome) {
///         let failed = outcome == Outcome::RetryableFailure;
///         self.0.store(failed, std::sync::atomic::Ordering::Relaxed);
///     }
///     fn allow_retry(&self) -> Result<(), Refusal> {
///         if self.0.load(std::sync::atomic::Ordering::Relaxed) {
///             Err(Refusal { by: "last outcome" })
///         } else {
///             Ok(())
///         }
///     }
/// }
///
/// let control = LastOutcome::default();
/// control.record(Outcome::RetryableFailure);
/// assert_eq!(control.allow_retry(), Err(Refusal { by: "last outcome" }));
/// ```
pub trait RetryControl: fmt::Debug + Send + Sync {
    /// The name this control gives in its [`Refusal`]s and telemetry (for
    /// example `"token bucket"`).
    fn name(&self) -> &'static str {
        "retry control"
    }

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

    /// Takes back one permission this control granted when the attempt it
    /// allowed will not be sent after all (another control refused it, or
    /// the executor gave up for its own reason). Controls whose `Ok` costs
    /// nothing ignore it (the default); a [`RetryBudget`] gives the deposit
    /// or the withdrawal back. Call it at most once per `Ok`.
    fn refund(&self, grant: Grant) {
        let _ = grant;
    }
}

impl<C: RetryControl + ?Sized> RetryControl for Arc<C> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn admit(&self) -> Result<(), Refusal> {
        (**self).admit()
    }
    fn record(&self, outcome: Outcome) {
        (**self).record(outcome);
    }
    fn allow_retry(&self) -> Result<(), Refusal> {
        (**self).allow_retry()
    }
    fn refund(&self, grant: Grant) {
        (**self).refund(grant);
    }
}

/// Race-safe detection of the "started refusing" / "recovered" transitions
/// of controls whose state is only known at decision time: a flag flipped
/// with `swap`, so exactly one of several racing threads reports each flip.
#[derive(Debug)]
pub(crate) struct RefusingFlag {
    refusing: AtomicBool,
}

impl RefusingFlag {
    pub(crate) fn new() -> Self {
        Self {
            refusing: AtomicBool::new(false),
        }
    }

    /// Whether the last decision was a refusal.
    pub(crate) fn get(&self) -> bool {
        self.refusing.load(Ordering::Relaxed)
    }

    /// Notes a decision; returns `Some(now_refusing)` when this call flipped
    /// the flag (and so must report the transition).
    #[inline]
    pub(crate) fn note(&self, refused: bool) -> Option<bool> {
        // A plain load first keeps the common case (no change) read-only.
        if self.refusing.load(Ordering::Relaxed) == refused {
            return None;
        }
        (self.refusing.swap(refused, Ordering::AcqRel) != refused).then_some(refused)
    }
}

/// Emits the transition events every control shares.
pub(crate) fn report_transition(control: &'static str, now_refusing: bool, state: &dyn fmt::Debug) {
    if now_refusing {
        tracing::info!(control, state = ?state, "retry control started refusing");
    } else {
        tracing::info!(control, state = ?state, "retry control recovered");
    }
}
