use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use pin_project_lite::pin_project;

use super::{Hedge, OnFinish};
use crate::call::{Finish, HedgeStats, Lend, Plain, Report, RetryError, StopReason, TryOperation};
use crate::cancel::{CancelToken, Cancelled};
use crate::classify::Classify;
use crate::clock::AsyncClock;
use crate::deadline::{Deadline, WithDeadline};
use crate::policy::gate::Ticket;
use crate::policy::{HedgeAction, HedgeDecision, HedgePolicy, HedgeState};

pin_project! {
    /// The hedging executor: the future a [`Hedge`] becomes when awaited.
    ///
    /// Every copy is a future polled by this one, in the caller's task: the
    /// first inline, the hedges in a `FuturesUnordered` made only when the
    /// first hedge is sent. Dropping it drops every copy; no task is
    /// spawned and nothing outlives the call.
    #[must_use = "futures do nothing unless polled"]
    #[project = HedgeFutureProj]
    pub struct HedgeFuture<F, P, K, H, C, O = Plain>
    where
        F: TryOperation,
        C: AsyncClock,
    {
        output: std::marker::PhantomData<fn() -> O>,
        op: F,
        policy: P,
        classify: K,
        clock: C,
        on_finish: H,
        cancel: Option<Cancelled>,
        name: Option<&'static str>,
        deadline: Option<Deadline>,
        // Made at the first poll, where the ambient deadline is in force.
        state: Option<HedgeState>,
        last: Option<Result<F::Ok, F::Error>>,
        #[pin]
        first: Option<WithDeadline<F::Future>>,
        // The first copy's ticket from the gate.
        first_ticket: Ticket,
        hedges: Option<FuturesUnordered<Tagged<WithDeadline<F::Future>>>>,
        #[pin]
        timer: Option<C::Sleep>,
        timer_at: Option<Instant>,
        done: bool,
    }
}

pin_project! {
    /// One hedged copy, tagged with its attempt number, with its ticket
    /// from the gate.
    #[derive(Debug)]
    pub(crate) struct Tagged<Fut> {
        number: u32,
        ticket: Ticket,
        #[pin]
        fut: Fut,
    }
}

impl<Fut: Future> Future for Tagged<Fut> {
    type Output = (u32, Ticket, Fut::Output);
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        this.fut
            .poll(cx)
            .map(|out| (*this.number, std::mem::take(this.ticket), out))
    }
}

impl<F, P, K, H, C, O> fmt::Debug for HedgeFuture<F, P, K, H, C, O>
where
    F: TryOperation,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeFuture")
            .field("name", &self.name)
            .field("state", &self.state)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<F, P, K, H, C, O> IntoFuture for Hedge<F, P, K, H, C, O>
where
    F: TryOperation,
    P: Lend<Policy = HedgePolicy>,
    K: Classify<F::Ok, F::Error>,
    C: AsyncClock,
    H: OnFinish,
    O: Finish<F::Ok, F::Error>,
{
    type Output = O::Output;
    type IntoFuture = HedgeFuture<F, P, K, H, C, O>;

    fn into_future(self) -> Self::IntoFuture {
        HedgeFuture {
            output: std::marker::PhantomData,
            op: self.op,
            policy: self.policy,
            classify: self.classify,
            clock: self.clock,
            on_finish: self.on_finish,
            cancel: self.cancel.as_ref().map(CancelToken::cancelled),
            name: self.name,
            deadline: self.deadline,
            state: None,
            last: None,
            first: None,
            first_ticket: Ticket::FREE,
            hedges: None,
            timer: None,
            timer_at: None,
            done: false,
        }
    }
}

impl<F, P, K, H, C, O> Future for HedgeFuture<F, P, K, H, C, O>
where
    F: TryOperation,
    P: Lend<Policy = HedgePolicy>,
    K: Classify<F::Ok, F::Error>,
    C: AsyncClock,
    H: OnFinish,
    O: Finish<F::Ok, F::Error>,
{
    type Output = O::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        assert!(!*this.done, "HedgeFuture polled after it completed");
        // One clock read per poll (and one more after a timer fires): the
        // work in between is synchronous.
        let mut now = this.clock.now();
        loop {
            if this
                .cancel
                .as_ref()
                .is_some_and(|c| c.token().is_cancelled())
            {
                return Poll::Ready(O::from_report(this.stop_cancelled(now)));
            }
            let deadline = *this.deadline;
            let state = this
                .state
                .get_or_insert_with(|| this.policy.policy().start_at(now, deadline));
            // 1. Poll the copies first: a reply that is already there makes
            //    a due hedge unnecessary. Handle one outcome at a time.
            let mut outcome = None;
            if let Some(fut) = this.first.as_mut().as_pin_mut()
                && let Poll::Ready(out) = fut.poll(cx)
            {
                this.first.set(None);
                outcome = Some((1, std::mem::take(this.first_ticket), out));
            }
            if outcome.is_none()
                && let Some(hedges) = this.hedges.as_mut()
                && let Poll::Ready(Some(done)) = hedges.poll_next_unpin(cx)
            {
                outcome = Some(done);
            }
            if let Some((number, ticket, out)) = outcome {
                let verdict = this.classify.classify(&out);
                ticket.finish(&*this.classify, verdict, &out, &*this.clock);
                match this
                    .policy
                    .policy()
                    .on_outcome_at(state, number, verdict, now)
                {
                    HedgeDecision::Continue => *this.last = Some(out),
                    HedgeDecision::Succeed => {
                        *this.last = Some(out);
                        return Poll::Ready(O::from_report(
                            this.finish(StopReason::Permanent, now),
                        ));
                    }
                    HedgeDecision::Stop(reason) => {
                        *this.last = Some(out);
                        return Poll::Ready(O::from_report(this.finish(reason, now)));
                    }
                }
                continue;
            }
            // 2. Send every copy that is due, then poll the new ones.
            let mut sent_any = false;
            let wake = loop {
                match this.policy.policy().send_due_at(state, now) {
                    HedgeAction::Send(mut attempt) => {
                        // The gate, never waiting: a copy it does not
                        // admit now is taken back, never sent. Under an
                        // endpoint set, it goes elsewhere than the others.
                        let policy = this.policy.policy();
                        let ticket = match policy.limits().admit_now(state.avoid(), &*this.clock) {
                            Ok(ticket) => ticket,
                            Err(refused) => {
                                policy.withdraw(state, attempt.number, refused);
                                continue;
                            }
                        };
                        attempt.endpoint = ticket.endpoint();
                        state.went_to(&ticket);
                        sent_any = true;
                        // Each copy runs with the call's deadline as its ambient one.
                        // It is made with that deadline ambient too, as the
                        // retry executors make theirs.
                        let fut = match attempt.deadline {
                            Some(d) => crate::deadline::scope(d, || this.op.attempt(attempt)),
                            None => this.op.attempt(attempt),
                        };
                        let fut = WithDeadline::exactly(fut, attempt.deadline);
                        if attempt.number == 1 {
                            this.first.set(Some(fut));
                            *this.first_ticket = ticket;
                        } else {
                            this.hedges
                                .get_or_insert_with(FuturesUnordered::new)
                                .push(Tagged {
                                    number: attempt.number,
                                    ticket,
                                    fut,
                                });
                        }
                    }
                    HedgeAction::WaitUntil(t) => break Some(t),
                    HedgeAction::WaitForOutcome => break None,
                    HedgeAction::Stop(reason) => {
                        return Poll::Ready(O::from_report(this.finish(reason, now)));
                    }
                }
            };
            if sent_any {
                continue;
            }
            // 3. Wait for the next copy or the deadline.
            if wake.is_none() && this.timer_at.is_some() {
                this.timer.set(None);
                *this.timer_at = None;
            }
            if let Some(at) = wake {
                if *this.timer_at != Some(at) {
                    if !this.clock.can_sleep() {
                        // No timer here (the default tokio clock outside a
                        // tokio runtime): stop and say so, never panic.
                        return Poll::Ready(O::from_report(this.finish(StopReason::NoTimer, now)));
                    }
                    this.timer
                        .set(Some(this.clock.sleep(at.saturating_duration_since(now))));
                    *this.timer_at = Some(at);
                }
                if let Some(timer) = this.timer.as_mut().as_pin_mut()
                    && timer.poll(cx).is_ready()
                {
                    this.timer.set(None);
                    *this.timer_at = None;
                    now = this.clock.now();
                    continue;
                }
            }
            // 4. Register with the cancellation token only now, so a call
            // whose first copy completes at once never touches it.
            if let Some(cancel) = this.cancel.as_mut()
                && Pin::new(cancel).poll(cx).is_ready()
            {
                return Poll::Ready(O::from_report(this.stop_cancelled(now)));
            }
            return Poll::Pending;
        }
    }
}

impl<F, P, K, H, C, O> HedgeFutureProj<'_, F, P, K, H, C, O>
where
    F: TryOperation,
    C: AsyncClock,
    H: OnFinish,
{
    fn stop_cancelled(&mut self, now: Instant) -> Report<F::Ok, F::Error> {
        let reason = match self.state.as_ref().and_then(HedgeState::deadline) {
            Some(d) if d.is_expired(now) => StopReason::Deadline,
            _ => StopReason::Cancelled,
        };
        self.finish(reason, now)
    }

    /// Ends the call: counts and drops every copy still in flight, reports,
    /// and turns the last outcome into the result. `reason` is used only
    /// when the call did not succeed.
    fn finish(&mut self, reason: StopReason, now: Instant) -> Report<F::Ok, F::Error> {
        let stats = self
            .state
            .as_ref()
            .map_or_else(HedgeStats::default, |s| s.stats(now));
        let requeues = self.state.as_ref().map_or(0, HedgeState::requeues);
        self.first.set(None);
        *self.first_ticket = Ticket::FREE;
        *self.hedges = None;
        self.timer.set(None);
        *self.done = true;
        self.on_finish.on_finish(&stats);
        let name = self.name.unwrap_or("operation");
        let last = self.last.take();
        let (result, stop) = match (stats.winner, last) {
            (Some(winner), Some(Ok(value))) => {
                tracing::debug!(
                    name,
                    winner,
                    sent = stats.sent,
                    cancelled = stats.cancelled,
                    "steadfast: hedged call succeeded"
                );
                (Ok(value), None)
            }
            // A retried `Ok` (say an HTTP 503) is still the caller's answer.
            (None, Some(Ok(value))) => (Ok(value), Some(reason)),
            (winner, last) => {
                // The classifier called an error a success: it is final.
                let reason = if winner.is_some() {
                    StopReason::Permanent
                } else {
                    reason
                };
                tracing::debug!(
                    name,
                    sent = stats.sent,
                    failed = stats.failed,
                    cancelled = stats.cancelled,
                    reason = reason.as_str(),
                    "steadfast: hedged call failed"
                );
                let error = last.and_then(Result::err);
                let mut err = RetryError::hedged(reason, error, stats);
                if let Some(state) = self.state.as_ref() {
                    err = err.with_tried(state.tried());
                }
                if let Some(refused) = self.state.as_ref().and_then(HedgeState::refusal) {
                    err = err.with_refusal(refused);
                }
                let err = match self.name {
                    Some(name) => err.with_name(name),
                    None => err,
                };
                (Err(err), Some(reason))
            }
        };
        Report {
            result,
            attempts: stats.sent,
            stop,
            waited: Duration::ZERO,
            hedge: Some(stats),
            fell_back: false,
            endpoint: None,
            requeues,
        }
    }
}
