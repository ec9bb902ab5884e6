//! What a retry call is made of ([`Core`]: the operation, the policy, the
//! classifier, the hook, the clock and the options of its [`Retry`]) and
//! every step it takes: the lean first attempt's helpers, and the running
//! stage (asking the gate, waiting for a turn or a slot, attempting,
//! deciding, stopping). [`RetryFuture`] polls it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::blocking::{attempt_deadline, refused};
use super::stage::{Boxed, OutOfLine, Phase, Running, RunningProj, Slot};
use super::{Notice, Notify, cancel_reason, conclude};
use crate::backoff::Schedule;
use crate::call::{
    Attempt, AttemptSet, Ended, Ending, Lend, Operation, Refused, RetryError, StopReason,
    TryOperation, Verdict, ended_early,
};
use crate::cancel::Cancelled;
use crate::classify::Classify;
use crate::clock::AsyncClock;
use crate::deadline::{Deadline, WithDeadline};
use crate::policy::gate::{Admission, Ticket};
use crate::policy::{Decision, RetryPolicy};

#[cfg(doc)]
use super::{Retry, RetryFuture};

/// The attempt's future, its success and its error: named through the
/// operation ([`TryOperation`]), never as parameters of their own.
pub(super) type FutOf<F> = <F as Operation>::Future;
pub(super) type OkOf<F> = <F as TryOperation>::Ok;
pub(super) type ErrOf<F> = <F as TryOperation>::Error;

/// A call's result.
pub(super) type Done<F> = Result<OkOf<F>, RetryError<ErrOf<F>>>;

/// The running stage of a call of `F` on clock `C` with hook `N`: its box,
/// the slot that holds it, and its projection.
pub(super) type StageBox<F, C, N> =
    Boxed<FutOf<F>, <C as AsyncClock>::Sleep, <N as Notify<ErrOf<F>>>::Future, OkOf<F>, ErrOf<F>>;
pub(super) type StageSlot<F, C, N> =
    Slot<FutOf<F>, <C as AsyncClock>::Sleep, <N as Notify<ErrOf<F>>>::Future, OkOf<F>, ErrOf<F>>;
pub(super) type Proj<'a, F, C, N> = RunningProj<
    'a,
    FutOf<F>,
    <C as AsyncClock>::Sleep,
    <N as Notify<ErrOf<F>>>::Future,
    OkOf<F>,
    ErrOf<F>,
>;

/// What a call is made of: the options of its [`Retry`], never pinned.
pub(super) struct Core<F, P, K, N, C> {
    pub(super) op: F,
    pub(super) policy: P,
    pub(super) classify: K,
    pub(super) notify: N,
    pub(super) clock: C,
    pub(super) cancel: OutOfLine<Cancelled>,
    pub(super) name: Option<&'static str>,
    pub(super) deadline: Option<Deadline>,
}

/// What a step of the running stage gives: the result once the call ends.
pub(super) type Stepped<F> = Poll<Done<F>>;

/// What the running stage gives: the result and the ending once it ends.
pub(super) type Output<F> = Poll<Ended<OkOf<F>, ErrOf<F>>>;

impl<F, P, K, N, C, S> Core<F, P, K, N, C>
where
    F: TryOperation,
    P: Lend<Policy = RetryPolicy<S>>,
    S: Schedule,
    K: Classify<OkOf<F>, ErrOf<F>>,
    N: Notify<ErrOf<F>>,
    C: AsyncClock,
{
    /// Whether the call's cancellation token (if any) is cancelled.
    #[inline]
    pub(super) fn is_cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.token().is_cancelled())
    }

    /// Registers for cancellation while an attempt or a wait is pending;
    /// `true` when the token is cancelled already.
    #[inline]
    pub(super) fn poll_cancelled(&mut self, cx: &mut Context<'_>) -> bool {
        self.cancel
            .as_mut()
            .is_some_and(|c| Pin::new(c).poll(cx).is_ready())
    }

    /// The lean first attempt is pending: the call's end if the cancel
    /// token is cancelled (registering for it otherwise).
    #[inline(always)]
    pub(super) fn lean_pending(&mut self, cx: &mut Context<'_>) -> Option<Done<F>> {
        if self.poll_cancelled(cx) {
            Some(self.cancelled_lean(true))
        } else {
            None
        }
    }

    /// The lean first attempt is over: classified and its ticket finished
    /// (a free ticket costs nothing); a success ends the call, anything
    /// else starts the running stage with it.
    #[inline(always)]
    pub(super) fn landed(
        &mut self,
        slot: &mut StageSlot<F, C, N>,
        outcome: Result<OkOf<F>, ErrOf<F>>,
        ticket: Ticket,
        cx: &mut Context<'_>,
    ) -> Output<F> {
        let verdict = self.classify.classify(&outcome);
        if verdict != Verdict::Success {
            // Its ticket is finished once the running stage has recorded
            // where it went.
            return self.after_first(slot, outcome, verdict, ticket, cx);
        }
        ticket.finish(&self.classify, verdict, &outcome, &self.clock);
        match outcome {
            Ok(value) => Poll::Ready((Ok(value), Ending::FIRST_SUCCESS)),
            outcome => self.after_first(slot, outcome, verdict, Ticket::FREE, cx),
        }
    }

    /// The error of a lean call whose first attempt the concurrency limit
    /// refused: inline, without an allocation.
    #[cold]
    #[inline(never)]
    pub(super) fn limited(&self, refused: crate::call::LimitRefused) -> RetryError<ErrOf<F>> {
        let err = RetryError::limited(refused);
        match self.name {
            Some(name) => err.with_name(name),
            None => err,
        }
    }

    /// The error of a lean call cancelled before (`in_flight: false`) or
    /// during its first attempt.
    #[cold]
    #[inline(never)]
    pub(super) fn cancelled_lean(&self, in_flight: bool) -> Done<F> {
        let now = self.clock.now();
        let mut call = self.policy.policy().start(&self.clock, self.deadline);
        if in_flight {
            call.count_abandoned_attempt();
        }
        conclude(
            None,
            cancel_reason(&call, now),
            &call,
            now,
            self.name,
            false,
        )
    }

    /// The gate did not admit a lean call's first attempt at once: a
    /// concurrency limit's refusal ends the call here, without an
    /// allocation; anything else goes to the running stage with the
    /// gate's answer.
    #[cold]
    #[inline(never)]
    pub(super) fn not_admitted(
        &mut self,
        slot: &mut StageSlot<F, C, N>,
        admission: Admission,
        cx: &mut Context<'_>,
    ) -> Output<F> {
        match admission {
            Admission::Refused(Refused::Limit(refused)) => {
                Poll::Ready(ended_early(Err(self.limited(refused))))
            }
            admission => self.begin(slot, Some(admission), cx),
        }
    }

    /// A call that is not lean, or a lean one the gate did not admit at
    /// once (`admission`: its answer): asks the control, starts the
    /// per-call state, then runs.
    #[inline(never)]
    pub(super) fn begin(
        &mut self,
        slot: &mut StageSlot<F, C, N>,
        admission: Option<Admission>,
        cx: &mut Context<'_>,
    ) -> Output<F> {
        if self.is_cancelled() {
            // Cancelled before anything was asked or sent.
            return Poll::Ready(ended_early(self.cancelled_lean(false)));
        }
        let policy = self.policy.policy();
        let call = match policy.admit_and_start(&self.clock, self.deadline) {
            Ok(call) => call,
            Err(refusal) => {
                return Poll::Ready(ended_early(Err(refused(policy, refusal.by, self.name))));
            }
        };
        let mut run = Box::pin(Running::new(call));
        let mut proj = run.as_mut().project();
        let admitted = match admission {
            Some(admission) => self.enter(&mut proj, admission),
            None => self.start_attempt(&mut proj),
        };
        if let Err(done) = admitted {
            return Poll::Ready((done, ending(&proj)));
        }
        self.keep_running(slot, run, cx)
    }

    /// The lean first attempt did not succeed: starts the per-call state
    /// now, hands it the outcome, and runs.
    #[inline(never)]
    pub(super) fn after_first(
        &mut self,
        slot: &mut StageSlot<F, C, N>,
        outcome: Result<OkOf<F>, ErrOf<F>>,
        verdict: Verdict,
        ticket: Ticket,
        cx: &mut Context<'_>,
    ) -> Output<F> {
        let mut call = self.policy.policy().start(&self.clock, self.deadline);
        call.went_to(&ticket);
        ticket.finish(&self.classify, verdict, &outcome, &self.clock);
        let mut run = Box::pin(Running::new(call));
        let mut proj = run.as_mut().project();
        if let Some(done) = self.on_outcome(&mut proj, Some(outcome), verdict) {
            return Poll::Ready((done, ending(&proj)));
        }
        self.keep_running(slot, run, cx)
    }

    /// Drives a new running stage, and keeps it in the stage slot if the
    /// call goes on.
    fn keep_running(
        &mut self,
        slot: &mut StageSlot<F, C, N>,
        mut run: StageBox<F, C, N>,
        cx: &mut Context<'_>,
    ) -> Output<F> {
        let out = self.drive(&mut run, cx);
        if out.is_pending() {
            **slot = Some(run);
        }
        out
    }

    /// Drives the running stage until the call ends or must wait.
    #[inline(never)]
    pub(super) fn drive(&mut self, run: &mut StageBox<F, C, N>, cx: &mut Context<'_>) -> Output<F> {
        let mut proj = run.as_mut().project();
        self.step(&mut proj, cx).map(|done| (done, ending(&proj)))
    }

    fn step(&mut self, run: &mut Proj<'_, F, C, N>, cx: &mut Context<'_>) -> Stepped<F> {
        loop {
            if self.is_cancelled() {
                return Poll::Ready(self.stop_cancelled(run));
            }
            match *run.phase {
                Phase::Decide(verdict) => {
                    let outcome = run.last.take();
                    if let Some(done) = self.on_outcome(run, outcome, verdict) {
                        return Poll::Ready(done);
                    }
                }
                Phase::Attempt => {
                    let Some(fut) = run.attempt.as_mut().as_pin_mut() else {
                        unreachable!("an attempt is in flight in phase Attempt");
                    };
                    let (outcome, verdict) = match fut.poll(cx) {
                        Poll::Ready(outcome) => {
                            let verdict = self.classify.classify(&outcome);
                            std::mem::take(run.ticket).finish(
                                &self.classify,
                                verdict,
                                &outcome,
                                &self.clock,
                            );
                            run.attempt.set(None);
                            run.timer.set(None);
                            *run.timed_out = false;
                            (Some(outcome), verdict)
                        }
                        Poll::Pending => {
                            match run.timer.as_mut().as_pin_mut().map(|t| t.poll(cx)) {
                                Some(Poll::Ready(())) => {
                                    run.attempt.set(None);
                                    run.timer.set(None);
                                    *run.timed_out = true;
                                    // Cut off by its timeout: a drop.
                                    std::mem::take(run.ticket).timed_out(&self.clock);
                                    let now = self.clock.now();
                                    if run.call.deadline().is_some_and(|d| d.is_expired(now)) {
                                        // The call's own deadline, not just the attempt's: stop.
                                        run.call.count_abandoned_attempt();
                                        return Poll::Ready(self.finish(run, StopReason::Deadline));
                                    }
                                    (None, Verdict::Retry)
                                }
                                _ => return self.pending(run, cx),
                            }
                        }
                    };
                    if let Some(done) = self.on_outcome(run, outcome, verdict) {
                        return Poll::Ready(done);
                    }
                }
                Phase::Notify(delay) => {
                    if let Some(hook) = run.hook.as_mut().as_pin_mut() {
                        if hook.poll(cx).is_pending() {
                            return self.pending(run, cx);
                        }
                        run.hook.set(None);
                    }
                    if delay.is_zero() {
                        // No timer for a zero wait: go straight to the next attempt.
                        if let Err(done) = self.start_attempt(run) {
                            return Poll::Ready(done);
                        }
                    } else if self.clock.can_sleep() {
                        run.timer.set(Some(self.clock.sleep(delay)));
                        *run.phase = Phase::Sleep;
                    } else {
                        // The retry was granted but cannot be waited for.
                        self.policy.policy().abandon(run.call);
                        return Poll::Ready(self.finish(run, StopReason::NoTimer));
                    }
                }
                Phase::Queue => {
                    let Some((acquire, since)) = run.acquire.as_mut() else {
                        unreachable!("a wait for a slot in phase Queue");
                    };
                    let since = *since;
                    let got = match Pin::new(acquire).poll(cx) {
                        Poll::Ready(got) => got,
                        Poll::Pending => {
                            match run.timer.as_mut().as_pin_mut().map(|t| t.poll(cx)) {
                                Some(Poll::Ready(())) => {
                                    let waited = self.clock.now().saturating_duration_since(since);
                                    match run.acquire.take() {
                                        Some((acquire, _)) => acquire.give_up(waited),
                                        None => unreachable!("taken above"),
                                    }
                                }
                                _ => return self.pending(run, cx),
                            }
                        }
                    };
                    *run.acquire = None;
                    run.timer.set(None);
                    let limits = self.policy.policy().limits();
                    match limits.admitted(got, run.call.avoid(), &self.clock) {
                        Ok(ticket) => {
                            *run.ticket = ticket;
                            if let Err(done) = self.launch(run) {
                                return Poll::Ready(done);
                            }
                        }
                        Err(refused) => {
                            if let Err(done) = self.refused(run, refused) {
                                return Poll::Ready(done);
                            }
                        }
                    }
                }
                Phase::RateWait => {
                    if let Some(sleep) = run.timer.as_mut().as_pin_mut() {
                        if sleep.poll(cx).is_pending() {
                            return self.pending(run, cx);
                        }
                        run.timer.set(None);
                    }
                    let Some(turn) = run.turn.take() else {
                        unreachable!("a booked turn in phase RateWait");
                    };
                    let limits = self.policy.policy().limits();
                    let admission = turn.take(limits, run.call.avoid(), &self.clock);
                    if let Err(done) = self.enter(run, admission) {
                        return Poll::Ready(done);
                    }
                }
                Phase::Sleep => {
                    if let Some(sleep) = run.timer.as_mut().as_pin_mut() {
                        if sleep.poll(cx).is_pending() {
                            return self.pending(run, cx);
                        }
                        run.timer.set(None);
                    }
                    if let Err(done) = self.start_attempt(run) {
                        return Poll::Ready(done);
                    }
                }
            }
        }
    }

    /// Hands an attempt's outcome (`None`: it timed out) to the policy and
    /// acts on the decision: the call's result, or `None` after moving on
    /// to the notify hook and the wait.
    fn on_outcome(
        &mut self,
        run: &mut Proj<'_, F, C, N>,
        outcome: Option<Result<OkOf<F>, ErrOf<F>>>,
        verdict: Verdict,
    ) -> Option<Done<F>> {
        let decision = self.policy.policy().decide(run.call, verdict, &self.clock);
        match decision {
            Decision::Succeed => Some(match outcome {
                Some(Ok(value)) => Ok(value),
                other => {
                    // The classifier called an error (or a timeout) final.
                    *run.last = other;
                    self.finish(run, StopReason::Permanent)
                }
            }),
            Decision::Stop(reason) => {
                if outcome.is_some() {
                    *run.last = outcome;
                }
                Some(self.finish(run, reason))
            }
            Decision::Retry(delay) => {
                let error = outcome.as_ref().and_then(|o| o.as_ref().err());
                let notice = Notice::new(run.call, error, delay, self.clock.now());
                let hook = self.notify.notify(&notice);
                if outcome.is_some() {
                    *run.last = outcome;
                }
                run.hook.set(Some(hook));
                *run.phase = Phase::Notify(delay);
                None
            }
        }
    }

    /// Asks the gate for the next attempt, and acts on its answer.
    fn start_attempt(&mut self, run: &mut Proj<'_, F, C, N>) -> Result<(), Done<F>> {
        let deadline = run.call.deadline();
        let admission =
            self.policy
                .policy()
                .limits()
                .admit(deadline, run.call.avoid(), &self.clock);
        self.enter(run, admission)
    }

    /// Acts on the gate's answer for the next attempt: makes it, waits for
    /// the rate limit's turn (phase `RateWait`) or in the concurrency
    /// limit's queue (phase `Queue`), or ends the call. A wait this clock
    /// [cannot make](AsyncClock::can_sleep) here is a refusal.
    fn enter(&mut self, run: &mut Proj<'_, F, C, N>, admission: Admission) -> Result<(), Done<F>> {
        match admission {
            Admission::Admitted(ticket) => {
                *run.ticket = ticket;
                self.launch(run)
            }
            Admission::Turn(turn) if self.clock.can_sleep() => {
                run.call.mark_started(self.clock.now());
                run.timer.set(Some(self.clock.sleep(turn.wait())));
                *run.turn = Some(turn);
                *run.phase = Phase::RateWait;
                Ok(())
            }
            Admission::Queue(queue) if self.clock.can_sleep() => {
                let now = self.clock.now();
                run.call.mark_started(now);
                run.timer.set(Some(self.clock.sleep(queue.bound())));
                *run.acquire = Some((queue.enter(), now));
                *run.phase = Phase::Queue;
                Ok(())
            }
            Admission::Turn(turn) => {
                let refused = turn.give_up(self.policy.policy().limits());
                self.refused(run, Refused::Rate(refused))
            }
            Admission::Queue(queue) => self.refused(run, Refused::Limit(queue.give_up())),
            Admission::Refused(refused) => self.refused(run, refused),
        }
    }

    /// The gate refused the next attempt: requeued when the policy says so
    /// (no endpoint ready, the first back at a known time:
    /// [`RetryPolicy::requeue_refused`](crate::RetryPolicy::requeue_refused)),
    /// the wait in phase `Sleep`; otherwise the call ends: the grant it
    /// held goes back to the control; the stop and the error say who
    /// refused ([`Refused::reason`], [`RetryError::with_refusal`]).
    #[cold]
    fn refused(&mut self, run: &mut Proj<'_, F, C, N>, refused: Refused) -> Result<(), Done<F>> {
        if self.clock.can_sleep()
            && let Some(wait) =
                self.policy
                    .policy()
                    .requeue_refused(run.call, &refused, &self.clock)
        {
            run.timer.set(Some(self.clock.sleep(wait)));
            *run.phase = Phase::Sleep;
            return Ok(());
        }
        Err(self.end_refused(run, refused))
    }

    /// Ends a call whose next attempt the gate refused.
    #[cold]
    fn end_refused(&mut self, run: &mut Proj<'_, F, C, N>, refused: Refused) -> Done<F> {
        self.policy.policy().abandon(run.call);
        let expired = run
            .call
            .deadline()
            .is_some_and(|d| d.is_expired(self.clock.now()));
        self.finish(run, refused.reason(expired))
            .map_err(|e| e.with_refusal(refused))
    }

    /// Makes the next attempt's future, with a timer for its deadline if it
    /// has one; the call's end instead when that timer cannot be made (the
    /// clock [cannot sleep](AsyncClock::can_sleep) here).
    fn launch(&mut self, run: &mut Proj<'_, F, C, N>) -> Result<(), Done<F>> {
        let deadline = attempt_deadline(
            run.call.deadline(),
            self.policy.policy().attempt_timeout(),
            &self.clock,
        );
        if deadline.is_some() && !self.clock.can_sleep() {
            self.policy.policy().abandon(run.call);
            return Err(self.finish(run, StopReason::NoTimer));
        }
        let attempt = Attempt {
            number: run.call.attempts().saturating_add(1),
            deadline,
            in_flight: AttemptSet::new(),
            waited: run.call.last_wait(),
            endpoint: run.ticket.endpoint(),
        };
        self.policy.policy().attempt_starting(run.call, &self.clock);
        run.call.went_to(run.ticket);
        let timer = deadline.map(|d| self.clock.sleep(d.remaining(self.clock.now())));
        run.timer.set(timer);
        // The operation makes its future with the attempt's deadline as the
        // ambient one too, so code that reads it before the future is first
        // polled (a `tower::Service::call`) sees the attempt's, not the call's.
        let fut = match deadline {
            Some(d) => crate::deadline::scope(d, || self.op.attempt(attempt)),
            None => self.op.attempt(attempt),
        };
        run.attempt.set(Some(WithDeadline::exactly(fut, deadline)));
        *run.phase = Phase::Attempt;
        Ok(())
    }

    /// Waits: registers with the cancellation token only now, so a call
    /// whose attempt completes at once never touches it.
    fn pending(&mut self, run: &mut Proj<'_, F, C, N>, cx: &mut Context<'_>) -> Stepped<F> {
        if self.poll_cancelled(cx) {
            return Poll::Ready(self.stop_cancelled(run));
        }
        Poll::Pending
    }

    fn stop_cancelled(&mut self, run: &mut Proj<'_, F, C, N>) -> Done<F> {
        let now = self.clock.now();
        if matches!(*run.phase, Phase::Attempt | Phase::Decide(_)) {
            // An attempt in flight, or one made and not yet decided on
            // (after `after_first_attempt`): either way, it was made.
            run.call.count_abandoned_attempt();
        } else {
            self.policy.policy().abandon(run.call);
        }
        run.attempt.set(None);
        run.timer.set(None);
        run.hook.set(None);
        *run.acquire = None;
        *run.turn = None;
        *run.ticket = Ticket::FREE;
        let reason = cancel_reason(run.call, now);
        *run.stop = Some(reason);
        conclude(run.last.take(), reason, run.call, now, self.name, false)
    }

    fn finish(&self, run: &mut Proj<'_, F, C, N>, reason: StopReason) -> Done<F> {
        let now = self.clock.now();
        *run.stop = Some(reason);
        conclude(
            run.last.take(),
            reason,
            run.call,
            now,
            self.name,
            *run.timed_out,
        )
    }
}

/// How a call with a running stage ended.
pub(super) fn ending<Fut, S, H, T, E>(run: &RunningProj<'_, Fut, S, H, T, E>) -> Ending {
    run.call.ending(*run.stop)
}
