//! The per-call state of a hedged call, and what the hedging policy tells
//! its driver to do.

use std::time::{Duration, Instant};

use super::gate::Ticket;
use crate::call::{
    Attempt, AttemptSet, EndpointId, HedgeStats, LimitRefused, Refused, StopReason, Tried,
};
use crate::deadline::Deadline;

#[cfg(doc)]
use super::HedgePolicy;
#[cfg(doc)]
use crate::call::Verdict;

/// What a hedged call should do now, from [`HedgePolicy::send_due`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeAction {
    /// Send this copy now (it is already counted as sent and in flight),
    /// then ask again.
    Send(Attempt),
    /// Nothing to send yet: wait for an outcome, or until this instant
    /// (the next copy is due, or the deadline passes), whichever is first.
    WaitUntil(Instant),
    /// Nothing more will be sent and there is no deadline: wait for an
    /// outcome.
    WaitForOutcome,
    /// The call is over without a success: cancel every copy in flight.
    Stop(StopReason),
}

/// What one copy's outcome means for the call, from [`HedgePolicy::on_outcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HedgeDecision {
    /// This copy won: return its outcome and cancel every other copy.
    Succeed,
    /// Keep going: ask [`HedgePolicy::send_due`] what to do next.
    Continue,
    /// Give up: cancel every copy in flight and return this outcome's error.
    Stop(StopReason),
}

/// The per-call state a [`HedgePolicy`] advances: plain data (a few
/// instants and counters, no allocation), made when a call starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HedgeState {
    pub(super) started: Instant,
    pub(super) deadline: Option<Deadline>,
    pub(super) delay: Duration,
    pub(super) sent: u32,
    /// Copies requeued (sent, but no server processed them): not counted
    /// among `max_attempts`.
    pub(super) requeues: u32,
    pub(super) failed: u32,
    pub(super) in_flight: AttemptSet,
    pub(super) next_due: Option<Instant>,
    pub(super) hold_until: Option<Instant>,
    /// Who refused a copy (the control, or the gate's rate or concurrency
    /// limit), if someone did: no copy is sent after a refusal.
    pub(super) refused: Option<Refused>,
    pub(super) cut_by_deadline: bool,
    pub(super) stopped: bool,
    pub(super) winner: Option<u32>,
    /// When the last copy in flight failed, while none is in flight.
    pub(super) idle_since: Option<Instant>,
    /// The endpoints the copies went to (under an endpoint set).
    pub(super) tried: Tried,
}

impl HedgeState {
    /// The endpoints the call's copies went to, in the order sent (the
    /// last eight), under a policy with an [endpoint set](crate::endpoint::Endpoints).
    pub fn endpoints(&self) -> impl Iterator<Item = EndpointId> + '_ {
        self.tried.ids()
    }

    /// The endpoints the next copy's pick avoids: those the call's copies
    /// went to, so copies go to distinct endpoints while there are enough.
    #[must_use]
    pub fn avoid(&self) -> &[EndpointId] {
        self.tried.avoid()
    }

    /// Records where the copy holding `ticket` went (its endpoint, if the
    /// gate picked one).
    pub fn went_to(&mut self, ticket: &Ticket) {
        if let Some((id, label)) = ticket.picked() {
            self.tried.push(id, label);
        }
    }

    /// Where the call's copies went, for its error.
    pub(crate) fn tried(&self) -> &Tried {
        &self.tried
    }

    /// When the call started.
    #[must_use]
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Time since the start at `now`.
    #[must_use]
    pub fn elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }

    /// The call's effective deadline, if any.
    #[must_use]
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// The hedging delay of this call (fixed when the call started, even
    /// for an adaptive delay).
    #[must_use]
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Copies sent so far, counting the first.
    #[must_use]
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// Copies requeued: sent to an endpoint that never processed them
    /// (see [`HedgePolicy::on_outcome`]), so not counted among
    /// `max_attempts`.
    #[must_use]
    pub fn requeues(&self) -> u32 {
        self.requeues
    }

    /// Copies that count among `max_attempts`: those sent, but the
    /// requeued.
    pub(super) fn counted(&self) -> u32 {
        self.sent - self.requeues
    }

    /// Copies that finished with a retryable failure.
    #[must_use]
    pub fn failed(&self) -> u32 {
        self.failed
    }

    /// Copies sent and not yet finished.
    #[must_use]
    pub fn in_flight(&self) -> AttemptSet {
        self.in_flight
    }

    /// When the next copy may be sent; `None` when no more copies will be.
    #[must_use]
    pub fn next_copy_at(&self) -> Option<Instant> {
        self.next_due
    }

    /// Who refused a copy, if someone did: the control (in
    /// [`send_due`](HedgePolicy::send_due)), or the gate's rate or
    /// concurrency limit (see [`HedgePolicy::withdraw`]).
    #[must_use]
    pub fn refusal(&self) -> Option<Refused> {
        self.refused
    }

    /// How long the control or rate limit that refused a copy said it
    /// would go on refusing ([`Refused::retry_after`]).
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.refused?.retry_after()
    }

    /// The concurrency limit's refusal of a copy's slot, if it refused one
    /// (see [`HedgePolicy::withdraw`]).
    #[must_use]
    pub fn limit_refused(&self) -> Option<LimitRefused> {
        self.refused?.limit_refused()
    }

    /// The control or rate limit that refused a copy, if one did (a
    /// concurrency limit's refusal is [`limit_refused`](Self::limit_refused)).
    #[must_use]
    pub fn refused_by(&self) -> Option<&'static str> {
        self.refused?.throttled_by()
    }

    /// The copy that succeeded, once one has.
    #[must_use]
    pub fn winner(&self) -> Option<u32> {
        self.winner
    }

    /// Sends no more copies; those in flight go on. For drivers that learn
    /// more than a [`Verdict`] says: gRPC pushback saying "do not retry"
    /// (A6: no further hedges, outstanding ones continue), or a call that
    /// commits to one copy. A later [`HedgePolicy::send_due`] stops the call
    /// once nothing is in flight.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::policy::HedgeAction;
    /// use steadfast::HedgePolicy;
    /// let policy = HedgePolicy::builder(Duration::from_millis(5)).max_attempts(3).build()?;
    /// let clock = VirtualClock::manual();
    /// let mut call = policy.start(&clock, None);
    /// let _first = policy.send_due(&mut call, &clock);
    /// call.stop_sending();
    /// assert_eq!(call.next_copy_at(), None);
    /// assert_eq!(policy.send_due(&mut call, &clock), HedgeAction::WaitForOutcome);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn stop_sending(&mut self) {
        self.stopped = true;
        self.next_due = None;
    }

    /// The call's telemetry at `now`: copies still in flight count as
    /// cancelled (an executor drops them when the call ends).
    #[must_use]
    pub fn stats(&self, now: Instant) -> HedgeStats {
        HedgeStats {
            sent: self.sent,
            failed: self.failed,
            cancelled: self.in_flight.len(),
            winner: self.winner,
            refused_by: self.refused_by(),
            elapsed: self.elapsed(now),
        }
    }

    /// Why the call ends when nothing is in flight and nothing more will be sent.
    pub(super) fn exhausted_reason(&self) -> StopReason {
        if let Some(refused) = self.refused {
            refused.reason(false)
        } else if self.stopped {
            // The classifier (or the caller) forbade more copies.
            StopReason::Permanent
        } else if self.cut_by_deadline {
            StopReason::Deadline
        } else {
            StopReason::Exhausted
        }
    }

    /// Sets the next copy's due time, unless it would fall at or past the
    /// deadline (a copy sent then could not finish in time).
    pub(super) fn schedule_next(&mut self, at: Instant) {
        if self.deadline.is_some_and(|d| at >= d.instant()) {
            self.next_due = None;
            self.cut_by_deadline = true;
        } else {
            self.next_due = Some(at);
            self.cut_by_deadline = false;
        }
    }
}
