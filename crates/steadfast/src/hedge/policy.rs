//! The hedging decision engine: plain values, no executor, no I/O.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{AttemptSet, HedgeDelay, MAX_HEDGE_ATTEMPTS};
use crate::clock::saturating_add;
use crate::policy::DEFAULT_MAX_DELAY;
use crate::{Attempt, Clock, ConfigError, Deadline, Outcome, RetryControl, StopReason, Verdict};

/// How a call hedges: how many copies, how far apart, the limits and the
/// shared retry control. Configuration only: build once, clone cheaply
/// (a duration or an `Arc`, plus an optional `Arc`), share between calls.
///
/// The per-call progress lives in a [`HedgeState`], which the policy
/// advances with two methods. Any driver (the async executor
/// [`Hedgeable::hedge`](crate::Hedgeable::hedge), a simulator on virtual
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
/// use steadfast::{HedgeAction, HedgeDecision, HedgePolicy, Verdict};
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
    max_attempts: u32,
    delay: HedgeDelay,
    max_pushback: Duration,
    max_elapsed: Option<Duration>,
    control: Option<Arc<dyn RetryControl>>,
}

impl fmt::Debug for HedgePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgePolicy")
            .field("max_attempts", &self.max_attempts)
            .field("delay", &self.delay)
            .field("max_pushback", &self.max_pushback)
            .field("max_elapsed", &self.max_elapsed)
            .field("control", &self.control)
            .finish()
    }
}

/// What a hedged call should do now, from [`HedgePolicy::send_due`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeAction {
    /// Send this copy now (it is already counted as sent and in flight),
    /// then ask again.
    Send(Attempt),
    /// Nothing to send yet: wait for an outcome, or until this instant
    /// (the next copy is due, or the deadline passes), whichever is first.
    WaitUntil(Instant),
    /// Nothing more will be sent and there is no deadline: wait for an
    /// outcome.
    WaitForOutcome,
    /// The call is over without a success: cancel every copy in flight.
    Stop(StopReason),
}

/// What one copy's outcome means for the call, from [`HedgePolicy::on_outcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HedgeDecision {
    /// This copy won: return its outcome and cancel every other copy.
    Succeed,
    /// Keep going: ask [`HedgePolicy::send_due`] what to do next.
    Continue,
    /// Give up: cancel every copy in flight and return this outcome's error.
    Stop(StopReason),
}

/// The per-call state a [`HedgePolicy`] advances: plain data (a few
/// instants and counters, no allocation), made when a call starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HedgeState {
    started: Instant,
    deadline: Option<Deadline>,
    delay: Duration,
    sent: u32,
    failed: u32,
    in_flight: AttemptSet,
    next_due: Option<Instant>,
    hold_until: Option<Instant>,
    refused_by: Option<&'static str>,
    cut_by_deadline: bool,
    stopped: bool,
    winner: Option<u32>,
}

impl HedgeState {
    /// When the call started.
    #[must_use]
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Time since the start at `now`.
    #[must_use]
    pub fn elapsed(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.started)
    }

    /// The call's effective deadline, if any.
    #[must_use]
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// The hedging delay of this call (fixed when the call started, even
    /// for an adaptive delay).
    #[must_use]
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Copies sent so far, counting the first.
    #[must_use]
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// Copies that finished with a retryable failure.
    #[must_use]
    pub fn failed(&self) -> u32 {
        self.failed
    }

    /// Copies sent and not yet finished.
    #[must_use]
    pub fn in_flight(&self) -> AttemptSet {
        self.in_flight
    }

    /// When the next copy may be sent; `None` when no more copies will be.
    #[must_use]
    pub fn next_copy_at(&self) -> Option<Instant> {
        self.next_due
    }

    /// The control that refused a copy, if one did (no copy is sent after
    /// a refusal).
    #[must_use]
    pub fn refused_by(&self) -> Option<&'static str> {
        self.refused_by
    }

    /// The copy that succeeded, once one has.
    #[must_use]
    pub fn winner(&self) -> Option<u32> {
        self.winner
    }

    /// Sends no more copies; those in flight go on. For drivers that learn
    /// more than a [`Verdict`] says: gRPC pushback saying "do not retry"
    /// (A6: no further hedges, outstanding ones continue), or a call that
    /// commits to one copy. A later [`HedgePolicy::send_due`] stops the call
    /// once nothing is in flight.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::{HedgeAction, HedgePolicy};
    /// let policy = HedgePolicy::builder(Duration::from_millis(5)).max_attempts(3).build()?;
    /// let clock = VirtualClock::manual();
    /// let mut call = policy.start(&clock, None);
    /// let _first = policy.send_due(&mut call, &clock);
    /// call.stop_sending();
    /// assert_eq!(call.next_copy_at(), None);
    /// assert_eq!(policy.send_due(&mut call, &clock), HedgeAction::WaitForOutcome);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn stop_sending(&mut self) {
        self.stopped = true;
        self.next_due = None;
    }

    /// The call's telemetry at `now`: copies still in flight count as
    /// cancelled (an executor drops them when the call ends).
    #[must_use]
    pub fn stats(&self, now: Instant) -> HedgeStats {
        HedgeStats {
            sent: self.sent,
            failed: self.failed,
            cancelled: self.in_flight.len(),
            winner: self.winner,
            refused_by: self.refused_by,
            elapsed: self.elapsed(now),
        }
    }

    /// Why the call ends when nothing is in flight and nothing more will be sent.
    fn exhausted_reason(&self) -> StopReason {
        if self.refused_by.is_some() {
            StopReason::Throttled
        } else if self.stopped {
            // The classifier (or the caller) forbade more copies.
            StopReason::Permanent
        } else if self.cut_by_deadline {
            StopReason::Deadline
        } else {
            StopReason::Exhausted
        }
    }

    /// Sets the next copy's due time, unless it would fall at or past the
    /// deadline (a copy sent then could not finish in time).
    fn schedule_next(&mut self, at: Instant) {
        if self.deadline.is_some_and(|d| at >= d.instant()) {
            self.next_due = None;
            self.cut_by_deadline = true;
        } else {
            self.next_due = Some(at);
            self.cut_by_deadline = false;
        }
    }
}

/// What one hedged call did: copies sent, failed, cancelled, the winner.
///
/// Given to the executor's `on_finish` hook and carried by
/// [`HedgeError`](crate::HedgeError).
///
/// ```
/// let stats = steadfast::HedgeStats::default();
/// assert_eq!(stats.hedges(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HedgeStats {
    /// Copies sent, counting the first.
    pub sent: u32,
    /// Copies that finished with a retryable failure.
    pub failed: u32,
    /// Copies still in flight when the call ended, which were cancelled.
    pub cancelled: u32,
    /// The copy that succeeded, if one did.
    pub winner: Option<u32>,
    /// The control that refused a copy, if one did.
    pub refused_by: Option<&'static str>,
    /// Time from the call's start to its end.
    pub elapsed: Duration,
}

impl HedgeStats {
    /// Extra copies sent beyond the first (the hedges proper).
    ///
    /// ```
    /// let mut stats = steadfast::HedgeStats::default();
    /// stats.sent = 3;
    /// assert_eq!(stats.hedges(), 2);
    /// ```
    #[must_use]
    pub fn hedges(&self) -> u32 {
        self.sent.saturating_sub(1)
    }
}

impl HedgePolicy {
    /// A builder with `delay` between copies (a `Duration`, or an
    /// `Arc<AdaptiveDelay>`), 2 attempts, pushback capped at
    /// [`DEFAULT_MAX_DELAY`], no overall limit and no retry control.
    ///
    /// ```
    /// use std::time::Duration;
    /// let policy = steadfast::HedgePolicy::builder(Duration::from_millis(20)).max_attempts(3).build()?;
    /// assert_eq!(policy.max_attempts(), 3);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn builder(delay: impl Into<HedgeDelay>) -> HedgePolicyBuilder {
        HedgePolicyBuilder {
            policy: Self {
                max_attempts: 2,
                delay: delay.into(),
                max_pushback: DEFAULT_MAX_DELAY,
                max_elapsed: None,
                control: None,
            },
        }
    }

    /// A builder that starts from this policy's settings, to derive another
    /// (for example the same policy with a single copy).
    ///
    /// ```
    /// use std::time::Duration;
    /// let policy = steadfast::HedgePolicy::builder(Duration::from_millis(5)).max_attempts(3).build()?;
    /// let single = policy.to_builder().max_attempts(1).build()?;
    /// assert_eq!((policy.max_attempts(), single.max_attempts()), (3, 1));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn to_builder(&self) -> HedgePolicyBuilder {
        HedgePolicyBuilder {
            policy: self.clone(),
        }
    }

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

    /// The longest wait a server's pushback can impose.
    ///
    /// ```
    /// let p = steadfast::HedgePolicy::builder(std::time::Duration::ZERO).build()?;
    /// assert_eq!(p.max_pushback(), steadfast::policy::DEFAULT_MAX_DELAY);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn max_pushback(&self) -> Duration {
        self.max_pushback
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
        self.max_elapsed
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
        self.control.as_ref()
    }

    /// Feeds one latency to an adaptive delay (does nothing for a fixed
    /// one). [`on_outcome`](Self::on_outcome) already records the latency
    /// of every success; use this for latencies seen elsewhere.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use steadfast::hedge::AdaptiveDelay;
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
        let deadline = Deadline::earliest(deadline, crate::deadline::current());
        let deadline = match self.max_elapsed {
            Some(limit) => Deadline::earliest(deadline, Some(Deadline::after(now, limit))),
            None => deadline,
        };
        HedgeState {
            started: now,
            deadline,
            delay: self.delay.current(),
            sent: 0,
            failed: 0,
            in_flight: AttemptSet::new(),
            next_due: Some(now),
            hold_until: None,
            refused_by: None,
            cut_by_deadline: false,
            stopped: false,
            winner: None,
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
    /// use steadfast::{HedgeAction, HedgePolicy};
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
    /// use steadfast::{HedgeAction, HedgePolicy};
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
            let permit = match &self.control {
                None => Ok(()),
                Some(c) if state.sent == 0 => c.admit(),
                Some(c) => c.allow_retry(),
            };
            match permit {
                Ok(()) => {
                    state.sent += 1;
                    let attempt = Attempt {
                        number: state.sent,
                        deadline: state.deadline,
                        in_flight: state.in_flight,
                    };
                    state.in_flight.insert(state.sent);
                    if state.sent < self.max_attempts {
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
                    state.refused_by = Some(refusal.by);
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
    /// - [`Verdict::Retry`] (non-fatal): the next copy is due now,
    ///   shortcutting the delay (but never before a server's pushback);
    /// - [`Verdict::RetryAfter(d)`](Verdict::RetryAfter) (pushback): the
    ///   next copy is due `d` from now (capped at `max_pushback`), later
    ///   ones `delay` apart from there;
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
    /// use steadfast::{HedgeAction, HedgeDecision, HedgePolicy, StopReason, Verdict};
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
    /// use steadfast::{HedgeDecision, HedgePolicy, Verdict};
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
        let hint = match verdict {
            Verdict::Success => {
                state.winner = Some(number);
                state.next_due = None;
                if let Some(control) = &self.control {
                    control.record(Outcome::Success);
                }
                if let HedgeDelay::Adaptive(a) = &self.delay {
                    a.record(state.elapsed(now));
                }
                return HedgeDecision::Succeed;
            }
            Verdict::Stop => {
                state.next_due = None;
                return HedgeDecision::Stop(StopReason::Permanent);
            }
            Verdict::Retry => None,
            Verdict::RetryAfter(d) => Some(d.min(self.max_pushback)),
            Verdict::StopSending => {
                // No more copies; those in flight run on.
                state.stop_sending();
                None
            }
        };
        state.failed += 1;
        if let Some(control) = &self.control {
            control.record(Outcome::RetryableFailure);
        }
        if let Some(d) = hint {
            let until = saturating_add(now, d);
            state.hold_until = Some(state.hold_until.map_or(until, |h| h.max(until)));
        }
        // The next copy, if there is one, goes now (or when the pushback
        // ends). That includes a copy whose regular time fell past the
        // deadline: sent now, it may still finish in time.
        let more = state.sent < self.max_attempts && state.refused_by.is_none() && !state.stopped;
        if more && (state.next_due.is_some() || state.cut_by_deadline) {
            let at = state.hold_until.map_or(now, |h| h.max(now));
            state.schedule_next(at);
        }
        if state.in_flight.is_empty() && state.next_due.is_none() {
            return HedgeDecision::Stop(state.exhausted_reason());
        }
        HedgeDecision::Continue
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Builds a [`HedgePolicy`]; made by [`HedgePolicy::builder`].
#[derive(Debug, Clone)]
pub struct HedgePolicyBuilder {
    policy: HedgePolicy,
}

impl HedgePolicyBuilder {
    /// The most copies a call sends, **counting the first** (default 2;
    /// 1 means no hedging; `1..=`[`MAX_HEDGE_ATTEMPTS`]).
    #[must_use]
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.policy.max_attempts = attempts;
        self
    }

    /// The delay between copies: a `Duration` or an `Arc<AdaptiveDelay>`.
    #[must_use]
    pub fn delay(mut self, delay: impl Into<HedgeDelay>) -> Self {
        self.policy.delay = delay.into();
        self
    }

    /// The longest wait a server's pushback ([`Verdict::RetryAfter`]) can
    /// impose before the next copy (default [`DEFAULT_MAX_DELAY`]).
    #[must_use]
    pub fn max_pushback(mut self, max: Duration) -> Self {
        self.policy.max_pushback = max;
        self
    }

    /// The overall limit of a call, from its start (default none): no copy
    /// is sent that would start at or past it, and when it passes the call
    /// fails, whatever is still in flight.
    #[must_use]
    pub fn max_elapsed(mut self, limit: Duration) -> Self {
        self.policy.max_elapsed = Some(limit);
        self
    }

    /// A shared retry control (token bucket, budget, throttle): it admits
    /// the first copy, allows every later one, and hears the outcomes
    /// (default none).
    #[must_use]
    pub fn control(mut self, control: Arc<dyn RetryControl>) -> Self {
        self.policy.control = Some(control);
        self
    }

    /// Checks the settings and builds the policy.
    ///
    /// # Errors
    /// A [`ConfigError`] when `max_attempts` is 0 or above
    /// [`MAX_HEDGE_ATTEMPTS`], or `max_elapsed` is zero.
    ///
    /// ```
    /// use std::time::Duration;
    /// let err = steadfast::HedgePolicy::builder(Duration::ZERO).max_attempts(0).build().unwrap_err();
    /// assert_eq!(err.field(), "max_attempts");
    /// ```
    pub fn build(self) -> Result<HedgePolicy, ConfigError> {
        const WHAT: &str = "hedge policy";
        let p = &self.policy;
        if p.max_attempts == 0 || p.max_attempts > MAX_HEDGE_ATTEMPTS {
            return Err(ConfigError::new(
                WHAT,
                "max_attempts",
                "must be in 1..=32 (it counts the first attempt)",
                p.max_attempts,
            ));
        }
        if p.max_elapsed == Some(Duration::ZERO) {
            return Err(ConfigError::new(
                WHAT,
                "max_elapsed",
                "must be greater than zero",
                Duration::ZERO,
            ));
        }
        Ok(self.policy)
    }
}
