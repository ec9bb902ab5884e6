//! The gate: the one admission every attempt and hedged copy passes before
//! it is sent, and the [`Ticket`] it holds while it is in flight.
//!
//! Every executor (the async retry future, the blocking loop, the hedger)
//! asks it before each attempt and copy ([`Limits::admit`],
//! [`Limits::admit_now`]), and finishes the ticket it gets with the
//! attempt's verdict ([`Ticket::finish`]); so do steadfast-tower's retry
//! layer and `ConcurrencyLimitLayer` and the simulator, and the HTTP client
//! and the gRPC layer inherit it through those executors. None of them asks
//! a limit itself. A new kind of admission is one more step here.
//!
//! The steps, in this order:
//!
//! 0. **the retry control**, which is part of the decision to go at all, so
//!    the policy asks it before the gate: `admit_and_start` for a call's
//!    first attempt, [`decide`](crate::RetryPolicy::decide) for a retry,
//!    [`send_due`](crate::HedgePolicy::send_due) for a hedged copy (its
//!    refusal is a decision, [`StopReason::Throttled`](crate::StopReason::Throttled),
//!    and its grant goes back through the policy's `abandon` or `withdraw`
//!    when the gate then refuses);
//! 1. **the rate limit**: a turn now, a turn booked for later
//!    ([`Admission::Turn`], only for an attempt that may wait), or a
//!    refusal. It comes before the slot so that an attempt waiting for its
//!    turn holds no slot others could use;
//! 2. **the concurrency limit**: a slot now, a place in its queue
//!    ([`Admission::Queue`], only for an attempt that may wait, under a
//!    limit with a queue), or a refusal;
//! 3. **the endpoint**, under an [endpoint set](crate::endpoint::Endpoints):
//!    the power of two choices among the eligible endpoints, those the call
//!    has not tried first (`avoid`), or, with none ready, a refusal
//!    ([`Refused::NoEndpoint`]); a retry or hedged copy (a call that
//!    already went somewhere: `avoid` not empty) also takes a place under
//!    the set's [retry cap](crate::endpoint::RetryCap), or is refused
//!    ([`Refused::RetryCap`]). It comes last, right before the attempt
//!    is sent, so that an attempt waiting for a turn or a slot weighs on no
//!    endpoint's load. The ticket holds the pick
//!    ([`Ticket::endpoint`]) and, when finished, tells the endpoint what the
//!    attempt showed (its load, its health).
//!
//! The gate has two modes: [`Limits::admit`] for a first attempt or a
//! retry, which may wait (never past the call's deadline), and
//! [`Limits::admit_now`] for a hedged copy, which never waits (a copy is
//! worth sending now or not at all). A refusal is one
//! [`Refused`], which every executor turns into the call's stop the same
//! way ([`Refused::reason`], [`RetryError::with_refusal`](crate::RetryError::with_refusal)).
//!
//! ```
//! use steadfast::Verdict;
//! use steadfast::classify::AnyError;
//! use steadfast::clock::VirtualClock;
//! use steadfast::limit::ConcurrencyLimit;
//! use steadfast::policy::gate::Admission;
//! use steadfast::policy::Limits;
//!
//! let limits = Limits::default().with_concurrency_limit(ConcurrencyLimit::fixed(1).build()?);
//! let clock = VirtualClock::manual();
//! let Admission::Admitted(ticket) = limits.admit(None, &[], &clock) else { unreachable!() };
//! // The one slot is held: a hedged copy, which never waits, is refused.
//! let refused = limits.admit_now(&[], &clock).unwrap_err();
//! assert_eq!(refused.by(), "concurrency limit");
//! // The attempt ends; its ticket gives the slot back, telling the limit what it showed.
//! let outcome: Result<(), &str> = Ok(());
//! ticket.finish(&AnyError, Verdict::Success, &outcome, &clock);
//! assert!(limits.admit_now(&[], &clock).is_ok());
//! # Ok::<(), steadfast::ConfigError>(())
//! ```

use std::fmt;
use std::time::Duration;

use std::sync::Arc;

use super::limits::Limits;
use crate::call::{Answer, EndpointId, LimitRefused, RateRefused, Refused, Verdict};
use crate::classify::Classify;
use crate::clock::Clock;
use crate::deadline::Deadline;
use crate::endpoint::Picked;
use crate::limit::{Acquire, ConcurrencyLimit, Permit, Signal};
use crate::rate::{RateLimit, Reservation};

/// The gate's answer for one attempt ([`Limits::admit`]).
#[must_use = "an admission holds a rate limit's turn or a slot until it is used or dropped"]
#[derive(Debug)]
pub enum Admission {
    /// Send it now, holding this ticket until its outcome is known.
    Admitted(Ticket),
    /// The rate limit booked a turn [`Turn::wait`] from now: wait that
    /// long, then [`Turn::take`] it (which asks the concurrency limit).
    /// Dropped instead, the turn goes back to the limit.
    Turn(Turn),
    /// Every slot of the concurrency limit is taken: wait in its queue, up
    /// to [`Queue::bound`] ([`Queue::enter`] async, [`Queue::wait_blocking`]
    /// on a thread).
    Queue(Queue),
    /// Not to be sent.
    Refused(Refused),
}

impl Limits {
    /// The gate, for an attempt that may wait (a first attempt or a
    /// retry): asks the rate limit, then the concurrency limit, then picks
    /// the endpoint, among those not in `avoid` while one of them is
    /// eligible (see [the module](self)), and says whether the attempt may go now, how it may
    /// wait (for the rate limit's turn up to its
    /// [`rate_limit_max_wait`](Self::rate_limit_max_wait), in the
    /// concurrency limit's queue up to its
    /// [`max_queue_wait`](ConcurrencyLimit::max_queue_wait); neither past
    /// `deadline`), or who refused it.
    ///
    /// Costs three `Option` checks for limits with none of the three
    /// (inline: the executor sees a free ticket and keeps nothing of the
    /// rest); reads `clock` only when a wait is possible and there is a
    /// deadline to bound it by, and to pick an endpoint.
    #[inline(always)]
    pub fn admit<C: Clock>(
        &self,
        deadline: Option<Deadline>,
        avoid: &[EndpointId],
        clock: &C,
    ) -> Admission {
        if self.admits_all() {
            return Admission::Admitted(Ticket::FREE);
        }
        self.admit_limited(deadline, avoid, clock)
    }

    /// [`admit`](Self::admit) under a limit or an endpoint set, out of line.
    #[inline(never)]
    fn admit_limited<C: Clock>(
        &self,
        deadline: Option<Deadline>,
        avoid: &[EndpointId],
        clock: &C,
    ) -> Admission {
        self.admit_steps(deadline, avoid, clock)
    }

    /// The gate for a lean first attempt (a policy with no endpoint set, no
    /// deadline: see [`RetryPolicy::is_lean`](crate::RetryPolicy::is_lean)):
    /// [`admit`](Self::admit)'s answer, an admission as its slot alone
    /// (`Ok`), or the answer to wait for or end with (`Err`). Out of line,
    /// and the ticket never leaves it: a lean call's future moves one word
    /// for its admission, not a ticket of three (measured: the three-word
    /// ticket made the awaited call under limits 17 ns slower).
    ///
    /// # Errors
    /// The gate's answer when it is not an admission now: a turn or a
    /// place in a queue to wait for, or a refusal.
    #[inline(never)]
    pub fn admit_lean<C: Clock>(&self, clock: &C) -> Result<Option<Permit>, Admission> {
        match self.admit_steps(None, &[], clock) {
            Admission::Admitted(ticket) => Ok(ticket.into_slot()),
            other => Err(other),
        }
    }

    /// The steps of [`admit`](Self::admit) (rate limit, concurrency limit,
    /// endpoint), written once and inlined into its two out-of-line
    /// entries.
    #[inline(always)]
    fn admit_steps<C: Clock>(
        &self,
        deadline: Option<Deadline>,
        avoid: &[EndpointId],
        clock: &C,
    ) -> Admission {
        if let Some(rate) = self.rate_limit() {
            let max_wait = self.rate_limit_max_wait();
            if max_wait.is_zero() {
                if let Err(refused) = rate.check() {
                    return Admission::Refused(Refused::Rate(refused));
                }
            } else {
                match rate.reserve(1, bounded(max_wait, deadline, clock)) {
                    Ok(turn) if turn.wait().is_zero() => turn.admit(),
                    Ok(turn) => {
                        return Admission::Turn(Turn {
                            reservation: turn,
                            deadline,
                        });
                    }
                    Err(refused) => return Admission::Refused(Refused::Rate(refused)),
                }
            }
        }
        self.admit_slot(deadline, avoid, clock)
    }

    /// The gate, for an attempt that never waits (a hedged copy): the
    /// rate limit, then the concurrency limit, each now or never, then the
    /// endpoint, among those not in `avoid` (the copies' in flight) while
    /// one of them is eligible.
    ///
    /// # Errors
    /// The step that had no room now, as one [`Refused`].
    #[inline(always)]
    pub fn admit_now<C: Clock>(&self, avoid: &[EndpointId], clock: &C) -> Result<Ticket, Refused> {
        if self.admits_all() {
            return Ok(Ticket::FREE);
        }
        self.admit_now_limited(avoid, clock)
    }

    /// [`admit_now`](Self::admit_now) under a limit or an endpoint set,
    /// out of line.
    #[inline(never)]
    fn admit_now_limited<C: Clock>(
        &self,
        avoid: &[EndpointId],
        clock: &C,
    ) -> Result<Ticket, Refused> {
        if let Some(rate) = self.rate_limit() {
            rate.check().map_err(Refused::Rate)?;
        }
        let permit = match self.concurrency_limit() {
            None => None,
            Some(limit) => Some(limit.try_acquire().map_err(Refused::Limit)?),
        };
        self.seat(permit, avoid, clock)
    }

    /// Step 2 alone: the concurrency limit's slot (then step 3).
    #[inline]
    fn admit_slot<C: Clock>(
        &self,
        deadline: Option<Deadline>,
        avoid: &[EndpointId],
        clock: &C,
    ) -> Admission {
        let permit = match self.concurrency_limit() {
            None => None,
            Some(limit) => match limit.try_take() {
                Some(permit) => Some(permit),
                None => return full(limit, deadline, clock),
            },
        };
        match self.seat(permit, avoid, clock) {
            Ok(ticket) => Admission::Admitted(ticket),
            Err(refused) => Admission::Refused(refused),
        }
    }

    /// The ticket of a slot a limit's queue handed over (steps 2 and 3 of
    /// an attempt that waited in the queue), or the refusal of a wait that
    /// got none, or of an endpoint set with none ready.
    ///
    /// # Errors
    /// The refusal, as one [`Refused`].
    #[inline]
    pub fn admitted<C: Clock>(
        &self,
        slot: Result<Permit, LimitRefused>,
        avoid: &[EndpointId],
        clock: &C,
    ) -> Result<Ticket, Refused> {
        let permit = slot.map_err(Refused::Limit)?;
        self.seat(Some(permit), avoid, clock)
    }

    /// Step 3: the endpoint, if the limits have a set; the ticket holds it
    /// and `permit`. With none ready, or a retry (`avoid` not empty) over
    /// the set's retry cap, the refusal (and `permit` goes back unused).
    #[inline]
    fn seat<C: Clock>(
        &self,
        permit: Option<Permit>,
        avoid: &[EndpointId],
        clock: &C,
    ) -> Result<Ticket, Refused> {
        let Some(set) = self.endpoints() else {
            return Ok(Ticket {
                permit,
                picked: None,
            });
        };
        let picked = set.pick_attempt(clock.now(), avoid)?;
        Ok(Ticket {
            permit,
            picked: Some(picked),
        })
    }
}

/// Every slot of `limit` is taken: a place in its queue, or the refusal.
#[cold]
#[inline(never)]
fn full<C: Clock>(limit: &ConcurrencyLimit, deadline: Option<Deadline>, clock: &C) -> Admission {
    let bound = limit.max_queue_wait().map_or(Duration::ZERO, |max_wait| {
        bounded(max_wait, deadline, clock)
    });
    if bound.is_zero() {
        return Admission::Refused(Refused::Limit(limit.refusal(Duration::ZERO)));
    }
    Admission::Queue(Queue {
        limit: limit.clone(),
        bound,
    })
}

/// `max_wait`, cut to the time left before `deadline` (read from `clock`
/// only when there is one).
fn bounded<C: Clock>(max_wait: Duration, deadline: Option<Deadline>, clock: &C) -> Duration {
    match deadline {
        Some(deadline) => max_wait.min(deadline.remaining(clock.now())),
        None => max_wait,
    }
}

/// A turn the rate limit booked for an attempt ([`Admission::Turn`]).
#[must_use = "a turn dropped untaken gives itself back"]
#[derive(Debug)]
pub struct Turn {
    reservation: Reservation,
    deadline: Option<Deadline>,
}

impl Turn {
    /// How long to wait before [taking](Self::take) it.
    #[must_use]
    pub fn wait(&self) -> Duration {
        self.reservation.wait()
    }

    /// The wait is over: the rate limit's share stays taken, and the gate
    /// goes on to the concurrency limit (step 2), its queue bounded by the
    /// same deadline, and to the endpoint (step 3), avoiding `avoid`.
    #[inline]
    pub fn take<C: Clock>(self, limits: &Limits, avoid: &[EndpointId], clock: &C) -> Admission {
        self.reservation.admit();
        limits.admit_slot(self.deadline, avoid, clock)
    }

    /// The turn cannot be waited for after all (the executor has no timer
    /// here): it goes back, and this is the refusal to end the call with.
    pub fn give_up(self, limits: &Limits) -> RateRefused {
        let wait = self.wait();
        drop(self.reservation);
        RateRefused {
            by: limits
                .rate_limit()
                .map_or(crate::rate::DEFAULT_RATE_LIMIT_NAME, RateLimit::name),
            retry_after: Some(wait),
        }
    }
}

/// A place to wait in a concurrency limit's queue ([`Admission::Queue`]).
#[derive(Debug)]
pub struct Queue {
    limit: ConcurrencyLimit,
    bound: Duration,
}

impl Queue {
    /// How long the attempt may wait in the queue: the limit's
    /// `max_wait`, cut to the call's time left.
    #[must_use]
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// Joins the queue: a future of the slot, which the caller bounds by
    /// [`bound`](Self::bound) on its clock, then [gives up](Acquire::give_up);
    /// the slot or the refusal goes through [`Limits::admitted`].
    pub fn enter(self) -> Acquire {
        self.limit.acquire()
    }

    /// Waits on this thread for a slot, up to [`bound`](Self::bound); the
    /// slot or the refusal goes through [`Limits::admitted`].
    ///
    /// # Errors
    /// The limit's refusal when no slot came in time.
    pub fn wait_blocking(self) -> Result<Permit, LimitRefused> {
        self.limit.acquire_blocking(self.bound)
    }

    /// The queue cannot be waited in after all (the executor has no timer
    /// here): the refusal to end the call with, counted by the limit.
    pub fn give_up(self) -> LimitRefused {
        self.limit.refusal(Duration::ZERO)
    }
}

/// What an admitted attempt holds while in flight: its slot of the
/// concurrency limit and its endpoint, if the policy has a limit and a
/// set.
///
/// [Finish](Self::finish) it with the attempt's verdict; dropped unfinished
/// (the attempt was cancelled, its future dropped, its code panicked) it
/// gives back what it holds saying nothing of the dependency or the
/// endpoint. Either way everything goes back exactly once. A ticket of
/// limits with neither holds nothing and costs nothing.
#[must_use = "a ticket holds its slot until it is finished or dropped"]
#[derive(Default)]
pub struct Ticket {
    permit: Option<Permit>,
    picked: Option<Picked>,
}

impl Ticket {
    /// A ticket that holds nothing.
    pub const FREE: Self = Self {
        permit: None,
        picked: None,
    };

    /// The attempt is over, its outcome judged `verdict` by `classify`:
    /// gives the slot back as [`end`](Self::end) does, asking
    /// [`Classify::overloaded`] only for a failure that holds a slot, and
    /// tells the endpoint what the outcome says of it
    /// ([`Picked::judge`]: the classifier's [`answer`](Classify::answer),
    /// a [`Verdict::RetryAfter`]'s wait as the server's hint), reading
    /// `clock` only then.
    #[inline(always)]
    pub fn finish<K: Classify<T, E>, T, E, C: Clock>(
        self,
        classify: &K,
        verdict: Verdict,
        outcome: &Result<T, E>,
        clock: &C,
    ) {
        let Self { permit, picked } = self;
        if let Some(picked) = picked {
            judge(picked, classify, verdict, outcome, clock);
        }
        if let Some(permit) = permit {
            let overloaded = verdict != Verdict::Success && classify.overloaded(outcome);
            permit.finish(Signal::of(verdict, overloaded));
        }
    }

    /// The attempt is over, judged `verdict`, `overloaded` saying whether
    /// its outcome is a sign of overload: gives the slot back with what
    /// that says of the dependency ([`Signal::of`]). The one place an
    /// attempt's end reaches a limit. For the limits' own users (a layer
    /// that holds no classifier): an endpoint the ticket holds hears
    /// nothing, as if the attempt were cancelled ([`finish`](Self::finish)
    /// tells it).
    #[inline]
    pub fn end(self, verdict: Verdict, overloaded: bool) {
        if let Some(permit) = self.permit {
            permit.finish(Signal::of(verdict, overloaded));
        }
    }

    /// The attempt was cut off by its timeout at `clock`'s now: a drop for
    /// the limit, a gateway error (no answer) for the endpoint.
    #[inline]
    pub fn timed_out<C: Clock>(self, clock: &C) {
        let Self { permit, picked } = self;
        if let Some(picked) = picked {
            picked.finish(Answer::GatewayError, None, clock.now());
        }
        if let Some(permit) = permit {
            permit.finish(Signal::Dropped);
        }
    }

    /// The slot alone, for a lean first attempt (whose policy has no
    /// endpoint set, so the ticket holds no pick).
    #[inline]
    fn into_slot(self) -> Option<Permit> {
        debug_assert!(self.picked.is_none(), "a lean policy has no endpoint set");
        self.permit
    }

    /// The ticket of a lean first attempt's slot ([`Limits::admit_lean`]).
    #[inline]
    pub fn from_slot(permit: Option<Permit>) -> Self {
        Self {
            permit,
            picked: None,
        }
    }

    /// Whether it holds a slot.
    #[must_use]
    pub fn holds_slot(&self) -> bool {
        self.permit.is_some()
    }

    /// The endpoint picked for the attempt, if the policy has a set.
    #[inline]
    #[must_use]
    pub fn endpoint(&self) -> Option<EndpointId> {
        self.picked.as_ref().map(Picked::id)
    }

    /// The endpoint picked and its label.
    #[must_use]
    pub(crate) fn picked(&self) -> Option<(EndpointId, &Arc<str>)> {
        self.picked.as_ref().map(|p| (p.id(), p.label()))
    }
}

/// The endpoint's part of [`Ticket::finish`], out of line: a ticket of
/// limits without an endpoint set inlines to the slot's part alone.
#[inline(never)]
fn judge<K: Classify<T, E>, T, E, C: Clock>(
    picked: Picked,
    classify: &K,
    verdict: Verdict,
    outcome: &Result<T, E>,
    clock: &C,
) {
    picked.judge(classify, verdict, outcome, clock.now());
}

impl From<Permit> for Ticket {
    #[inline]
    fn from(permit: Permit) -> Self {
        Self {
            permit: Some(permit),
            picked: None,
        }
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("slot", &self.permit.as_ref().map(|p| p.limit().name()))
            .field("endpoint", &self.picked.as_ref().map(Picked::label))
            .finish()
    }
}
