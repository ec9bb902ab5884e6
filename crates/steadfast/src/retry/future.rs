use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
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
        op: F,
        policy: P,
        classify: K,
        notify: N,
        clock: C,
        cancel: Option<Cancelled>,
        name: Option<&'static str>,
        deadline: Option<Deadline>,
        // Made when the call first needs it: never, for a lean call whose
        // first attempt succeeds.
        call: Option<CallState>,
        last: Option<Result<T, E>>,
        timed_out: bool,
        // The lean path (see `RetryPolicy::is_lean`): the first attempt runs
        // here, with no state, timer or cancellation around it.
        lean: bool,
        #[pin]
        first: Option<Fut>,
        #[pin]
        phase: Phase<WithDeadline<Fut>, N::Future, C::Sleep>,
    }
}

pin_project! {
    #[project = PhaseProj]
    enum Phase<Fut, H, S> {
        Start,
        Attempt { #[pin] fut: Fut, #[pin] timer: Option<S> },
        Notify { #[pin] hook: H, delay: Duration },
        Sleep { #[pin] sleep: S },
        Done,
    }
}

impl<F, Fut, P, K, N, C, T, E> fmt::Debug for RetryFuture<F, Fut, P, K, N, C, T, E>
where
    N: Notify<E>,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryFuture")
            .field("name", &self.name)
            .field("call", &self.call)
            .field("timed_out", &self.timed_out)
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
        let lean = self.policy.as_policy().is_lean()
            && self.options.cancel.is_none()
            && self.options.deadline.is_none();
        RetryFuture {
            lean,
            first: None,
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
        if *this.lean {
            if this.first.is_none() {
                if crate::deadline::current().is_some() {
                    // An ambient deadline needs a timer: the full path.
                    *this.lean = false;
                } else {
                    this.first.set(Some((this.op)(Attempt::new(1))));
                }
            }
            if let Some(fut) = this.first.as_mut().as_pin_mut() {
                let outcome = ready!(fut.poll(cx));
                this.first.set(None);
                *this.lean = false;
                let verdict = this.classify.classify(&outcome);
                match outcome {
                    Ok(value) if verdict == Verdict::Success => return Poll::Ready(Ok(value)),
                    outcome => {
                        if let Some(done) = this.on_outcome(Some(outcome), verdict) {
                            return Poll::Ready(done);
                        }
                    }
                }
            }
        }
        loop {
            if this
                .cancel
                .as_ref()
                .is_some_and(|c| c.token().is_cancelled())
            {
                return Poll::Ready(this.stop_cancelled());
            }
            match this.phase.as_mut().project() {
                PhaseProj::Start => {
                    if let Err(refusal) = this.policy.as_policy().admit() {
                        this.phase.set(Phase::Done);
                        return Poll::Ready(Err(refused(refusal.by, *this.name)));
                    }
                    state(this.call, this.policy, this.clock, *this.deadline);
                    this.start_attempt();
                }
                PhaseProj::Attempt { fut, timer } => {
                    let (outcome, verdict) = match fut.poll(cx) {
                        Poll::Ready(outcome) => {
                            let verdict = this.classify.classify(&outcome);
                            *this.timed_out = false;
                            (Some(outcome), verdict)
                        }
                        Poll::Pending => match timer.as_pin_mut().map(|t| t.poll(cx)) {
                            Some(Poll::Ready(())) => {
                                let now = this.clock.now();
                                let call =
                                    state(this.call, this.policy, this.clock, *this.deadline);
                                if call.deadline().is_some_and(|d| d.is_expired(now)) {
                                    // The call's own deadline, not just the attempt's: stop.
                                    this.phase.set(Phase::Done);
                                    *this.timed_out = true;
                                    call.count_abandoned_attempt();
                                    return Poll::Ready(this.finish(StopReason::Deadline));
                                }
                                *this.timed_out = true;
                                (None, Verdict::Retry)
                            }
                            _ => return this.pending(cx),
                        },
                    };
                    if let Some(done) = this.on_outcome(outcome, verdict) {
                        return Poll::Ready(done);
                    }
                }
                PhaseProj::Notify { hook, delay } => {
                    if hook.poll(cx).is_pending() {
                        return this.pending(cx);
                    }
                    if delay.is_zero() {
                        // No timer for a zero wait: go straight to the next attempt.
                        this.start_attempt();
                    } else {
                        let sleep = this.clock.sleep(*delay);
                        this.phase.set(Phase::Sleep { sleep });
                    }
                }
                PhaseProj::Sleep { sleep } => {
                    if sleep.poll(cx).is_pending() {
                        return this.pending(cx);
                    }
                    this.start_attempt();
                }
                PhaseProj::Done => panic!("RetryFuture polled after it completed"),
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
        let call = state(self.call, self.policy, self.clock, *self.deadline);
        let decision = self.policy.as_policy().decide(call, verdict, self.clock);
        let attempts = call.attempts();
        match decision {
            Decision::Succeed => {
                self.phase.set(Phase::Done);
                Some(match outcome {
                    Some(Ok(value)) => Ok(value),
                    other => {
                        // The classifier called an error (or a timeout) final.
                        *self.last = other;
                        self.finish(StopReason::Permanent)
                    }
                })
            }
            Decision::Stop(reason) => {
                self.phase.set(Phase::Done);
                if outcome.is_some() {
                    *self.last = outcome;
                }
                Some(self.finish(reason))
            }
            Decision::Retry(delay) => {
                let error = outcome.as_ref().and_then(|o| o.as_ref().err());
                let hook = self.notify.notify(attempts, error, delay);
                if outcome.is_some() {
                    *self.last = outcome;
                }
                self.phase.set(Phase::Notify { hook, delay });
                None
            }
        }
    }

    /// Makes the next attempt's future, with a timer for its deadline if it has one.
    fn start_attempt(&mut self) {
        let call = state(self.call, self.policy, self.clock, *self.deadline);
        let deadline = attempt_deadline(
            call.deadline(),
            self.policy.as_policy().attempt_timeout(),
            self.clock,
        );
        let attempt = Attempt {
            number: call.attempts().saturating_add(1),
            deadline,
            in_flight: AttemptSet::new(),
        };
        let timer = deadline.map(|d| self.clock.sleep(d.remaining(self.clock.now())));
        let fut = WithDeadline::exactly((self.op)(attempt), deadline);
        self.phase.set(Phase::Attempt { fut, timer });
    }

    /// Waits: registers with the cancellation token only now, so a call
    /// whose attempt completes at once never touches it.
    fn pending(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, RetryError<E>>> {
        if let Some(cancel) = self.cancel.as_mut()
            && Pin::new(cancel).poll(cx).is_ready()
        {
            return Poll::Ready(self.stop_cancelled());
        }
        Poll::Pending
    }

    fn stop_cancelled(&mut self) -> Result<T, RetryError<E>> {
        let now = self.clock.now();
        let call = state(self.call, self.policy, self.clock, *self.deadline);
        if matches!(self.phase.as_mut().project(), PhaseProj::Attempt { .. }) {
            call.count_abandoned_attempt();
        }
        self.phase.set(Phase::Done);
        let reason = cancel_reason(call, now);
        conclude(self.last.take(), reason, call, now, *self.name, false)
    }

    fn finish(&mut self, reason: StopReason) -> Result<T, RetryError<E>> {
        let now = self.clock.now();
        let call = state(self.call, self.policy, self.clock, *self.deadline);
        conclude(
            self.last.take(),
            reason,
            call,
            now,
            *self.name,
            *self.timed_out,
        )
    }
}
