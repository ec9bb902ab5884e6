use std::future::Ready;
use std::time::Duration;

use super::{Notice, Notify, Retry, cancel_reason, conclude};
use crate::backoff::Schedule;
use crate::call::{
    Attempt, AttemptSet, Ended, Ending, Finish, Lend, Reported, RetryError, StopReason, Verdict,
    ended_early,
};
use crate::cancel::CancelToken;
use crate::classify::Classify;
use crate::clock::Clock;
use crate::deadline::Deadline;
use crate::fallback::future::{Next, fall_back};
use crate::fallback::{Fallback, WithFallback};
use crate::limit::{Permit, Signal};
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
            // The rate limit's word first: a refusal goes to the full loop,
            // which refuses it with its reason.
            if policy
                .limits()
                .rate_limit()
                .is_some_and(|rate| rate.check().is_err())
            {
                return self.call_on(None);
            }
            let permit = match policy.limits().concurrency_limit() {
                None => None,
                Some(limit) => match limit.try_take() {
                    Some(permit) => Some(permit),
                    None if limit.max_queue_wait().is_some() => return self.call_on(None),
                    None => {
                        let refused = limit.refusal(Duration::ZERO);
                        let err = RetryError::limited(refused);
                        let err = match self.options.name {
                            Some(name) => err.with_name(name),
                            None => err,
                        };
                        let (result, ending) = ended_early(Err(err));
                        return O::finish(result, || ending);
                    }
                },
            };
            let attempt = Attempt {
                number: 1,
                deadline: crate::deadline::current(),
                in_flight: AttemptSet::new(),
                waited: Duration::ZERO,
            };
            let outcome = (self.op)(attempt);
            let verdict = self.classify.classify(&outcome);
            if let Some(permit) = permit {
                give_back(&self.classify, permit, verdict, &outcome);
            }
            return match outcome {
                Ok(value) if verdict == Verdict::Success => {
                    O::finish(Ok(value), || Ending::FIRST_SUCCESS)
                }
                outcome => self.after_first(outcome, verdict),
            };
        }
        self.call_on(None)
    }

    /// The lean first attempt did not succeed: the full loop takes over.
    /// Cold, so that the success path is the straight line through `call`.
    #[cold]
    #[inline(never)]
    fn after_first(self, outcome: Result<T, E>, verdict: Verdict) -> O::Output {
        self.call_on(Some((outcome, verdict)))
    }

    /// The full loop, then the output.
    #[inline(never)]
    fn call_on(self, first: Option<(Result<T, E>, Verdict)>) -> O::Output {
        let (result, ending) = self.run(first);
        O::finish(result, || ending)
    }

    /// The full loop; `first` is the first attempt's outcome when the lean
    /// path already made it.
    fn run(mut self, mut first: Option<(Result<T, E>, Verdict)>) -> Ended<T, E> {
        let policy = self.policy.policy();
        let name = self.options.name;
        let clock = &self.clock;
        let mut state = if first.is_some() {
            policy.start(clock, self.options.deadline)
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
                Some(made) => made,
                None => {
                    // The rate limit's admission: at once, or after the turn
                    // it booked (never past the deadline).
                    if let Some(rate) = policy.limits().rate_limit() {
                        let now = clock.now();
                        let max = policy.limits().rate_limit_max_wait();
                        let bound = state.deadline().map_or(max, |d| max.min(d.remaining(now)));
                        match rate.reserve(1, bound) {
                            Ok(turn) => {
                                if !turn.wait().is_zero() {
                                    state.mark_started(now);
                                    if sleep(clock, turn.wait(), self.options.cancel.as_ref()) {
                                        // Cancelled while waiting: the turn goes back.
                                        drop(turn);
                                        policy.abandon(&mut state);
                                        let now = clock.now();
                                        let reason = cancel_reason(&state, now);
                                        let result =
                                            conclude(last, reason, &state, now, name, false);
                                        return ended(result, &state, Some(reason));
                                    }
                                }
                                turn.admit();
                            }
                            Err(refused) => {
                                policy.abandon(&mut state);
                                let reason = StopReason::Throttled;
                                let result =
                                    conclude(last, reason, &state, clock.now(), name, false)
                                        .map_err(|e| {
                                            e.with_refused_by(Some(refused.by))
                                                .with_refused_for(refused.retry_after)
                                        });
                                return ended(result, &state, Some(reason));
                            }
                        }
                    }
                    let permit = match take_slot(policy, &mut state, clock) {
                        Ok(permit) => permit,
                        Err(refused) => {
                            policy.abandon(&mut state);
                            let now = clock.now();
                            let reason = if state.deadline().is_some_and(|d| d.is_expired(now)) {
                                StopReason::Deadline
                            } else {
                                StopReason::LimitReached
                            };
                            let result = conclude(last, reason, &state, now, name, false)
                                .map_err(|e| e.with_limit_refused(Some(refused)));
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
                    };
                    policy.attempt_starting(&mut state, clock);
                    let outcome = match attempt.deadline {
                        Some(d) => crate::deadline::scope(d, || (self.op)(attempt)),
                        None => (self.op)(attempt),
                    };
                    let verdict = self.classify.classify(&outcome);
                    if let Some(permit) = permit {
                        give_back(&self.classify, permit, verdict, &outcome);
                    }
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

/// The next attempt's slot of the policy's concurrency limit (`None`
/// without a limit), waiting in its queue for up to its `max_wait` and the
/// call's time left.
fn take_slot<S, C: Clock>(
    policy: &RetryPolicy<S>,
    state: &mut CallState,
    clock: &C,
) -> Result<Option<Permit>, crate::call::LimitRefused> {
    let Some(limit) = policy.limits().concurrency_limit() else {
        return Ok(None);
    };
    let wait = match (limit.max_queue_wait(), state.deadline()) {
        (None, _) => Duration::ZERO,
        (Some(max), None) => max,
        (Some(max), Some(deadline)) => max.min(deadline.remaining(clock.now())),
    };
    if wait.is_zero() {
        limit
            .try_take()
            .map(Some)
            .ok_or_else(|| limit.refusal(Duration::ZERO))
    } else {
        if let Some(permit) = limit.try_take() {
            return Ok(Some(permit));
        }
        state.mark_started(clock.now());
        limit.acquire_blocking(wait).map(Some)
    }
}

/// Gives an attempt's slot back with what its outcome says ([`Signal::of`]).
fn give_back<K: Classify<T, E>, T, E>(
    classify: &K,
    permit: Permit,
    verdict: Verdict,
    outcome: &Result<T, E>,
) {
    let overloaded = verdict != Verdict::Success && classify.overloaded(outcome);
    permit.finish(Signal::of(verdict, overloaded));
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
    let refused_for = policy.control().and_then(|c| c.refusal_ends_in(by));
    // Inline, without an allocation: a refusal must cost no more than its answer.
    let err = RetryError::refused(by).with_refused_for(refused_for);
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
    pub fn call(self) -> O::Output {
        match fall_back(self.inner.call(), self.name) {
            Next::Done(report) => O::from_report(report),
            Next::FallBack(failure, ending) => {
                O::finish(self.fallback.fall_back(failure), || ending)
            }
        }
    }
}
