//! [`CallState`], the per-call state of a retried call, and the rules that
//! advance it: [`RetryPolicy::decide`] and its companions.

use std::time::{Duration, Instant};

use super::gate::Ticket;
use super::{Decision, RetryPolicy};
use crate::backoff::{Schedule, ScheduleState};
use crate::call::{Ending, EndpointId, Refused, StopReason, Tried, Verdict};
use crate::clock::Clock;
use crate::control::{Grant, Refusal};
use crate::deadline::Deadline;
use crate::rng::Rng;

/// The per-call state a [`RetryPolicy`] advances: plain data, made on the
/// stack when a call starts.
///
/// Making it reads no clock (unless the policy has a `max_elapsed`) and draws
/// no random number; the random source is seeded only when the first retry
/// is scheduled.
#[derive(Debug, Clone)]
pub struct CallState {
    attempts: u32,
    /// Attempts that never reached a server and were sent again elsewhere.
    requeues: u32,
    deadline: Option<Deadline>,
    started: Option<Instant>,
    refused_by: Option<&'static str>,
    /// A permission the control granted (the call's admission, or a retry)
    /// whose attempt has not finished yet.
    granted: Option<Grant>,
    /// When the attempt in flight started, for a control that wants
    /// durations (see [`RetryPolicy::attempt_starting`]).
    attempt_started: Option<Instant>,
    /// The backoff progress and the random source, made at the first
    /// retry: a call that succeeds at once never initialises them.
    backoff: Option<(ScheduleState, Rng)>,
    /// The sum of the waits decided so far (after every cap).
    waited: Duration,
    /// The last wait decided (after every cap): the one before the next
    /// attempt.
    last_wait: Duration,
    /// The endpoints the call's attempts went to (under an endpoint set).
    tried: Tried,
}

impl CallState {
    /// Attempts finished so far (each [`RetryPolicy::decide`] counts one,
    /// but a requeued one: see [`requeues`](Self::requeues)).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Attempts that certainly never reached a server
    /// ([`Verdict::Unsent`]) and were sent again elsewhere without
    /// counting as attempts ([`RetryPolicyBuilder::max_requeues`](crate::policy::RetryPolicyBuilder::max_requeues)).
    #[must_use]
    pub fn requeues(&self) -> u32 {
        self.requeues
    }

    /// The call's effective overall deadline, if any.
    #[must_use]
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// When the call started, if a clock was read for it (only calls with a
    /// time limit read the clock up front) — otherwise when its first
    /// failure was decided.
    #[must_use]
    pub fn started(&self) -> Option<Instant> {
        self.started
    }

    /// Time since [`started`](Self::started) at `now` (zero if never read).
    #[must_use]
    pub fn elapsed(&self, now: Instant) -> Duration {
        self.started
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
    }

    /// The endpoints the call's attempts went to, oldest first (the last
    /// eight), under a policy with an [endpoint set](crate::endpoint::Endpoints);
    /// empty without one.
    pub fn endpoints(&self) -> impl Iterator<Item = EndpointId> + '_ {
        self.tried.ids()
    }

    /// The endpoints the next attempt's pick avoids: those tried.
    #[must_use]
    pub fn avoid(&self) -> &[EndpointId] {
        self.tried.avoid()
    }

    /// Records where the attempt holding `ticket` went (its endpoint, if
    /// the gate picked one): the next pick avoids it, the call's error
    /// names it. Executors call it for every attempt, before finishing its
    /// ticket.
    pub fn went_to(&mut self, ticket: &Ticket) {
        if let Some((id, label)) = ticket.picked() {
            self.tried.push(id, label);
        }
    }

    /// Where the call's attempts went, for its error.
    pub(crate) fn tried(&self) -> &Tried {
        &self.tried
    }

    /// The control that refused the call's last retry, if one did.
    #[must_use]
    pub fn refused_by(&self) -> Option<&'static str> {
        self.refused_by
    }

    /// The backoff progress (retries scheduled, last delay, total delay),
    /// once the call has retried.
    #[must_use]
    pub fn schedule_state(&self) -> Option<&ScheduleState> {
        self.backoff.as_ref().map(|(s, _)| s)
    }

    /// The sum of the waits [`decide`](RetryPolicy::decide) has asked for
    /// so far, as taken (after `max_delay` and every other cap).
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The last wait [`decide`](RetryPolicy::decide) asked for, as taken:
    /// the one before the next attempt (zero before the first retry).
    #[must_use]
    pub fn last_wait(&self) -> Duration {
        self.last_wait
    }

    /// Counts an attempt that was abandoned before it finished (cut off by
    /// the deadline or a cancellation), so errors report it as made.
    pub(crate) fn count_abandoned_attempt(&mut self) {
        self.attempts = self.attempts.saturating_add(1);
    }

    /// How the call ended, for a report: its attempts and waits, stopping
    /// for `stop` (`None`: a success).
    pub(crate) fn ending(&self, stop: Option<StopReason>) -> Ending {
        Ending {
            attempts: self.attempts,
            stop,
            waited: self.waited,
            hedge: None,
            fell_back: false,
            endpoint: self.tried.last_id(),
            requeues: self.requeues,
        }
    }

    /// Notes `now` as the call's start if no clock was read for it yet (a
    /// call that waits, in a concurrency limit's queue, before its first
    /// attempt: its error then says how long the call took).
    pub(crate) fn mark_started(&mut self, now: Instant) {
        self.started.get_or_insert(now);
    }

    /// Narrows the call's deadline (it can only move earlier).
    pub fn shrink_deadline(&mut self, deadline: Deadline) {
        self.deadline = Deadline::earliest(self.deadline, Some(deadline));
    }
}

impl<S: Schedule> RetryPolicy<S> {
    /// Asks the retry control whether a new call may start at all
    /// (client-side throttling refuses first attempts; the others admit).
    ///
    /// # Errors
    /// The control's [`Refusal`]: the call must not be made.
    #[inline]
    pub fn admit(&self) -> Result<(), Refusal> {
        match self.limits.control() {
            Some(control) => control.admit(),
            None => Ok(()),
        }
    }

    /// Asks the control to [`admit`](Self::admit) the call and, if it does,
    /// [starts](Self::start) it. The state remembers the admission until the
    /// first attempt finishes, so a call that stops before its first attempt
    /// is sent gives it back with [`abandon`](Self::abandon) (a circuit
    /// breaker's probe slot, a budget's deposit).
    ///
    /// # Errors
    /// The control's [`Refusal`]: the call must not be made.
    #[inline]
    pub fn admit_and_start<C: Clock>(
        &self,
        clock: &C,
        deadline: Option<Deadline>,
    ) -> Result<CallState, Refusal> {
        self.admit()?;
        let mut state = self.start(clock, deadline);
        if self.limits.control().is_some() {
            state.granted = Some(Grant::Admit);
        }
        Ok(state)
    }

    /// Notes that an attempt of the call starts now. Reads the clock only
    /// when the control [wants durations](crate::control::RetryControl::wants_durations)
    /// (worked out once, when the policy was built); then the control hears
    /// the attempt's duration with its outcome. Executors call it right
    /// before each attempt; without it the control hears outcomes alone.
    #[inline]
    pub fn attempt_starting<C: Clock>(&self, state: &mut CallState, clock: &C) {
        if self.timed {
            state.attempt_started = Some(clock.now());
        }
    }

    /// Starts a call: its state, with its effective deadline (the earliest of
    /// `deadline`, the ambient deadline and `max_elapsed` from now).
    ///
    /// Reads `clock` only when the policy has a `max_elapsed`.
    #[inline]
    pub fn start<C: Clock>(&self, clock: &C, deadline: Option<Deadline>) -> CallState {
        let (deadline, started) = self.limits.deadline(deadline, || clock.now());
        CallState {
            attempts: 0,
            requeues: 0,
            deadline,
            started,
            refused_by: None,
            granted: None,
            attempt_started: None,
            backoff: None,
            waited: Duration::ZERO,
            last_wait: Duration::ZERO,
            tried: Tried::default(),
        }
    }

    /// Decides what follows the attempt just finished, whose outcome the
    /// classifier judged `verdict`: succeed, retry after a delay, or stop.
    ///
    /// The rules, in order:
    /// 1. the retry control hears the outcome (a success, or a retryable failure);
    /// 2. `Success` succeeds; `Stop` stops as [`StopReason::Permanent`], and
    ///    so does [`Verdict::StopSending`] once the control has heard it as
    ///    a failure;
    /// 3. under an endpoint set, a failure that never reached a server
    ///    ([`Verdict::Unsent`]) is *requeued* while the call has requeues
    ///    left ([`max_requeues`](crate::policy::RetryPolicyBuilder::max_requeues))
    ///    and an endpoint it has not tried is eligible: the retry control
    ///    is charged as for a retry (and may refuse: stop as
    ///    [`StopReason::Throttled`]), and the request goes again at once,
    ///    the attempt not counted (the next one keeps its number: the
    ///    server never saw this one); otherwise it is a retry like
    ///    [`Verdict::Retry`];
    /// 4. when `max_attempts` (counting the first) are spent, stop as
    ///    [`StopReason::Exhausted`]; likewise when the schedule runs out;
    /// 5. the delay is the schedule's next one, or the server's hint for
    ///    [`Verdict::RetryAfter`] (after which the curve starts over); either
    ///    is capped at `max_delay`. Under an [endpoint set](crate::endpoint::Endpoints),
    ///    a hint is its endpoint's: while an endpoint the call has not tried
    ///    is eligible, the retry goes there on the schedule's delay instead;
    /// 6. a wait that would end at or past the deadline is not taken: stop as
    ///    [`StopReason::Deadline`] now, so no sleep is ever longer than the
    ///    time left;
    /// 7. the retry control may refuse the retry: stop as
    ///    [`StopReason::Throttled`].
    ///
    /// Reads `clock` only for a failure, never for a success (unless the
    /// control [wants durations](crate::control::RetryControl::wants_durations) and
    /// the executor timed the attempt with
    /// [`attempt_starting`](Self::attempt_starting)).
    #[inline]
    pub fn decide<C: Clock>(&self, state: &mut CallState, verdict: Verdict, clock: &C) -> Decision {
        state.attempts = state.attempts.saturating_add(1);
        state.granted = None;
        if verdict == Verdict::Success {
            self.limits.hear(verdict, || {
                let started = state.attempt_started.take()?;
                Some(clock.now().saturating_duration_since(started))
            });
            return Decision::Succeed;
        }
        self.decide_failure(state, verdict, clock)
    }

    /// [`decide`](Self::decide) for everything but a success, kept out of
    /// line so the success path stays small.
    #[inline(never)]
    fn decide_failure<C: Clock>(
        &self,
        state: &mut CallState,
        verdict: Verdict,
        clock: &C,
    ) -> Decision {
        let hint = match verdict {
            Verdict::Success => return Decision::Succeed,
            Verdict::Stop => return Decision::Stop(StopReason::Permanent),
            Verdict::Retry | Verdict::StopSending | Verdict::Unsent => None,
            Verdict::RetryAfter(hint) => Some(hint),
        };
        // A server's hint is its endpoint's own (it raised that endpoint's
        // load): while an endpoint the call has not tried is eligible, the
        // retry goes there on the schedule's wait; only a call with nowhere
        // else to go waits for the hint.
        let now = clock.now();
        // Whether an endpoint the call has not tried is eligible now
        // (asked only for a hint or a request never sent).
        let elsewhere = |state: &CallState| {
            self.limits
                .endpoints()
                .is_some_and(|set| set.has_eligible(now, state.avoid()))
        };
        let hint = hint.filter(|_| !elsewhere(state));
        self.limits.hear(verdict, || {
            let started = state.attempt_started.take()?;
            Some(now.saturating_duration_since(started))
        });
        if verdict == Verdict::StopSending {
            // A failure the control counts, but no attempt may follow it.
            return Decision::Stop(StopReason::Permanent);
        }
        let started = *state.started.get_or_insert(now);
        if let Some(deadline) = state.deadline
            && deadline.is_expired(now)
        {
            return Decision::Stop(StopReason::Deadline);
        }
        if verdict == Verdict::Unsent && state.requeues < self.max_requeues && elsewhere(state) {
            return self.requeue(state);
        }
        if state.attempts >= self.max_attempts {
            return Decision::Stop(StopReason::Exhausted);
        }
        let (schedule, rng) = state.backoff.get_or_insert_with(|| {
            (
                ScheduleState::new(),
                Rng::seeded_or_entropy(self.schedule.seed()),
            )
        });
        let wanted = match hint {
            Some(hint) => hint,
            None => match self.schedule.next_delay(schedule, rng) {
                Some(delay) => delay,
                None => return Decision::Stop(StopReason::Exhausted),
            },
        };
        // Capped at `max_delay`, and never a wait that ends past the deadline.
        let Some(delay) = self.limits.wait(wanted, state.deadline, now).duration() else {
            return Decision::Stop(StopReason::Deadline);
        };
        if hint.is_some() {
            // One more retry, and the wait that will really happen (not
            // the hint, which the cap may have cut) added to the total;
            // the curve starts over.
            schedule.record(delay);
            schedule.reset_curve();
        }
        if let Some(control) = self.limits.control() {
            if let Err(refusal) = control.allow_retry() {
                state.refused_by = Some(refusal.by);
                return Decision::Stop(StopReason::Throttled);
            }
            state.granted = Some(Grant::Retry);
        }
        state.waited = state.waited.saturating_add(delay);
        state.last_wait = delay;
        tracing::debug!(
            attempt = state.attempts,
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            hinted = hint.is_some(),
            elapsed_ms = u64::try_from(now.saturating_duration_since(started).as_millis())
                .unwrap_or(u64::MAX),
            "steadfast: retrying"
        );
        Decision::Retry(delay)
    }
}

impl<S> RetryPolicy<S> {
    /// Requeues the attempt just decided, which never reached a server:
    /// charged to the control as a retry, not counted as an attempt, sent
    /// again at once.
    #[cold]
    fn requeue(&self, state: &mut CallState) -> Decision {
        if let Some(control) = self.limits.control() {
            if let Err(refusal) = control.allow_retry() {
                state.refused_by = Some(refusal.by);
                return Decision::Stop(StopReason::Throttled);
            }
            state.granted = Some(Grant::Retry);
        }
        state.attempts -= 1;
        state.requeues += 1;
        state.last_wait = Duration::ZERO;
        tracing::debug!(
            attempt = state.attempts + 1,
            requeues = state.requeues,
            "steadfast: requeued (the attempt never reached a server)"
        );
        Decision::Retry(Duration::ZERO)
    }

    /// The gate refused the next attempt because no endpoint was ready,
    /// though one comes back at a known time (every endpoint is held on
    /// its connection backoff after requests that never got through:
    /// [`Refused::NoEndpoint`] with a [`retry_after`](Refused::retry_after)).
    /// While the call has requeues left
    /// ([`max_requeues`](crate::policy::RetryPolicyBuilder::max_requeues))
    /// and that wait (capped at `max_delay`) ends before its deadline, the
    /// attempt is *requeued*: the executor waits the returned time and asks
    /// the gate again. It is counted as a requeue, not an attempt; the
    /// control's grant for it carries over to the attempt that follows
    /// (nothing was sent, so nothing more is charged). `None`: the
    /// refusal ends the call as [`Refused::reason`] says.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::call::Refused;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::RetryPolicy;
    ///
    /// let policy = RetryPolicy::builder().max_requeues(1).build()?;
    /// let clock = VirtualClock::manual();
    /// let mut call = policy.start(&clock, None);
    /// let held = Refused::NoEndpoint { endpoints: 2, retry_after: Some(Duration::from_secs(1)) };
    /// assert_eq!(policy.requeue_refused(&mut call, &held, &clock), Some(Duration::from_secs(1)));
    /// assert_eq!((call.requeues(), call.attempts()), (1, 0));
    /// // No requeue left; and a set none of whose endpoints will come back by itself.
    /// assert_eq!(policy.requeue_refused(&mut call, &held, &clock), None);
    /// let gone = Refused::NoEndpoint { endpoints: 0, retry_after: None };
    /// assert_eq!(policy.requeue_refused(&mut policy.start(&clock, None), &gone, &clock), None);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[cold]
    pub fn requeue_refused<C: Clock>(
        &self,
        state: &mut CallState,
        refused: &Refused,
        clock: &C,
    ) -> Option<Duration> {
        let Refused::NoEndpoint {
            retry_after: Some(back_in),
            ..
        } = *refused
        else {
            return None;
        };
        if state.requeues >= self.max_requeues {
            return None;
        }
        let now = clock.now();
        let wait = self.limits.wait(back_in, state.deadline, now).duration()?;
        state.requeues += 1;
        state.waited = state.waited.saturating_add(wait);
        state.last_wait = wait;
        tracing::debug!(
            attempt = state.attempts + 1,
            requeues = state.requeues,
            wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            "steadfast: requeued (no endpoint ready: waiting for the first to come back)"
        );
        Some(wait)
    }

    /// Ends a call that stops while it waits for an attempt it was granted
    /// (cancelled, or cut by its deadline, before the attempt started: a
    /// retry, or the first attempt of a call started with
    /// [`admit_and_start`](Self::admit_and_start)): the control gets the
    /// grant back ([`RetryControl::refund`]), so a budget does not pay for
    /// an attempt that was never sent and a circuit breaker's probe slot is
    /// freed. Does nothing when no grant is outstanding.
    ///
    /// [`RetryControl::refund`]: crate::control::RetryControl::refund
    pub fn abandon(&self, state: &mut CallState) {
        if let Some(grant) = state.granted.take()
            && let Some(control) = self.limits.control()
        {
            control.refund(grant);
        }
    }
}
