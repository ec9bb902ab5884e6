use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;

use super::blocking::{attempt_deadline, refused};
use super::{AsPolicy, Attempt, Notify, Retry, cancel_reason, conclude};
use crate::cancel::Cancelled;
use crate::hedge::AttemptSet;
use crate::{AsyncClock, CallState, Classify, Decision, RetryError, StopReason, Verdict};

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
        call: CallState,
        last: Option<Result<T, E>>,
        timed_out: bool,
        #[pin]
        phase: Phase<Fut, N::Future, C::Sleep>,
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
        let call = self
            .policy
            .as_policy()
            .start(&self.clock, self.options.deadline);
        RetryFuture {
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
            call,
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
                                if this.call.deadline().is_some_and(|d| d.is_expired(now)) {
                                    // The call's own deadline, not just the attempt's: stop.
                                    this.phase.set(Phase::Done);
                                    *this.timed_out = true;
                                    this.call.count_abandoned_attempt();
                                    return Poll::Ready(this.finish(StopReason::Deadline));
                                }
                                *this.timed_out = true;
                                (None, Verdict::Retry)
                            }
                            _ => return this.pending(cx),
                        },
                    };
                    match this
                        .policy
                        .as_policy()
                        .decide(this.call, verdict, this.clock)
                    {
                        Decision::Succeed => {
                            this.phase.set(Phase::Done);
                            return Poll::Ready(match outcome {
                                Some(Ok(value)) => Ok(value),
                                other => {
                                    *this.last = other;
                                    this.finish(StopReason::Permanent)
                                }
                            });
                        }
                        Decision::Stop(reason) => {
                            this.phase.set(Phase::Done);
                            if outcome.is_some() {
                                *this.last = outcome;
                            }
                            return Poll::Ready(this.finish(reason));
                        }
                        Decision::Retry(delay) => {
                            let error = outcome.as_ref().and_then(|o| o.as_ref().err());
                            let hook = this.notify.notify(this.call.attempts(), error, delay);
                            if outcome.is_some() {
                                *this.last = outcome;
                            }
                            this.phase.set(Phase::Notify { hook, delay });
                        }
                    }
                }
                PhaseProj::Notify { hook, delay } => {
                    if hook.poll(cx).is_pending() {
                        return this.pending(cx);
                    }
                    let sleep = this.clock.sleep(*delay);
                    this.phase.set(Phase::Sleep { sleep });
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

impl<F, Fut, P, K, N, C, T, E> RetryFutureProj<'_, F, Fut, P, K, N, C, T, E>
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future<Output = Result<T, E>>,
    P: AsPolicy,
    N: Notify<E>,
    C: AsyncClock,
{
    /// Makes the next attempt's future, with a timer for its deadline if it has one.
    fn start_attempt(&mut self) {
        let policy = self.policy.as_policy();
        let deadline = attempt_deadline(self.call.deadline(), policy.attempt_timeout(), self.clock);
        let attempt = Attempt {
            number: self.call.attempts().saturating_add(1),
            deadline,
            in_flight: AttemptSet::new(),
        };
        let timer = deadline.map(|d| self.clock.sleep(d.remaining(self.clock.now())));
        let fut = (self.op)(attempt);
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
        if matches!(self.phase.as_mut().project(), PhaseProj::Attempt { .. }) {
            self.call.count_abandoned_attempt();
        }
        self.phase.set(Phase::Done);
        let reason = cancel_reason(self.call, now);
        conclude(self.last.take(), reason, self.call, now, *self.name, false)
    }

    fn finish(&mut self, reason: StopReason) -> Result<T, RetryError<E>> {
        let now = self.clock.now();
        conclude(
            self.last.take(),
            reason,
            self.call,
            now,
            *self.name,
            *self.timed_out,
        )
    }
}
