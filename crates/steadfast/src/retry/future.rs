use std::fmt;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use super::core::{Core, ErrOf, FutOf, OkOf, StageSlot};
use super::stage::{OutOfLine, Phase, Running};
use super::{Notify, Retry};
use crate::backoff::Schedule;
use crate::call::{Attempt, Finish, Lend, Plain, RetryError, TryOperation, Verdict, ended_early};
use crate::cancel::CancelToken;
use crate::classify::Classify;
use crate::clock::AsyncClock;
use crate::limit::Permit;
use crate::policy::RetryPolicy;
use crate::policy::gate::Ticket;

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
    pub struct RetryFuture<F, P, K, N, C, O = Plain>
    where
        F: TryOperation,
        N: Notify<ErrOf<F>>,
        C: AsyncClock,
    {
        core: Core<F, P, K, N, C>,
        output: PhantomData<fn() -> O>,
        // The lean first attempt. Apart from `running`, so that its
        // changes touch only this small value.
        #[pin]
        first: First<FutOf<F>>,
        // The running stage, once there is one; `None` again when done.
        running: StageSlot<F, C, N>,
    }
}

pin_project! {
    /// The lean first attempt of a [`RetryFuture`].
    #[project = FirstProj]
    enum First<Fut> {
        /// Not polled yet.
        Unpolled,
        /// A lean call's first attempt, before any per-call state exists,
        /// under limits that admit every attempt: there is no ticket to
        /// hold, so the state and its drop carry none.
        Polling {
            #[pin]
            attempt: Fut,
        },
        /// A lean call's first attempt under a rate or concurrency limit,
        /// with the gate's ticket (its slot, if the policy has a
        /// concurrency limit).
        Gated {
            #[pin]
            attempt: Fut,
            // The gate's slot: a lean policy has no endpoint set, so its
            // ticket is the slot alone (one word, not the three of a
            // ticket that may hold a pick: the future stays small).
            slot: Option<Permit>,
        },
        /// Over: the call succeeded, stopped, or the running stage took over.
        Over,
    }
}

impl<F, P, K, N, C, O> fmt::Debug for RetryFuture<F, P, K, N, C, O>
where
    F: TryOperation,
    N: Notify<ErrOf<F>>,
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
            (First::Polling { .. } | First::Gated { .. }, None) => {
                s.field("stage", &"first attempt")
            }
            (First::Over, None) => s.field("stage", &"done"),
        };
        s.finish_non_exhaustive()
    }
}

impl<F, P, K, N, C, O, S> IntoFuture for Retry<F, P, K, N, C, O>
where
    F: TryOperation,
    P: Lend<Policy = RetryPolicy<S>>,
    S: Schedule,
    K: Classify<OkOf<F>, ErrOf<F>>,
    N: Notify<ErrOf<F>>,
    C: AsyncClock,
    O: Finish<OkOf<F>, ErrOf<F>>,
{
    type Output = O::Output;
    type IntoFuture = RetryFuture<F, P, K, N, C, O>;

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
    /// `ticket` is the gate's for that first attempt
    /// ([`Limits::admit_now`](crate::policy::Limits::admit_now)): the call
    /// records the endpoint it went to (so the retry goes elsewhere), then
    /// finishes it with the outcome. [`Ticket::FREE`] when the caller asked
    /// no gate.
    ///
    /// ```
    /// use steadfast::policy::gate::Ticket;
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
    /// let value = op.retry(&policy).after_first_attempt(first, verdict, Ticket::FREE).await;
    /// assert_eq!(value, Ok(2)); // the core made attempt 2, which succeeded
    /// # Ok(())
    /// # }
    /// ```
    pub fn after_first_attempt<S>(
        self,
        outcome: Result<OkOf<F>, ErrOf<F>>,
        verdict: Verdict,
        ticket: Ticket,
    ) -> RetryFuture<F, P, K, N, C, O>
    where
        F: TryOperation,
        P: Lend<Policy = RetryPolicy<S>>,
        S: Schedule,
        K: Classify<OkOf<F>, ErrOf<F>>,
        N: Notify<ErrOf<F>>,
        C: AsyncClock,
        O: Finish<OkOf<F>, ErrOf<F>>,
    {
        let mut call = self
            .policy
            .policy()
            .start(&self.clock, self.options.deadline);
        call.went_to(&ticket);
        ticket.finish(&self.classify, verdict, &outcome, &self.clock);
        let mut run = Running::new(call);
        run.last = Some(outcome);
        run.phase = Phase::Decide(verdict);
        let mut future = self.into_future();
        future.first = First::Over;
        *future.running = Some(Box::pin(run));
        future
    }
}

impl<F, P, K, N, C, O, S> Future for RetryFuture<F, P, K, N, C, O>
where
    F: TryOperation,
    P: Lend<Policy = RetryPolicy<S>>,
    S: Schedule,
    K: Classify<OkOf<F>, ErrOf<F>>,
    N: Notify<ErrOf<F>>,
    C: AsyncClock,
    O: Finish<OkOf<F>, ErrOf<F>>,
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
                // A cancel that races with the attempt's completion lets
                // the completion win; otherwise it ends the call here.
                FirstProj::Polling { attempt } => {
                    let Poll::Ready(outcome) = attempt.poll(cx) else {
                        return cancelled_or_pending::<O, _, _, _>(core.lean_pending(cx), first);
                    };
                    first.set(First::Over);
                    let out = core.landed(this.running, outcome, Ticket::FREE, cx);
                    return out.map(|(r, e)| O::finish(r, || e));
                }
                FirstProj::Gated { attempt, slot } => {
                    let Poll::Ready(outcome) = attempt.poll(cx) else {
                        return cancelled_or_pending::<O, _, _, _>(core.lean_pending(cx), first);
                    };
                    let ticket = Ticket::from_slot(slot.take());
                    first.set(First::Over);
                    let out = core.landed(this.running, outcome, ticket, cx);
                    return out.map(|(r, e)| O::finish(r, || e));
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
                            return Poll::Ready(finish::<O, OkOf<F>, ErrOf<F>>(
                                core.cancelled_lean(false),
                            ));
                        }
                        // The gate (no deadline to bound a wait by). Limits
                        // that admit every attempt give nothing to hold, and
                        // the attempt is polled without a ticket: asked
                        // before `admit`, so the state never carries one.
                        // Otherwise a call that must wait, or is refused,
                        // goes to the running stage with the gate's answer.
                        let limits = core.policy.policy().limits();
                        if limits.admits_all() {
                            let attempt = core.op.attempt(Attempt::new(1));
                            first.set(First::Polling { attempt });
                            continue;
                        }
                        let slot = match limits.admit_lean(&core.clock) {
                            Ok(slot) => slot,
                            Err(admission) => {
                                first.set(First::Over);
                                return core
                                    .not_admitted(this.running, admission, cx)
                                    .map(|(r, e)| O::finish(r, || e));
                            }
                        };
                        let attempt = core.op.attempt(Attempt::new(1));
                        first.set(First::Gated { attempt, slot });
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

/// The lean first attempt is pending: the call's end if the cancel token
/// ended it ([`Core::lean_pending`]), else `Pending`.
#[inline(always)]
fn cancelled_or_pending<O: Finish<T, E>, T, E, Fut>(
    cancelled: Option<Result<T, RetryError<E>>>,
    mut first: Pin<&mut First<Fut>>,
) -> Poll<O::Output> {
    match cancelled {
        None => Poll::Pending,
        Some(done) => {
            first.set(First::Over);
            Poll::Ready(finish::<O, T, E>(done))
        }
    }
}

/// The output of a call that ended before it had a running stage.
#[cold]
fn finish<O: Finish<T, E>, T, E>(result: Result<T, RetryError<E>>) -> O::Output {
    let (result, ending) = ended_early(result);
    O::finish(result, || ending)
}
