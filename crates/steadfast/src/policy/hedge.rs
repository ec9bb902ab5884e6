//! [`HedgePolicy`]: the hedging decision engine, plain values with no
//! executor and no I/O (its builder is in `hedge_builder.rs`).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{HedgeAction, HedgeDecision, HedgeDelay, HedgeState, Limits};
use crate::call::{Attempt, AttemptSet, Lend, MAX_HEDGE_ATTEMPTS, Refused, StopReason, Verdict};
use crate::clock::{Clock, saturating_add};
use crate::control::{Grant, RetryControl};
use crate::deadline::Deadline;

#[cfg(doc)]
use super::DEFAULT_MAX_DELAY;

/// How a call hedges: how many copies, how far apart, the limits and the
/// shared retry control. Configuration only: build once, clone cheaply
/// (a duration or an `Arc`, plus an optional `Arc`), share between calls.
///
/// The per-call progress lives in a [`HedgeState`], which the policy
/// advances with two methods. Any driver (the async executor
/// [`Hedgeable::hedge`](crate::hedge::Hedgeable::hedge), a simulator on virtual
/// time, a tower or gRPC layer) is a loop around them:
///
/// 1. [`start`](Self::start) a call (reads the clock once);
/// 2. call [`send_due`](Self::send_due) until it stops saying
///    [`HedgeAction::Send`]: send each copy it hands out;
/// 3. wait for the instant it names ([`HedgeAction::WaitUntil`]) or for an
///    outcome, whichever comes first;
/// 4. give each outcome's [`Verdict`] to [`on_outcome`](Self::on_outcome):
///    [`HedgeDecision::Succeed`] and [`HedgeDecision::Stop`] end the call
///    (cancel every copy still in flight), [`HedgeDecision::Continue`] goes
///    back to step 2.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::{Clock, VirtualClock};
/// use steadfast::policy::{HedgeAction, HedgeDecision};
/// use steadfast::{HedgePolicy, Verdict};
///
/// let policy = HedgePolicy::builder(Duration::from_millis(500)).max_attempts(3).build()?;
/// let clock = VirtualClock::manual();
/// let t0 = clock.now();
/// let mut call = policy.start(&clock, None);
///
/// // The first copy goes at once; the next one is due 500 ms later.
/// let HedgeAction::Send(first) = policy.send_due(&mut call, &clock) else { unreachable!() };
/// assert_eq!(first.number, 1);
/// assert_eq!(policy.send_due(&mut call, &clock), HedgeAction::WaitUntil(t0 + Duration::from_millis(500)));
///
/// // No reply after 500 ms: the second copy, told that copy 1 is in flight.
/// clock.advance(Duration::from_millis(500));
/// let HedgeAction::Send(second) = policy.send_due(&mut call, &clock) else { unreachable!() };
/// assert_eq!((second.number, second.in_flight.iter().collect::<Vec<_>>()), (2, vec![1]));
///
/// // Copy 2 answers first: it wins, copy 1 is to be cancelled.
/// assert_eq!(policy.on_outcome(&mut call, 2, Verdict::Success, &clock), HedgeDecision::Succeed);
/// assert_eq!(call.winner(), Some(2));
/// assert_eq!(call.in_flight().iter().collect::<Vec<_>>(), [1]);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct HedgePolicy {
    pub(super) max_attempts: u32,
    /// The most copies of a call requeued ([`Verdict::Unsent`]).
    pub(super) max_requeues: u32,
    pub(super) delay: HedgeDelay,
    pub(super) limits: Limits,
}

impl Lend for HedgePolicy {
    type Policy = Self;
    #[inline]
    fn policy(&self) -> &Self {
        self
    }
}

impl fmt::Debug for HedgePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgePolicy")
            .field("max_attempts", &self.max_attempts)
            .field("max_requeues", &self.max_requeues)
            .field("delay", &self.delay)
            .field("max_delay", &self.limits.max_delay())
            .field("max_elapsed", &self.limits.max_elapsed())
            .field("control", &self.limits.control())
            .field("concurrency_limit", &self.limits.concurrency_limit())
            .finish()
    }
}

impl HedgePolicy {
    /// The most copies a call sends, counting the first.
    ///
    /// ```
    /// let p = steadfast::HedgePolicy::builder(std::time::Duration::ZERO).build()?;
    /// assert_eq!(p.max_attempts(), 2);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The most copies of a call requeued
    /// ([`HedgePolicyBuilder::max_requeues`](super::HedgePolicyBuilder::max_requeues)).
    #[must_use]
    pub fn max_requeues(&self) -> u32 {
        self.max_requeues
    }

    /// The hedging delay.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = steadfast::HedgePolicy::builder(Duration::from_millis(3)).build()?;
    /// assert_eq!(p.delay().current(), Duration::from_millis(3));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn delay(&self) -> &HedgeDelay {
        &self.delay
    }

    /// The longest single wait: how long a server's pushback can hold
    /// the next copy (the same limit, and name, as a retry policy's).
    ///
    /// ```
    /// let p = steadfast::HedgePolicy::builder(std::time::Duration::ZERO).build()?;
    /// assert_eq!(p.max_delay(), steadfast::policy::DEFAULT_MAX_DELAY);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_delay(&self) -> Duration {
        self.limits.max_delay()
    }

    /// The overall time limit of a call, from its start.
    ///
    /// ```
    /// let p = steadfast::HedgePolicy::builder(std::time::Duration::ZERO).build()?;
    /// assert_eq!(p.max_elapsed(), None);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_elapsed(&self) -> Option<Duration> {
        self.limits.max_elapsed()
    }

    /// The shared retry control, if any.
    ///
    /// ```
    /// let p = steadfast::HedgePolicy::builder(std::time::Duration::ZERO).build()?;
    /// assert!(p.control().is_none());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn control(&self) -> Option<&Arc<dyn RetryControl>> {
        self.limits.control()
    }

    /// The limits this policy shares with every other: the cap on a single
    /// wait, the overall limit, the control, and their rules.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = steadfast::HedgePolicy::builder(Duration::ZERO).max_delay(Duration::from_secs(2)).build()?;
    /// assert_eq!(p.limits().max_delay(), Duration::from_secs(2));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The same policy with one attempt (no hedging): for a request that
    /// cannot be sent twice.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = steadfast::HedgePolicy::builder(Duration::from_millis(5)).max_attempts(3).build()?;
    /// assert_eq!(p.single_attempt().max_attempts(), 1);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn single_attempt(&self) -> Self {
        Self {
            max_attempts: 1,
            ..self.clone()
        }
    }

    /// Feeds one latency to an adaptive delay (does nothing for a fixed
    /// one). [`on_outcome`](Self::on_outcome) already records the latency
    /// of every success; use this for latencies seen elsewhere.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use steadfast::policy::AdaptiveDelay;
    /// let adaptive = Arc::new(AdaptiveDelay::builder(Duration::from_secs(1)).min_samples(1).refresh_every(1).build()?);
    /// let p = steadfast::HedgePolicy::builder(Arc::clone(&adaptive)).build()?;
    /// p.record_latency(Duration::from_millis(12));
    /// assert_eq!(adaptive.current(), Duration::from_millis(12));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn record_latency(&self, latency: Duration) {
        if let HedgeDelay::Adaptive(a) = &self.delay {
            a.record(latency);
        }
    }

    /// Starts a call: reads `clock` once (the copies are timed from now) and
    /// fixes the call's hedging delay and deadline (the earliest of
    /// `deadline`, the [ambient deadline](crate::deadline::current) and
    /// `max_elapsed` from now). The first copy is due at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// let policy = steadfast::HedgePolicy::builder(Duration::from_millis(10)).build()?;
    /// let clock = VirtualClock::manual();
    /// let call = policy.start(&clock, None);
    /// assert_eq!(call.next_copy_at(), Some(clock.now()));
    /// assert_eq!(call.sent(), 0);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn start<C: Clock>(&self, clock: &C, deadline: Option<Deadline>) -> HedgeState {
        self.start_at(clock.now(), deadline)
    }

    /// [`start`](Self::start) at a given instant.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// let policy = steadfast::HedgePolicy::builder(Duration::from_millis(10)).build()?;
    /// let t0 = VirtualClock::manual().now();
    /// let call = policy.start_at(t0, None);
    /// assert_eq!(call.started(), t0);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn start_at(&self, now: Instant, deadline: Option<Deadline>) -> HedgeState {
        let (deadline, _) = self.limits.deadline(deadline, || now);
        HedgeState {
            started: now,
            deadline,
            delay: self.delay.current(),
            sent: 0,
            requeues: 0,
            failed: 0,
            in_flight: AttemptSet::new(),
            next_due: Some(now),
            hold_until: None,
            refused: None,
            cut_by_deadline: false,
            stopped: false,
            winner: None,
            idle_since: None,
            tried: crate::call::Tried::default(),
        }
    }

    /// When the call's next copy is due (`None`: no more copies will be
    /// sent). The same as [`HedgeState::next_copy_at`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::VirtualClock;
    /// let policy = steadfast::HedgePolicy::builder(Duration::from_millis(10)).max_attempts(1).build()?;
    /// let clock = VirtualClock::manual();
    /// let mut call = policy.start(&clock, None);
    /// let _first = policy.send_due(&mut call, &clock);
    /// assert_eq!(policy.next_copy_at(&call), None); // one attempt: no hedge
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn next_copy_at(&self, state: &HedgeState) -> Option<Instant> {
        state.next_due
    }

    /// What to do now: send a copy that is due, wait, or stop. Call it after
    /// [`start`](Self::start), after every [`HedgeDecision::Continue`] and
    /// whenever the instant it asked to wait for has come; repeat while it
    /// says [`HedgeAction::Send`].
    ///
    /// The rules, in order:
    /// 1. once the deadline has passed, stop as [`StopReason::Deadline`]
    ///    (copies in flight are abandoned);
    /// 2. a copy is due when its time has come and fewer than `max_attempts`
    ///    were sent. The first copy asks the control's
    ///    [`admit`](RetryControl::admit), every later one its
    ///    [`allow_retry`](RetryControl::allow_retry). A refused copy is not
    ///    sent, and no copy is sent after it; a refused first copy stops the
    ///    call as [`StopReason::Throttled`];
    /// 3. a copy sent at `t` makes the next one due at `t + delay` (unless
    ///    that is at or past the deadline: then none is);
    /// 4. with nothing in flight and nothing more to send, stop
    ///    ([`StopReason::Throttled`] after a refusal, [`StopReason::Deadline`]
    ///    when the deadline cut the copies short, else
    ///    [`StopReason::Exhausted`]); otherwise wait until the next copy or
    ///    the deadline, whichever is first.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::policy::HedgeAction;
    /// use steadfast::HedgePolicy;
    /// // Zero delay: every copy at once.
    /// let policy = HedgePolicy::builder(Duration::ZERO).max_attempts(3).build()?;
    /// let clock = VirtualClock::manual();
    /// let mut call = policy.start(&clock, None);
    /// let mut numbers = Vec::new();
    /// while let HedgeAction::Send(a) = policy.send_due(&mut call, &clock) {
    ///     numbers.push(a.number);
    /// }
    /// assert_eq!(numbers, [1, 2, 3]);
    /// assert_eq!(policy.send_due(&mut call, &clock), HedgeAction::WaitForOutcome);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn send_due<C: Clock>(&self, state: &mut HedgeState, clock: &C) -> HedgeAction {
        self.send_due_at(state, clock.now())
    }

    /// [`send_due`](Self::send_due) at a given instant, for drivers that
    /// keep their own time (a simulator) or read the clock once per step
    /// (the executor).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::policy::HedgeAction;
    /// use steadfast::HedgePolicy;
    /// let policy = HedgePolicy::builder(Duration::from_millis(100)).build()?;
    /// let clock = VirtualClock::manual();
    /// let t0 = clock.now();
    /// let mut call = policy.start(&clock, None);
    /// assert!(matches!(policy.send_due_at(&mut call, t0), HedgeAction::Send(_)));
    /// assert!(matches!(policy.send_due_at(&mut call, t0 + Duration::from_millis(100)), HedgeAction::Send(a) if a.number == 2));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn send_due_at(&self, state: &mut HedgeState, now: Instant) -> HedgeAction {
        if state.winner.is_some() {
            return HedgeAction::WaitForOutcome;
        }
        if state.deadline.is_some_and(|d| d.is_expired(now)) {
            return HedgeAction::Stop(StopReason::Deadline);
        }
        if let Some(due) = state.next_due
            && due <= now
        {
            let permit = match self.limits.control() {
                None => Ok(()),
                Some(c) if state.sent == 0 => c.admit(),
                Some(c) => c.allow_retry(),
            };
            match permit {
                Ok(()) => {
                    state.sent += 1;
                    let waited = match state.idle_since.take() {
                        Some(since) if state.in_flight.is_empty() => {
                            now.saturating_duration_since(since)
                        }
                        _ => Duration::ZERO,
                    };
                    let attempt = Attempt {
                        number: state.sent,
                        deadline: state.deadline,
                        in_flight: state.in_flight,
                        waited,
                        endpoint: None,
                    };
                    state.in_flight.insert(state.sent);
                    if state.counted() < self.max_attempts {
                        state.schedule_next(saturating_add(now, state.delay));
                    } else {
                        state.next_due = None;
                    }
                    if state.sent > 1 {
                        tracing::debug!(
                            attempt = state.sent,
                            in_flight = state.in_flight.len() - 1,
                            elapsed_ms = millis(state.elapsed(now)),
                            "steadfast: hedge sent"
                        );
                    }
                    return HedgeAction::Send(attempt);
                }
                Err(refusal) => {
                    tracing::debug!(
                        attempt = state.sent + 1,
                        by = refusal.by,
                        "steadfast: hedge refused"
                    );
                    state.refused = Some(Refused::Control {
                        by: refusal.by,
                        retry_after: None,
                    });
                    state.next_due = None;
                }
            }
        }
        if state.in_flight.is_empty() && state.next_due.is_none() {
            return HedgeAction::Stop(state.exhausted_reason());
        }
        let deadline = state.deadline.map(Deadline::instant);
        match (state.next_due, deadline) {
            (Some(a), Some(b)) => HedgeAction::WaitUntil(a.min(b)),
            (Some(t), None) | (None, Some(t)) => HedgeAction::WaitUntil(t),
            (None, None) => HedgeAction::WaitForOutcome,
        }
    }

    /// Takes back copy `number`, which [`send_due`](Self::send_due) just
    /// handed out, because the gate refused it ([`Limits::admit_now`]): it
    /// was never sent. It no longer counts as sent or in flight, no further
    /// copy is sent, the control gets its grant back, and the refusal is
    /// kept for the call's error ([`HedgeState::refusal`]). With nothing in
    /// flight, the next [`send_due`](Self::send_due) stops the call as the
    /// refusal says ([`Refused::reason`]: [`StopReason::LimitReached`] or
    /// [`StopReason::Throttled`]). A number that is not the last copy
    /// handed out is ignored.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::call::{LimitRefused, RateRefused};
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::policy::HedgeAction;
    /// use steadfast::{HedgePolicy, StopReason};
    ///
    /// let policy = HedgePolicy::builder(Duration::from_millis(10)).build()?;
    /// let clock = VirtualClock::manual();
    /// let mut call = policy.start(&clock, None);
    /// let HedgeAction::Send(first) = policy.send_due(&mut call, &clock) else { unreachable!() };
    /// let refused = LimitRefused { by: "db", in_flight: 4, limit: 4, waited: Duration::ZERO };
    /// policy.withdraw(&mut call, first.number, refused.into());
    /// assert_eq!((call.sent(), call.limit_refused()), (0, Some(refused)));
    /// assert_eq!(policy.send_due(&mut call, &clock), HedgeAction::Stop(StopReason::LimitReached));
    ///
    /// let mut call = policy.start(&clock, None);
    /// let HedgeAction::Send(first) = policy.send_due(&mut call, &clock) else { unreachable!() };
    /// let refused = RateRefused { by: "maps api", retry_after: Some(Duration::from_millis(40)) };
    /// policy.withdraw(&mut call, first.number, refused.into());
    /// assert_eq!((call.sent(), call.refused_by(), call.retry_after()), (0, Some("maps api"), refused.retry_after));
    /// assert_eq!(policy.send_due(&mut call, &clock), HedgeAction::Stop(StopReason::Throttled));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    ///
    /// [`Limits::admit_now`]: crate::policy::Limits::admit_now
    /// [`Refused::reason`]: crate::call::Refused::reason
    pub fn withdraw(&self, state: &mut HedgeState, number: u32, refused: Refused) {
        if self.take_back(state, number) {
            state.refused = Some(refused);
            tracing::debug!(
                attempt = number,
                by = refused.by(),
                "steadfast: hedge copy not admitted"
            );
        }
    }

    /// Un-sends copy `number` if it is the last one handed out; whether it was.
    fn take_back(&self, state: &mut HedgeState, number: u32) -> bool {
        if number != state.sent || !state.in_flight.remove(number) {
            return false;
        }
        state.sent -= 1;
        state.next_due = None;
        if let Some(control) = self.limits.control() {
            control.refund(if number == 1 {
                Grant::Admit
            } else {
                Grant::Retry
            });
        }
        true
    }

    /// Decides what the outcome of copy `number`, judged `verdict` by the
    /// classifier, means for the call (A6 hedging semantics):
    ///
    /// - [`Verdict::Success`]: this copy wins ([`HedgeDecision::Succeed`]);
    ///   the control hears a success and an adaptive delay the call's
    ///   latency so far;
    /// - [`Verdict::Stop`] (a fatal error): [`HedgeDecision::Stop`] with
    ///   [`StopReason::Permanent`];
    /// - [`Verdict::StopSending`] (pushback saying "do not retry"): no more
    ///   copies are sent ([`HedgeState::stop_sending`]) but those in flight
    ///   run on; the control hears a retryable failure, and the call stops
    ///   with [`StopReason::Permanent`] once the last copy in flight fails;
    /// - [`Verdict::Retry`] and [`Verdict::Unsent`] (non-fatal): the next
    ///   copy is due now, shortcutting the delay (but never before a
    ///   server's pushback); under an [endpoint set](crate::endpoint::Endpoints),
    ///   a copy no server processed (`Unsent`) is *requeued* while an
    ///   endpoint no copy went to is eligible and the call has requeues
    ///   left ([`max_requeues`](super::HedgePolicyBuilder::max_requeues)):
    ///   it stops counting among `max_attempts`, and the next copy (a new
    ///   number, since copies are told apart by theirs) goes there now;
    /// - [`Verdict::RetryAfter(d)`](Verdict::RetryAfter) (pushback): the
    ///   next copy is due `d` from now (capped at `max_delay`), later
    ///   ones `delay` apart from there; under an
    ///   [endpoint set](crate::endpoint::Endpoints) the pushback is its
    ///   endpoint's, so while an endpoint no copy went to is eligible it
    ///   counts as a plain failure (the next copy goes there now);
    /// - after either failure the control hears a retryable failure, and
    ///   when nothing is in flight and nothing more will be sent the call
    ///   stops (as in [`send_due`](Self::send_due) rule 4).
    ///
    /// An outcome for a copy that is not in flight is ignored
    /// ([`HedgeDecision::Continue`]). Reads `clock` for a failure, and for a
    /// success only with an adaptive delay.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::policy::{HedgeAction, HedgeDecision};
    /// use steadfast::{HedgePolicy, StopReason, Verdict};
    /// let policy = HedgePolicy::builder(Duration::from_millis(500)).max_attempts(2).build()?;
    /// let clock = VirtualClock::manual();
    /// let mut call = policy.start(&clock, None);
    /// let _ = policy.send_due(&mut call, &clock); // copy 1
    /// clock.advance(Duration::from_millis(100));
    /// // Copy 1 fails, non-fatally: copy 2 is due now, not at 500 ms.
    /// assert_eq!(policy.on_outcome(&mut call, 1, Verdict::Retry, &clock), HedgeDecision::Continue);
    /// assert!(matches!(policy.send_due(&mut call, &clock), HedgeAction::Send(a) if a.number == 2));
    /// // Copy 2 fails too: nothing left.
    /// assert_eq!(
    ///     policy.on_outcome(&mut call, 2, Verdict::Retry, &clock),
    ///     HedgeDecision::Stop(StopReason::Exhausted)
    /// );
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn on_outcome<C: Clock>(
        &self,
        state: &mut HedgeState,
        number: u32,
        verdict: Verdict,
        clock: &C,
    ) -> HedgeDecision {
        let needs_time = !matches!(verdict, Verdict::Success | Verdict::Stop)
            || matches!(self.delay, HedgeDelay::Adaptive(_));
        if needs_time {
            self.on_outcome_at(state, number, verdict, clock.now())
        } else {
            self.on_outcome_at(state, number, verdict, state.started)
        }
    }

    /// [`on_outcome`](Self::on_outcome) at a given instant.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::{Clock, VirtualClock};
    /// use steadfast::policy::HedgeDecision;
    /// use steadfast::{HedgePolicy, Verdict};
    /// let policy = HedgePolicy::builder(Duration::from_millis(100)).build()?;
    /// let clock = VirtualClock::manual();
    /// let mut call = policy.start(&clock, None);
    /// let _ = policy.send_due_at(&mut call, clock.now());
    /// assert_eq!(policy.on_outcome_at(&mut call, 1, Verdict::Success, clock.now()), HedgeDecision::Succeed);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn on_outcome_at(
        &self,
        state: &mut HedgeState,
        number: u32,
        verdict: Verdict,
        now: Instant,
    ) -> HedgeDecision {
        if state.winner.is_some() || !state.in_flight.remove(number) {
            return HedgeDecision::Continue;
        }
        self.limits.hear(verdict, || None);
        let hint = match verdict {
            Verdict::Success => {
                state.winner = Some(number);
                state.next_due = None;
                if let HedgeDelay::Adaptive(a) = &self.delay {
                    a.record(state.elapsed(now));
                }
                return HedgeDecision::Succeed;
            }
            Verdict::Stop => {
                state.next_due = None;
                return HedgeDecision::Stop(StopReason::Permanent);
            }
            // A copy no server processed, under an endpoint set with an
            // endpoint no copy went to eligible: requeued (it no longer
            // counts among `max_attempts`, and the next copy goes there
            // now), while the call has requeues left and a copy number
            // is free for it.
            Verdict::Unsent
                if state.requeues < self.max_requeues
                    && state.sent < MAX_HEDGE_ATTEMPTS
                    && self
                        .limits
                        .endpoints()
                        .is_some_and(|set| set.has_eligible(now, state.avoid())) =>
            {
                state.requeues += 1;
                None
            }
            // A copy that failed, or never got through with nowhere new to
            // go: one more failed copy; the next goes now.
            Verdict::Retry | Verdict::Unsent => None,
            // A hint is its endpoint's (under an endpoint set): while an
            // endpoint no copy went to is eligible, the next copy goes
            // there without waiting; only with nowhere new to go is the
            // pushback held.
            Verdict::RetryAfter(_)
                if self
                    .limits
                    .endpoints()
                    .is_some_and(|set| set.has_eligible(now, state.avoid())) =>
            {
                None
            }
            Verdict::RetryAfter(d) => Some(self.limits.cap(d)),
            Verdict::StopSending => {
                // No more copies; those in flight run on.
                state.stop_sending();
                None
            }
        };
        state.failed += 1;
        if let Some(d) = hint {
            let until = saturating_add(now, d);
            state.hold_until = Some(state.hold_until.map_or(until, |h| h.max(until)));
        }
        // The next copy, if there is one, goes now (or when the pushback
        // ends). That includes a copy whose regular time fell past the
        // deadline: sent now, it may still finish in time.
        let more =
            state.counted() < self.max_attempts && state.refused_by().is_none() && !state.stopped;
        if more && (state.next_due.is_some() || state.cut_by_deadline) {
            let at = state.hold_until.map_or(now, |h| h.max(now));
            state.schedule_next(at);
        }
        if state.in_flight.is_empty() {
            if state.next_due.is_none() {
                return HedgeDecision::Stop(state.exhausted_reason());
            }
            state.idle_since = Some(now);
        }
        HedgeDecision::Continue
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
