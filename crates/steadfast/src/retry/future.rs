use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;

use super::blocking::{attempt_deadline, refused};
use super::{AsPolicy, Attempt, Notify, Retry, cancel_reason, conclude};
use crate::cancel::Cancelled;
use crate::deadline::WithDeadline;
use crate::hedge::AttemptSet;
use crate::{AsyncClock, CallState, Classify, Deadline, Decision, RetryError, StopReason, Verdict};

pin_project! {
    /// The async executor: the future a [`Retry`] becomes when awaited.
    ///
    /// Dropping it cancels the call: the attempt in flight and any wait are
    /// dropped with it, and nothing outlives it (no task is spawned).
    #[must_use = "futures do nothing unless polled"]
    #[project = RetryFutureProj]
    pub struct RetryFuture<F, Fut, P, K, N, C, T, E>
    where
        N: Notify<E>,
        C: AsyncClock,
    {
        // Everything that is not pinned, in one field: a projection then
        // costs four pointers, not sixteen.
        core: Core<F, P, K, N, C, T, E>,
        // The attempt in flight (phase `Attempt`).
        #[pin]
        attempt: Option<WithDeadline<Fut>>,
        // The attempt's deadline timer (phase `Attempt`) or the wait before
        // the next attempt (phase `Sleep`): never both at once.
        #[pin]
        timer: Option<C::Sleep>,
        // The notify hook's future (phase `Notify`).
        #[pin]
        hook: Option<N::Future>,
    }
}

/// The unpinned state of a [`RetryFuture`].
struct Core<F, P, K, N, C, T, E> {
    op: F,
    policy: P,
    classify: K,
    notify: N,
    clock: C,
    cancel: Option<Cancelled>,
    name: Option<&'static str>,
    deadline: Option<Deadline>,
    /// Made when the call first needs it: never, for a lean call (see
    /// `RetryPolicy::is_lean`) whose first attempt succeeds.
    call: Option<CallState>,
    last: Option<Result<T, E>>,
    timed_out: bool,
    phase: Phase,
}

/// Where a retry future is; the futures it drives live in its pinned slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Attempt,
    Notify(Duration),
    Sleep,
    Done,
}

impl<F, Fut, P, K, N, C, T, E> fmt::Debug for RetryFuture<F, Fut, P, K, N, C, T, E>
where
    N: Notify<E>,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryFuture")
            .field("name", &self.core.name)
            .field("phase", &self.core.phase)
            .field("call", &self.core.call)
            .field("timed_out", &self.core.timed_out)
            .finish_non_exhaustive()
    }
}

impl<F, Fut, P, K, N, C, T, E> IntoFuture for Retry<F, P, K, N, C>
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    P: AsPolicy,
    K: Classify<T, E>,
    N: Notify<E>,
    C: AsyncClock,
{
    type Output = Result<T, RetryError<E>>;
    type IntoFuture = RetryFuture<F, Fut, P, K, N, C, T, E>;

    fn into_future(self) -> Self::IntoFuture {
        RetryFuture {
            core: Core {
                op: self.op,
                policy: self.policy,
                classify: self.classify,
                notify: self.notify,
                clock: self.clock,
                cancel: self
                    .options
                    .cancel
                    .as_ref()
                    .map(crate::CancelToken::cancelled),
                name: self.options.name,
                deadline: self.options.deadline,
                call: None,
                last: None,
                timed_out: false,
                phase: Phase::Start,
            },
            attempt: None,
            timer: None,
            hook: None,
        }
    }
}

impl<F, Fut, P, K, N, C, T, E> Future for RetryFuture<F, Fut, P, K, N, C, T, E>
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    P: AsPolicy,
    K: Classify<T, E>,
    N: Notify<E>,
    C: AsyncClock,
{
    type Output = Result<T, RetryError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            if this
                .core
                .cancel
                .as_ref()
                .is_some_and(|c| c.token().is_cancelled())
            {
                return Poll::Ready(this.stop_cancelled());
            }
            match this.core.phase {
                Phase::Start => {
                    if this.core.policy.as_policy().is_lean()
                        && this.core.cancel.is_none()
                        && this.core.deadline.is_none()
                        && crate::deadline::current().is_none()
                    {
                        // The lean path: no control to ask, no time limit,
                        // nothing to cancel; no state until something fails.
                        let fut = WithDeadline::exactly((this.core.op)(Attempt::new(1)), None);
                        this.attempt.set(Some(fut));
                        this.core.phase = Phase::Attempt;
                        continue;
                    }
                    if let Err(refusal) = this.core.policy.as_policy().admit() {
                        this.core.phase = Phase::Done;
                        return Poll::Ready(Err(refused(refusal.by, this.core.name)));
                    }
                    this.start_attempt();
                }
                Phase::Attempt => {
                    let Some(fut) = this.attempt.as_mut().as_pin_mut() else {
                        unreachable!("an attempt is in flight in phase Attempt");
                    };
                    let (outcome, verdict) = match fut.poll(cx) {
                        Poll::Ready(outcome) => {
                            let verdict = this.core.classify.classify(&outcome);
                            if this.core.call.is_none() && verdict == Verdict::Success {
                                // The lean path's first attempt succeeded.
                                if let Ok(value) = outcome {
                                    this.core.phase = Phase::Done;
                                    return Poll::Ready(Ok(value));
                                }
                            }
                            this.attempt.set(None);
                            this.timer.set(None);
                            this.core.timed_out = false;
                            (Some(outcome), verdict)
                        }
                        Poll::Pending => match this.timer.as_mut().as_pin_mut().map(|t| t.poll(cx))
                        {
                            Some(Poll::Ready(())) => {
                                this.attempt.set(None);
                                this.timer.set(None);
                                this.core.timed_out = true;
                                let now = this.core.clock.now();
                                let call = state(
                                    &mut this.core.call,
                                    &this.core.policy,
                                    &this.core.clock,
                                    this.core.deadline,
                                );
                                if call.deadline().is_some_and(|d| d.is_expired(now)) {
                                    // The call's own deadline, not just the attempt's: stop.
                                    call.count_abandoned_attempt();
                                    this.core.phase = Phase::Done;
                                    return Poll::Ready(this.finish(StopReason::Deadline));
                                }
                                (None, Verdict::Retry)
                            }
                            _ => return this.pending(cx),
                        },
                    };
                    if let Some(done) = this.on_outcome(outcome, verdict) {
                        return Poll::Ready(done);
                    }
                }
                Phase::Notify(delay) => {
                    if let Some(hook) = this.hook.as_mut().as_pin_mut() {
                        if hook.poll(cx).is_pending() {
                            return this.pending(cx);
                        }
                        this.hook.set(None);
                    }
                    if delay.is_zero() {
                        // No timer for a zero wait: go straight to the next attempt.
                        this.start_attempt();
                    } else {
                        this.timer.set(Some(this.core.clock.sleep(delay)));
                        this.core.phase = Phase::Sleep;
                    }
                }
                Phase::Sleep => {
                    if let Some(sleep) = this.timer.as_mut().as_pin_mut() {
                        if sleep.poll(cx).is_pending() {
                            return this.pending(cx);
                        }
                        this.timer.set(None);
                    }
                    this.start_attempt();
                }
                Phase::Done => panic!("RetryFuture polled after it completed"),
            }
        }
    }
}

/// The call's state, made on first need (the policy starts the call then).
fn state<'a, P: AsPolicy, C: AsyncClock>(
    call: &'a mut Option<CallState>,
    policy: &P,
    clock: &C,
    deadline: Option<Deadline>,
) -> &'a mut CallState {
    call.get_or_insert_with(|| policy.as_policy().start(clock, deadline))
}

impl<F, Fut, P, K, N, C, T, E> RetryFutureProj<'_, F, Fut, P, K, N, C, T, E>
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    P: AsPolicy,
    N: Notify<E>,
    C: AsyncClock,
{
    /// Hands an attempt's outcome (`None`: it timed out) to the policy and
    /// acts on the decision: the call's result, or `None` after moving on
    /// to the notify hook and the wait.
    fn on_outcome(
        &mut self,
        outcome: Option<Result<T, E>>,
        verdict: Verdict,
    ) -> Option<Result<T, RetryError<E>>> {
        let call = state(
            &mut self.core.call,
            &self.core.policy,
            &self.core.clock,
            self.core.deadline,
        );
        let decision = self
            .core
            .policy
            .as_policy()
            .decide(call, verdict, &self.core.clock);
        let attempts = call.attempts();
        match decision {
            Decision::Succeed => {
                self.core.phase = Phase::Done;
                Some(match outcome {
                    Some(Ok(value)) => Ok(value),
                    other => {
                        // The classifier called an error (or a timeout) final.
                        self.core.last = other;
                        self.finish(StopReason::Permanent)
                    }
                })
            }
            Decision::Stop(reason) => {
                self.core.phase = Phase::Done;
                if outcome.is_some() {
                    self.core.last = outcome;
                }
                Some(self.finish(reason))
            }
            Decision::Retry(delay) => {
                let error = outcome.as_ref().and_then(|o| o.as_ref().err());
                let hook = self.core.notify.notify(attempts, error, delay);
                if outcome.is_some() {
                    self.core.last = outcome;
                }
                self.hook.set(Some(hook));
                self.core.phase = Phase::Notify(delay);
                None
            }
        }
    }

    /// Makes the next attempt's future, with a timer for its deadline if it has one.
    fn start_attempt(&mut self) {
        let call = state(
            &mut self.core.call,
            &self.core.policy,
            &self.core.clock,
            self.core.deadline,
        );
        let deadline = attempt_deadline(
            call.deadline(),
            self.core.policy.as_policy().attempt_timeout(),
            &self.core.clock,
        );
        let attempt = Attempt {
            number: call.attempts().saturating_add(1),
            deadline,
            in_flight: AttemptSet::new(),
        };
        let timer = deadline.map(|d| self.core.clock.sleep(d.remaining(self.core.clock.now())));
        self.timer.set(timer);
        self.attempt.set(Some(WithDeadline::exactly(
            (self.core.op)(attempt),
            deadline,
        )));
        self.core.phase = Phase::Attempt;
    }

    /// Waits: registers with the cancellation token only now, so a call
    /// whose attempt completes at once never touches it.
    fn pending(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, RetryError<E>>> {
        if let Some(cancel) = self.core.cancel.as_mut()
            && Pin::new(cancel).poll(cx).is_ready()
        {
            return Poll::Ready(self.stop_cancelled());
        }
        Poll::Pending
    }

    fn stop_cancelled(&mut self) -> Result<T, RetryError<E>> {
        let now = self.core.clock.now();
        let call = state(
            &mut self.core.call,
            &self.core.policy,
            &self.core.clock,
            self.core.deadline,
        );
        if self.core.phase == Phase::Attempt {
            call.count_abandoned_attempt();
        } else {
            self.core.policy.as_policy().abandon(call);
        }
        self.core.phase = Phase::Done;
        self.attempt.set(None);
        self.timer.set(None);
        self.hook.set(None);
        let reason = cancel_reason(call, now);
        conclude(
            self.core.last.take(),
            reason,
            call,
            now,
            self.core.name,
            false,
        )
    }

    fn finish(&mut self, reason: StopReason) -> Result<T, RetryError<E>> {
        let now = self.core.clock.now();
        let call = state(
            &mut self.core.call,
            &self.core.policy,
            &self.core.clock,
            self.core.deadline,
        );
        conclude(
            self.core.last.take(),
            reason,
            call,
            now,
            self.core.name,
            self.core.timed_out,
        )
    }
}
