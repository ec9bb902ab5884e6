//! Several controls as one: every member must allow.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::{Grant, Outcome, Refusal, RetryControl};
use crate::sync::{AtomicU64, Ordering};

/// Several controls consulted as one: a call, retry or hedge goes only if
/// *every* member allows it. Give the same `AllOf` (as an
/// `Arc<dyn RetryControl>`) to the retry policy and the hedging policy, and
/// hedges draw on the same budget as retries.
///
/// **Semantics.**
/// - [`admit`](RetryControl::admit) and [`allow_retry`](RetryControl::allow_retry)
///   ask the members in order and stop at the first refusal, which is
///   returned as is (it names the member that refused). Members after it are
///   not asked.
/// - Members *before* it had already said yes, and some of them paid for it
///   (a [`RetryBudget`](super::RetryBudget) counted a call or withdrew a
///   retry). Since the attempt will not be sent, each of them is
///   [refunded](RetryControl::refund), most recent first: a refused retry
///   costs no member anything. (An [`AdaptiveThrottle`](super::AdaptiveThrottle)
///   keeps counting the request, as its formula counts every locally
///   rejected request.)
/// - [`record`](RetryControl::record) goes to every member.
/// - [`refund`](RetryControl::refund) goes to every member.
/// - [`retry_after`](RetryControl::retry_after) asks the members in
///   order; the first that knows (the one named in the refusal) answers.
/// - [`record_timed`](RetryControl::record_timed) goes to every member (each
///   keeps or drops the duration); durations are wanted when any member
///   wants them.
/// - With no members, everything is allowed.
///
/// Put the cheapest and most often refusing member first: later members are
/// not even asked once one refuses.
///
/// ```
/// use std::sync::Arc;
/// use steadfast::control::{AllOf, Outcome, RetryBudget, RetryControl, TokenBucket};
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// let budget = Arc::new(RetryBudget::builder().percent(100.0).min_per_sec(0).build()?);
/// let bucket = Arc::new(TokenBucket::builder().max_tokens(2).build()?);
/// let both = AllOf::new(vec![budget.clone(), bucket.clone()]);
///
/// both.admit().unwrap(); // one call: one retry's worth of budget
/// both.record(Outcome::RetryableFailure); // bucket: 1 token <= 2 / 2
/// assert_eq!(both.allow_retry().unwrap_err().by, "token bucket");
/// // The budget granted the retry first, then got it back.
/// assert_eq!(budget.snapshot().retries, 0);
/// assert_eq!(both.snapshot().refusals, vec![("retry budget", 0), ("token bucket", 1)]);
/// # Ok(()) }
/// ```
pub struct AllOf {
    members: Box<[Arc<dyn RetryControl>]>,
    refusals: Box<[AtomicU64]>,
}

/// How often each member of an [`AllOf`] refused, for telemetry.
///
/// ```
/// use steadfast::control::AllOf;
/// assert!(AllOf::new(vec![]).snapshot().refusals.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllOfSnapshot {
    /// `(name, refusals)` per member, in order (names from
    /// [`RetryControl::name`]).
    pub refusals: Vec<(&'static str, u64)>,
}

impl AllOf {
    /// Consults `members` in order.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use steadfast::control::{AllOf, FailureWindow, RetryControl};
    /// let one = AllOf::new(vec![Arc::new(FailureWindow::builder().build().unwrap())]);
    /// assert!(one.allow_retry().is_ok());
    /// ```
    #[must_use]
    pub fn new(members: Vec<Arc<dyn RetryControl>>) -> Self {
        let refusals = members.iter().map(|_| AtomicU64::new(0)).collect();
        Self {
            members: members.into_boxed_slice(),
            refusals,
        }
    }

    /// The members, in order.
    ///
    /// ```
    /// use steadfast::control::AllOf;
    /// assert_eq!(AllOf::new(vec![]).members().len(), 0);
    /// ```
    #[must_use]
    pub fn members(&self) -> &[Arc<dyn RetryControl>] {
        &self.members
    }

    /// Refusals per member so far.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use steadfast::control::{AllOf, RetryBudget, RetryControl};
    /// let empty = Arc::new(RetryBudget::builder().min_per_sec(0).build().unwrap());
    /// let all = AllOf::new(vec![empty]);
    /// assert!(all.allow_retry().is_err());
    /// assert_eq!(all.snapshot().refusals, vec![("retry budget", 1)]);
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> AllOfSnapshot {
        let refusals = self
            .refusals
            .iter()
            .zip(self.members.iter())
            .map(|(count, member)| (member.name(), count.load(Ordering::Relaxed)))
            .collect();
        AllOfSnapshot { refusals }
    }

    /// Asks each member with `ask`; on the first refusal refunds the members
    /// that had granted, most recent first.
    #[inline]
    fn consult(
        &self,
        grant: Grant,
        ask: impl Fn(&dyn RetryControl) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        for (i, member) in self.members.iter().enumerate() {
            if let Err(refusal) = ask(&**member) {
                if let Some(count) = self.refusals.get(i) {
                    count.fetch_add(1, Ordering::Relaxed);
                }
                for granted in self.members[..i].iter().rev() {
                    granted.refund(grant);
                }
                return Err(refusal);
            }
        }
        Ok(())
    }
}

impl RetryControl for AllOf {
    fn name(&self) -> &'static str {
        "all of"
    }

    fn admit(&self) -> Result<(), Refusal> {
        self.consult(Grant::Admit, |m| m.admit())
    }

    fn record(&self, outcome: Outcome) {
        for member in &*self.members {
            member.record(outcome);
        }
    }

    fn allow_retry(&self) -> Result<(), Refusal> {
        self.consult(Grant::Retry, |m| m.allow_retry())
    }

    fn refund(&self, grant: Grant) {
        for member in self.members.iter().rev() {
            member.refund(grant);
        }
    }

    fn wants_durations(&self) -> bool {
        self.members.iter().any(RetryControl::wants_durations)
    }

    fn record_timed(&self, outcome: Outcome, duration: Duration) {
        for member in &*self.members {
            member.record_timed(outcome, duration);
        }
    }

    /// Asks the members in order (each answers only for its own name); the
    /// first that knows answers.
    fn retry_after(&self, by: &'static str) -> Option<Duration> {
        self.members.iter().find_map(|m| m.retry_after(by))
    }
}

impl fmt::Debug for AllOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AllOf")
            .field("members", &self.members)
            .field("refusals", &self.snapshot().refusals)
            .finish()
    }
}
