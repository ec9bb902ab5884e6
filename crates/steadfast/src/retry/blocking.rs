use std::future::Ready;
use std::time::Duration;

use super::{Notice, Notify, Retry, cancel_reason, conclude};
use crate::backoff::Schedule;
use crate::call::{
    Attempt, AttemptSet, Ended, Ending, Finish, Lend, Refused, Reported, RetryError, StopReason,
    Verdict, ended_early,
};
use crate::cancel::CancelToken;
use crate::classify::Classify;
use crate::clock::Clock;
use crate::deadline::Deadline;
use crate::fallback::future::{Next, fall_back};
use crate::fallback::{Fallback, WithFallback};
use crate::policy::gate::{Admission, Ticket};
use crate::policy::{CallState, Decision, RetryPolicy};

/// The result with the ending `state` and `stop` describe.
fn ended<T, E>(
    result: Result<T, RetryError<E>>,
    state: &CallState,
    stop: Option<StopReason>,
) -> Ended<T, E> {
    (result, state.ending(stop))
}

impl<F, P, K, N, C, O, T, E, S> Retry<F, P, K, N, C, O>
where
    F: FnMut(Attempt) -> Result<T, E>,
    P: Lend<Policy = RetryPolicy<S>>,
    S: Schedule,
    K: Classify<T, E>,
    N: Notify<E, Future = Ready<()>>,
    C: Clock,
    O: Finish<T, E>,
{
    /// Runs the operation on this thread, retrying as the policy decides.
    ///
    /// # Errors
    /// A [`RetryError`] saying why the call stopped, with the last error
    /// (after [`report`](Self::report): a [`Report`](crate::call::Report)).
    ///
    /// Available when the operation returns a `Result` (made by
    /// [`retry_blocking`](super::BlockingRetryable::retry_blocking)); it
    /// sleeps the thread on the builder's [`Clock`].
    #[inline]
    pub fn call(mut self) -> O::Output {
        let policy = self.policy.policy();
        if policy.is_lean()
            && self.options.deadline.is_none()
            && !self
                .options
                .cancel
                .as_ref()
                .is_some_and(CancelToken::is_cancelled)
        {
            // The lean path: no control to ask, no clock to read, no state
            // to make; the attempt's deadline is the ambient one, already in
            // force. A success needs no more than this (and, with a
            // concurrency limit, its slot).
            // The gate (no deadline to bound a wait by): a call that must
            // wait, or is refused by a rate limit, goes to the full loop
            // with the gate's answer.
            let ticket = match policy.limits().admit(None, &[], &self.clock) {
                Admission::Admitted(ticket) => ticket,
                admission => return self.not_admitted(admission),
            };
            let attempt = Attempt {
                number: 1,
                deadline: crate::deadline::current(),
                in_flight: AttemptSet::new(),
                waited: Duration::ZERO,
                endpoint: ticket.endpoint(),
            };
            let outcome = (self.op)(attempt);
            let verdict = self.classify.classify(&outcome);
            if verdict != Verdict::Success {
                // Its ticket is finished once the full loop has recorded
                // where it went.
                return self.after_first(outcome, verdict, ticket);
            }
            ticket.finish(&self.classify, verdict, &outcome, &self.clock);
            return match outcome {
                Ok(value) => O::finish(Ok(value), || Ending::FIRST_SUCCESS),
                outcome => self.after_first(outcome, verdict, Ticket::FREE),
            };
        }
        self.call_on(Start::Fresh)
    }

    /// The gate did not admit the lean first attempt at once: a
    /// concurrency limit's refusal ends the call here, inline (no
    /// allocation); anything else goes to the full loop with the gate's
    /// answer. Out of line, so that the success path stays small.
    #[cold]
    #[inline(never)]
    fn not_admitted(self, admission: Admission) -> O::Output {
        match admission {
            Admission::Refused(Refused::Limit(refused)) => {
                let err = RetryError::limited(refused);
                let err = match self.options.name {
                    Some(name) => err.with_name(name),
                    None => err,
                };
                let (result, ending) = ended_early(Err(err));
                O::finish(result, || ending)
            }
            admission => self.call_on(Start::Admitting(admission)),
        }
    }

    /// The lean first attempt did not succeed: the full loop takes over.
    /// Cold, so that the success path is the straight line through `call`.
    #[cold]
    #[inline(never)]
    fn after_first(self, outcome: Result<T, E>, verdict: Verdict, ticket: Ticket) -> O::Output {
        self.call_on(Start::Made(outcome, verdict, ticket))
    }

    /// The full loop, then the output.
    #[inline(never)]
    fn call_on(self, start: Start<T, E>) -> O::Output {
        let (result, ending) = self.run(start);
        O::finish(result, || ending)
    }

    /// The full loop, from where the lean path left the call.
    fn run(mut self, start: Start<T, E>) -> Ended<T, E> {
        let policy = self.policy.policy();
        let name = self.options.name;
        let clock = &self.clock;
        let (mut first, mut admission) = match start {
            Start::Made(outcome, verdict, ticket) => (Some((outcome, verdict, ticket)), None),
            Start::Admitting(admission) => (None, Some(admission)),
            Start::Fresh => (None, None),
        };
        let mut state = if let Some((outcome, verdict, ticket)) = first.as_mut() {
            let mut state = policy.start(clock, self.options.deadline);
            let ticket = std::mem::take(ticket);
            state.went_to(&ticket);
            ticket.finish(&self.classify, *verdict, outcome, clock);
            state
        } else {
            match policy.admit_and_start(clock, self.options.deadline) {
                Ok(state) => state,
                Err(refusal) => return ended_early(Err(refused(policy, refusal.by, name))),
            }
        };
        let mut last: Option<Result<T, E>> = None;
        loop {
            if let Some(token) = &self.options.cancel
                && token.is_cancelled()
            {
                policy.abandon(&mut state);
                let now = clock.now();
                let reason = cancel_reason(&state, now);
                let result = conclude(last, reason, &state, now, name, false);
                return ended(result, &state, Some(reason));
            }
            let (outcome, verdict) = match first.take() {
                Some((outcome, verdict, _)) => (outcome, verdict),
                None => {
                    let admission = admission.take().unwrap_or_else(|| {
                        policy
                            .limits()
                            .admit(state.deadline(), state.avoid(), clock)
                    });
                    let ticket = match wait_for(
                        admission,
                        policy,
                        &mut state,
                        clock,
                        self.options.cancel.as_ref(),
                    ) {
                        Ok(ticket) => ticket,
                        Err(stopped) => {
                            policy.abandon(&mut state);
                            let now = clock.now();
                            let (reason, refused) = match stopped {
                                Stopped::Cancelled => (cancel_reason(&state, now), None),
                                Stopped::Refused(refused) => {
                                    let expired =
                                        state.deadline().is_some_and(|d| d.is_expired(now));
                                    (refused.reason(expired), Some(refused))
                                }
                            };
                            let result = conclude(last, reason, &state, now, name, false);
                            let result = match refused {
                                Some(refused) => result.map_err(|e| e.with_refusal(refused)),
                                None => result,
                            };
                            return ended(result, &state, Some(reason));
                        }
                    };
                    let attempt = Attempt {
                        number: state.attempts().saturating_add(1),
                        deadline: attempt_deadline(
                            state.deadline(),
                            policy.attempt_timeout(),
                            clock,
                        ),
                        in_flight: AttemptSet::new(),
                        waited: state.last_wait(),
                        endpoint: ticket.endpoint(),
                    };
                    policy.attempt_starting(&mut state, clock);
                    state.went_to(&ticket);
                    let outcome = match attempt.deadline {
                        Some(d) => crate::deadline::scope(d, || (self.op)(attempt)),
                        None => (self.op)(attempt),
                    };
                    let verdict = self.classify.classify(&outcome);
                    ticket.finish(&self.classify, verdict, &outcome, clock);
                    (outcome, verdict)
                }
            };
            match policy.decide(&mut state, verdict, clock) {
                Decision::Succeed => {
                    return match outcome {
                        Ok(value) => ended(Ok(value), &state, None),
                        // The classifier called an error final: hand it back.
                        Err(e) => {
                            let reason = StopReason::Permanent;
                            let now = clock.now();
                            let result = conclude(Some(Err(e)), reason, &state, now, name, false);
                            ended(result, &state, Some(reason))
                        }
                    };
                }
                Decision::Stop(reason) => {
                    let result = conclude(Some(outcome), reason, &state, clock.now(), name, false);
                    return ended(result, &state, Some(reason));
                }
                Decision::Retry(delay) => {
                    let notice = Notice::new(&state, outcome.as_ref().err(), delay, clock.now());
                    let () = self.notify.notify(&notice).into_inner();
                    last = Some(outcome);
                    if sleep(clock, delay, self.options.cancel.as_ref()) {
                        policy.abandon(&mut state);
                        let now = clock.now();
                        let reason = cancel_reason(&state, now);
                        let result = conclude(last, reason, &state, now, name, false);
                        return ended(result, &state, Some(reason));
                    }
                }
            }
        }
    }
}

/// Where the full loop starts: from nothing, from the gate's answer for
/// the first attempt (the lean path asked, and must wait or was refused),
/// or from the first attempt's outcome (the lean path made it).
enum Start<T, E> {
    Fresh,
    Admitting(Admission),
    Made(Result<T, E>, Verdict, Ticket),
}

/// Why an attempt's admission ended the call.
enum Stopped {
    Cancelled,
    Refused(Refused),
}

/// Waits on this thread as the gate's answer says (a rate limit's turn,
/// then a place in the concurrency limit's queue), never past the call's
/// deadline: the attempt's ticket, or why the call stops.
fn wait_for<S, C: Clock>(
    mut admission: Admission,
    policy: &RetryPolicy<S>,
    state: &mut CallState,
    clock: &C,
    cancel: Option<&CancelToken>,
) -> Result<Ticket, Stopped> {
    loop {
        admission = match admission {
            Admission::Admitted(ticket) => return Ok(ticket),
            Admission::Refused(refused) => {
                // Requeued when no endpoint is ready but one comes back at
                // a known time; otherwise the refusal ends the call.
                let Some(wait) = policy.requeue_refused(state, &refused, clock) else {
                    return Err(Stopped::Refused(refused));
                };
                if sleep(clock, wait, cancel) {
                    return Err(Stopped::Cancelled);
                }
                policy
                    .limits()
                    .admit(state.deadline(), state.avoid(), clock)
            }
            Admission::Turn(turn) => {
                state.mark_started(clock.now());
                if sleep(clock, turn.wait(), cancel) {
                    // Cancelled while waiting: the turn goes back.
                    return Err(Stopped::Cancelled);
                }
                turn.take(policy.limits(), state.avoid(), clock)
            }
            Admission::Queue(queue) => {
                state.mark_started(clock.now());
                let slot = queue.wait_blocking();
                match policy.limits().admitted(slot, state.avoid(), clock) {
                    Ok(ticket) => return Ok(ticket),
                    Err(refused) => Admission::Refused(refused),
                }
            }
        };
    }
}

/// Sleeps `delay` on `clock`; `true` when cut short by cancellation.
fn sleep<C: Clock>(clock: &C, delay: Duration, cancel: Option<&CancelToken>) -> bool {
    if delay.is_zero() {
        return cancel.is_some_and(CancelToken::is_cancelled);
    }
    match cancel {
        Some(token) => clock.sleep_blocking_cancellable(delay, token),
        None => {
            clock.sleep_blocking(delay);
            false
        }
    }
}

/// The deadline an attempt gets: the call's, narrowed by the per-attempt
/// timeout. Reads the clock only when there is a per-attempt timeout.
pub(super) fn attempt_deadline<C: Clock>(
    call: Option<Deadline>,
    timeout: Option<Duration>,
    clock: &C,
) -> Option<Deadline> {
    match timeout {
        Some(t) => Deadline::earliest(call, Some(Deadline::after(clock.now(), t))),
        None => call,
    }
}

/// The error for a call whose first attempt a control refused (with how
/// long the control says it goes on refusing, when it knows).
pub(super) fn refused<S, E>(
    policy: &RetryPolicy<S>,
    by: &'static str,
    name: Option<&'static str>,
) -> RetryError<E> {
    let retry_after = policy.control().and_then(|c| c.retry_after(by));
    // Inline, without an allocation: a refusal must cost no more than its answer.
    let err = RetryError::refused(by).with_refusal(Refused::Control { by, retry_after });
    match name {
        Some(name) => err.with_name(name),
        None => err,
    }
}

impl<F, P, K, N, C, O, T, E, S, Fb> WithFallback<Retry<F, P, K, N, C, Reported>, Fb, O>
where
    F: FnMut(Attempt) -> Result<T, E>,
    P: Lend<Policy = RetryPolicy<S>>,
    S: Schedule,
    K: Classify<T, E>,
    N: Notify<E, Future = Ready<()>>,
    C: Clock,
    O: Finish<T, E>,
    Fb: Fallback<T, E>,
{
    /// Runs the call on this thread, then its fallback if it failed for
    /// any reason but a cancellation.
    ///
    /// # Errors
    /// The fallback's error, or the call's when the fallback did not run
    /// (a cancellation).
    #[inline]
    pub fn call(self) -> O::Output {
        match fall_back(self.inner.call(), self.name) {
            Next::Done(report) => O::from_report(report),
            Next::FallBack(failure, ending) => {
                O::finish(self.fallback.fall_back(failure), || ending)
            }
        }
    }
}
