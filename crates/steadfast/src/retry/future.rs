use std::fmt;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::blocking::{attempt_deadline, refused};
use super::stage::{Boxed, OutOfLine, Phase, Running, RunningProj, Slot};
use super::{Notice, Notify, Retry, cancel_reason, conclude};
use crate::backoff::Schedule;
use crate::call::{
    Attempt, AttemptSet, Ended, Ending, Finish, Lend, Operation, Plain, Refused, RetryError,
    StopReason, Verdict, ended_early,
};
use crate::cancel::{CancelToken, Cancelled};
use crate::classify::Classify;
use crate::clock::AsyncClock;
use crate::deadline::{Deadline, WithDeadline};
use crate::policy::gate::{Admission, Ticket};
use crate::policy::{Decision, RetryPolicy};

pin_project! {
    /// The async executor: the future a [`Retry`] becomes when awaited.
    ///
    /// Dropping it cancels the call: the attempt in flight and any wait are
    /// dropped with it, and nothing outlives it (no task is spawned).
    ///
    /// A *lean* call (a policy with no control and no time limit, and no
    /// deadline, given or ambient) runs its first attempt with nothing but
    /// the operation's own future and, if one was given, the cancellation
    /// token: a success then costs the operation plus one classification.
    /// Anything more (a retry, a timer, a control to consult) happens in a
    /// *running stage* made on first need, on the heap. That is one
    /// allocation for a call that needs it, and it keeps every retry future
    /// small (the options, the first attempt and a pointer) instead of
    /// making each one carry the largest state any call could need.
    ///
    /// `O` says what it resolves to: the call's `Result` ([`Plain`], the
    /// default) or a [`Report`](super::Report) (after
    /// [`Retry::report`](super::Retry::report)).
    #[must_use = "futures do nothing unless polled"]
    pub struct RetryFuture<F, Fut, P, K, N, C, T, E, O = Plain>
    where
        N: Notify<E>,
        C: AsyncClock,
    {
        core: Core<F, Fut, P, K, N, C, T, E>,
        output: PhantomData<fn() -> O>,
        // The lean first attempt. Apart from `running`, so that its
        // changes touch only this small value.
        #[pin]
        first: First<Fut>,
        // The running stage, once there is one; `None` again when done.
        running: Slot<Fut, C::Sleep, N::Future, T, E>,
    }
}

/// The types a [`Core`] names without holding them (always `Send`, `Sync`
/// and `Unpin`, whatever they are).
type Types<Fut, T, E> = fn() -> (Fut, T, E);

/// What a call is made of: the options of its [`Retry`], never pinned.
/// It names the operation's future and outcome types too, so that one impl
/// block states the bounds every step of the call relies on.
struct Core<F, Fut, P, K, N, C, T, E> {
    op: F,
    policy: P,
    classify: K,
    notify: N,
    clock: C,
    cancel: OutOfLine<Cancelled>,
    name: Option<&'static str>,
    deadline: Option<Deadline>,
    types: PhantomData<Types<Fut, T, E>>,
}

pin_project! {
    /// The lean first attempt of a [`RetryFuture`].
    #[project = FirstProj]
    enum First<Fut> {
        /// Not polled yet.
        Unpolled,
        /// A lean call's first attempt, before any per-call state exists,
        /// with the gate's ticket (its slot, if the policy has a limit).
        Polling {
            #[pin]
            attempt: Fut,
            ticket: Ticket,
        },
        /// Over: the call succeeded, stopped, or the running stage took over.
        Over,
    }
}

/// What a step of the running stage gives: the result once the call ends.
type Stepped<T, E> = Poll<Result<T, RetryError<E>>>;

/// What the running stage gives: the result and the ending once it ends.
type Output<T, E> = Poll<Ended<T, E>>;

impl<F, Fut, P, K, N, C, T, E, O> fmt::Debug for RetryFuture<F, Fut, P, K, N, C, T, E, O>
where
    N: Notify<E>,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("RetryFuture");
        s.field("name", &self.core.name);
        match (&self.first, self.running.as_deref()) {
            (_, Some(run)) => s
                .field("stage", &"running")
                .field("phase", &run.phase)
                .field("call", &run.call)
                .field("timed_out", &run.timed_out),
            (First::Unpolled, None) => s.field("stage", &"unpolled"),
            (First::Polling { .. }, None) => s.field("stage", &"first attempt"),
            (First::Over, None) => s.field("stage", &"done"),
        };
        s.finish_non_exhaustive()
    }
}

impl<F, Fut, P, K, N, C, T, E, O, S> IntoFuture for Retry<F, P, K, N, C, O>
where
    F: Operation<Future = Fut>,
    Fut: Future<Output = Result<T, E>>,
    P: Lend<Policy = RetryPolicy<S>>,
    S: Schedule,
    K: Classify<T, E>,
    N: Notify<E>,
    C: AsyncClock,
    O: Finish<T, E>,
{
    type Output = O::Output;
    type IntoFuture = RetryFuture<F, Fut, P, K, N, C, T, E, O>;

    #[inline]
    fn into_future(self) -> Self::IntoFuture {
        RetryFuture {
            core: Core {
                op: self.op,
                policy: self.policy,
                classify: self.classify,
                notify: self.notify,
                clock: self.clock,
                cancel: OutOfLine::new(self.options.cancel.map(CancelToken::into_cancelled)),
                name: self.options.name,
                deadline: self.options.deadline,
                types: PhantomData,
            },
            output: PhantomData,
            first: First::Unpolled,
            running: OutOfLine::new(None),
        }
    }
}

impl<F, P, K, N, C, O> Retry<F, P, K, N, C, O> {
    /// The future of a call whose first attempt the caller made, and
    /// classified, itself: the policy decides on that outcome as this
    /// executor would have, and the call goes on from there (the operation
    /// is asked for attempt 2 next, after the backoff).
    ///
    /// For an executor built on this one that makes a lean first attempt
    /// itself and needs the core only once that attempt has not succeeded
    /// (steadfast-tower's retry layer does, so its success path is the
    /// service's own future and one classification). Meant for a lean call
    /// ([`RetryPolicy::is_lean`](crate::policy::RetryPolicy::is_lean), no deadline
    /// given or ambient), whose first attempt needs no admission and no
    /// timer; with a control, the control hears the outcome of an attempt
    /// it did not admit. The call's clock starts here, as it does when the
    /// core's own lean first attempt fails. This allocates the running
    /// stage, as a failed first attempt does anyway.
    ///
    /// ```
    /// use steadfast::{Attempt, Classify, RetryPolicy, Retryable, Verdict};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), steadfast::ConfigError> {
    /// let policy = RetryPolicy::builder().max_attempts(3).build()?;
    /// let op = |a: Attempt| async move { Ok::<u32, &str>(a.number) };
    /// // The caller's own first attempt failed:
    /// let first: Result<u32, &str> = Err("connection refused");
    /// let verdict = steadfast::classify::AnyError.classify(&first);
    /// assert_eq!(verdict, Verdict::Retry);
    /// let value = op.retry(&policy).after_first_attempt(first, verdict).await;
    /// assert_eq!(value, Ok(2)); // the core made attempt 2, which succeeded
    /// # Ok(())
    /// # }
    /// ```
    pub fn after_first_attempt<Fut, T, E, S>(
        self,
        outcome: Result<T, E>,
        verdict: Verdict,
    ) -> RetryFuture<F, Fut, P, K, N, C, T, E, O>
    where
        F: Operation<Future = Fut>,
        Fut: Future<Output = Result<T, E>>,
        P: Lend<Policy = RetryPolicy<S>>,
        S: Schedule,
        K: Classify<T, E>,
        N: Notify<E>,
        C: AsyncClock,
        O: Finish<T, E>,
    {
        let call = self
            .policy
            .policy()
            .start(&self.clock, self.options.deadline);
        let mut run = Running::new(call);
        run.last = Some(outcome);
        run.phase = Phase::Decide(verdict);
        let mut future = self.into_future();
        future.first = First::Over;
        *future.running = Some(Box::pin(run));
        future
    }
}

impl<F, Fut, P, K, N, C, T, E, O, S> Future for RetryFuture<F, Fut, P, K, N, C, T, E, O>
where
    F: Operation<Future = Fut>,
    Fut: Future<Output = Result<T, E>>,
    P: Lend<Policy = RetryPolicy<S>>,
    S: Schedule,
    K: Classify<T, E>,
    N: Notify<E>,
    C: AsyncClock,
    O: Finish<T, E>,
{
    type Output = O::Output;

    /// The lean first attempt is handled here, small enough to inline into
    /// the caller; the running stage is out of line.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let core = this.core;
        let mut first = this.first;
        loop {
            match first.as_mut().project() {
                FirstProj::Polling { attempt, ticket } => {
                    // A cancel that races with the attempt's completion lets
                    // the completion win; otherwise it ends the call here.
                    let Poll::Ready(outcome) = attempt.poll(cx) else {
                        if core.poll_cancelled(cx) {
                            first.set(First::Over);
                            return Poll::Ready(finish::<O, T, E>(core.cancelled_lean(true)));
                        }
                        return Poll::Pending;
                    };
                    let verdict = core.classify.classify(&outcome);
                    std::mem::take(ticket).finish(&core.classify, verdict, &outcome);
                    first.set(First::Over);
                    return match outcome {
                        Ok(value) if verdict == Verdict::Success => {
                            Poll::Ready(O::finish(Ok(value), || Ending::FIRST_SUCCESS))
                        }
                        outcome => core
                            .after_first(this.running, outcome, verdict, cx)
                            .map(|(r, e)| O::finish(r, || e)),
                    };
                }
                FirstProj::Unpolled => {
                    if core.policy.policy().is_lean()
                        && core.deadline.is_none()
                        && crate::deadline::current().is_none()
                    {
                        // The lean path: no control to ask, no time limit;
                        // no per-call state until something fails. One
                        // write of the stage: straight to the attempt.
                        if core.is_cancelled() {
                            first.set(First::Over);
                            return Poll::Ready(finish::<O, T, E>(core.cancelled_lean(false)));
                        }
                        // The gate (no deadline to bound a wait by): a call
                        // that must wait, or is refused by a rate limit, goes
                        // to the running stage with the gate's answer.
                        let limits = core.policy.policy().limits();
                        let ticket = match limits.admit(None, &core.clock) {
                            Admission::Admitted(ticket) => ticket,
                            Admission::Refused(Refused::Limit(refused)) => {
                                first.set(First::Over);
                                return Poll::Ready(finish::<O, T, E>(Err(core.limited(refused))));
                            }
                            admission => {
                                first.set(First::Over);
                                return core
                                    .begin(this.running, Some(admission), cx)
                                    .map(|(r, e)| O::finish(r, || e));
                            }
                        };
                        let attempt = core.op.attempt(Attempt::new(1));
                        first.set(First::Polling { attempt, ticket });
                        continue;
                    }
                    first.set(First::Over);
                    return core
                        .begin(this.running, None, cx)
                        .map(|(r, e)| O::finish(r, || e));
                }
                FirstProj::Over => {
                    let Some(run) = this.running.as_mut() else {
                        panic!("RetryFuture polled after it completed");
                    };
                    let out = core.drive(run, cx);
                    if out.is_ready() {
                        // Drops the attempt, the timer and the hook at once.
                        **this.running = None;
                    }
                    return out.map(|(r, e)| O::finish(r, || e));
                }
            }
        }
    }
}

impl<F, Fut, P, K, N, C, T, E, S> Core<F, Fut, P, K, N, C, T, E>
where
    F: Operation<Future = Fut>,
    Fut: Future<Output = Result<T, E>>,
    P: Lend<Policy = RetryPolicy<S>>,
    S: Schedule,
    K: Classify<T, E>,
    N: Notify<E>,
    C: AsyncClock,
{
    /// Whether the call's cancellation token (if any) is cancelled.
    #[inline]
    fn is_cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.token().is_cancelled())
    }

    /// Registers for cancellation while an attempt or a wait is pending;
    /// `true` when the token is cancelled already.
    #[inline]
    fn poll_cancelled(&mut self, cx: &mut Context<'_>) -> bool {
        self.cancel
            .as_mut()
            .is_some_and(|c| Pin::new(c).poll(cx).is_ready())
    }

    /// The error of a lean call whose first attempt the concurrency limit
    /// refused: inline, without an allocation.
    #[cold]
    #[inline(never)]
    fn limited(&self, refused: crate::call::LimitRefused) -> RetryError<E> {
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
    fn cancelled_lean(&self, in_flight: bool) -> Result<T, RetryError<E>> {
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

    /// A call that is not lean, or a lean one the gate did not admit at
    /// once (`admission`: its answer): asks the control, starts the
    /// per-call state, then runs.
    #[inline(never)]
    fn begin(
        &mut self,
        slot: &mut Slot<Fut, C::Sleep, N::Future, T, E>,
        admission: Option<Admission>,
        cx: &mut Context<'_>,
    ) -> Output<T, E> {
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
    fn after_first(
        &mut self,
        slot: &mut Slot<Fut, C::Sleep, N::Future, T, E>,
        outcome: Result<T, E>,
        verdict: Verdict,
        cx: &mut Context<'_>,
    ) -> Output<T, E> {
        let call = self.policy.policy().start(&self.clock, self.deadline);
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
        slot: &mut Slot<Fut, C::Sleep, N::Future, T, E>,
        mut run: Boxed<Fut, C::Sleep, N::Future, T, E>,
        cx: &mut Context<'_>,
    ) -> Output<T, E> {
        let out = self.drive(&mut run, cx);
        if out.is_pending() {
            **slot = Some(run);
        }
        out
    }

    /// Drives the running stage until the call ends or must wait.
    #[inline(never)]
    fn drive(
        &mut self,
        run: &mut Boxed<Fut, C::Sleep, N::Future, T, E>,
        cx: &mut Context<'_>,
    ) -> Output<T, E> {
        let mut proj = run.as_mut().project();
        self.step(&mut proj, cx).map(|done| (done, ending(&proj)))
    }

    fn step(
        &mut self,
        run: &mut RunningProj<'_, Fut, C::Sleep, N::Future, T, E>,
        cx: &mut Context<'_>,
    ) -> Stepped<T, E> {
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
                            std::mem::take(run.ticket).finish(&self.classify, verdict, &outcome);
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
                                    std::mem::take(run.ticket).timed_out();
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
                    match Ticket::admitted(got) {
                        Ok(ticket) => {
                            *run.ticket = ticket;
                            if let Err(done) = self.launch(run) {
                                return Poll::Ready(done);
                            }
                        }
                        Err(refused) => return Poll::Ready(self.refused(run, refused)),
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
                    let admission = turn.take(self.policy.policy().limits(), &self.clock);
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
        run: &mut RunningProj<'_, Fut, C::Sleep, N::Future, T, E>,
        outcome: Option<Result<T, E>>,
        verdict: Verdict,
    ) -> Option<Result<T, RetryError<E>>> {
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
    fn start_attempt(
        &mut self,
        run: &mut RunningProj<'_, Fut, C::Sleep, N::Future, T, E>,
    ) -> Result<(), Result<T, RetryError<E>>> {
        let deadline = run.call.deadline();
        let admission = self.policy.policy().limits().admit(deadline, &self.clock);
        self.enter(run, admission)
    }

    /// Acts on the gate's answer for the next attempt: makes it, waits for
    /// the rate limit's turn (phase `RateWait`) or in the concurrency
    /// limit's queue (phase `Queue`), or ends the call. A wait this clock
    /// [cannot make](AsyncClock::can_sleep) here is a refusal.
    fn enter(
        &mut self,
        run: &mut RunningProj<'_, Fut, C::Sleep, N::Future, T, E>,
        admission: Admission,
    ) -> Result<(), Result<T, RetryError<E>>> {
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
                Err(self.refused(run, Refused::Rate(refused)))
            }
            Admission::Queue(queue) => Err(self.refused(run, Refused::Limit(queue.give_up()))),
            Admission::Refused(refused) => Err(self.refused(run, refused)),
        }
    }

    /// Ends a call whose next attempt the gate refused: the grant it held
    /// goes back to the control; the stop and the error say who refused
    /// ([`Refused::reason`], [`RetryError::with_refusal`]).
    #[cold]
    fn refused(
        &mut self,
        run: &mut RunningProj<'_, Fut, C::Sleep, N::Future, T, E>,
        refused: Refused,
    ) -> Result<T, RetryError<E>> {
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
    fn launch(
        &mut self,
        run: &mut RunningProj<'_, Fut, C::Sleep, N::Future, T, E>,
    ) -> Result<(), Result<T, RetryError<E>>> {
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
        };
        self.policy.policy().attempt_starting(run.call, &self.clock);
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
    fn pending(
        &mut self,
        run: &mut RunningProj<'_, Fut, C::Sleep, N::Future, T, E>,
        cx: &mut Context<'_>,
    ) -> Stepped<T, E> {
        if self.poll_cancelled(cx) {
            return Poll::Ready(self.stop_cancelled(run));
        }
        Poll::Pending
    }

    fn stop_cancelled(
        &mut self,
        run: &mut RunningProj<'_, Fut, C::Sleep, N::Future, T, E>,
    ) -> Result<T, RetryError<E>> {
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

    fn finish(
        &self,
        run: &mut RunningProj<'_, Fut, C::Sleep, N::Future, T, E>,
        reason: StopReason,
    ) -> Result<T, RetryError<E>> {
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
fn ending<Fut, S, H, T, E>(run: &RunningProj<'_, Fut, S, H, T, E>) -> Ending {
    run.call.ending(*run.stop)
}

/// The output of a call that ended before it had a running stage.
#[cold]
fn finish<O: Finish<T, E>, T, E>(result: Result<T, RetryError<E>>) -> O::Output {
    let (result, ending) = ended_early(result);
    O::finish(result, || ending)
}
