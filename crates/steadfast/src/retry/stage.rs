//! The async executor's running stage (the per-call state a call makes on
//! first need, on the heap, and its phase) and [`OutOfLine`], the slot whose
//! drop is checked inline and done out of line.

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::time::{Duration, Instant};

use pin_project_lite::pin_project;

use crate::call::{StopReason, Verdict};
use crate::deadline::WithDeadline;
use crate::limit::Acquire;
use crate::policy::CallState;
use crate::policy::gate::{Ticket, Turn};

#[cfg(doc)]
use super::{Retry, RetryFuture};

/// An optional value whose drop is checked inline and done out of line.
///
/// A future is dropped right after it completes, at the caller; an inline
/// `is_some` check there is free when the value was never made (the lean
/// path), where plain drop glue would be a call for every future.
pub(super) struct OutOfLine<T>(ManuallyDrop<Option<T>>);

impl<T> OutOfLine<T> {
    pub(super) const fn new(value: Option<T>) -> Self {
        Self(ManuallyDrop::new(value))
    }
}

impl<T> Deref for OutOfLine<T> {
    type Target = Option<T>;
    fn deref(&self) -> &Option<T> {
        &self.0
    }
}

impl<T> DerefMut for OutOfLine<T> {
    fn deref_mut(&mut self) -> &mut Option<T> {
        &mut self.0
    }
}

impl<T> Drop for OutOfLine<T> {
    #[inline]
    fn drop(&mut self) {
        if self.0.is_some() {
            drop_out_of_line(self.0.take());
        }
    }
}

#[cold]
#[inline(never)]
fn drop_out_of_line<T>(value: Option<T>) {
    drop(value);
}

/// A running stage, on the heap.
pub(super) type Boxed<Fut, S, H, T, E> = Pin<Box<Running<Fut, S, H, T, E>>>;

/// The slot of a [`RetryFuture`]'s running stage.
pub(super) type Slot<Fut, S, H, T, E> = OutOfLine<Boxed<Fut, S, H, T, E>>;

pin_project! {
    /// The running stage: per-call state and the futures it drives.
    #[project = RunningProj]
    pub(super) struct Running<Fut, S, H, T, E> {
        pub(super) call: CallState,
        // Why the call stopped, once it has (for a report).
        pub(super) stop: Option<StopReason>,
        pub(super) last: Option<Result<T, E>>,
        pub(super) timed_out: bool,
        pub(super) phase: Phase,
        // The gate's ticket of the attempt in flight.
        pub(super) ticket: Ticket,
        // The wait for a slot in the limit's queue (phase `Queue`), and when
        // it began.
        pub(super) acquire: Option<(Acquire, Instant)>,
        // The rate limit's booking of the next attempt's turn (phase
        // `RateWait`); dropped with the call, it gives the turn back.
        pub(super) turn: Option<Turn>,
        // The attempt in flight (phase `Attempt`).
        #[pin]
        pub(super) attempt: Option<WithDeadline<Fut>>,
        // The attempt's deadline timer (phase `Attempt`), the wait before
        // the next attempt (phase `Sleep`) or the bound on a wait for a slot
        // (phase `Queue`): one at a time.
        #[pin]
        pub(super) timer: Option<S>,
        // The notify hook's future (phase `Notify`).
        #[pin]
        pub(super) hook: Option<H>,
    }
}

impl<Fut, S, H, T, E> Running<Fut, S, H, T, E> {
    pub(super) const fn new(call: CallState) -> Self {
        Self {
            call,
            stop: None,
            last: None,
            timed_out: false,
            phase: Phase::Attempt,
            ticket: Ticket::FREE,
            acquire: None,
            turn: None,
            attempt: None,
            timer: None,
            hook: None,
        }
    }
}

/// Where the running stage is; the futures it drives live in its pinned slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// An outcome (in `last`) the caller's own first attempt gave, with its
    /// verdict, for the policy to decide on (after
    /// [`Retry::after_first_attempt`]).
    Decide(Verdict),
    Attempt,
    Notify(Duration),
    Sleep,
    /// Waiting in a concurrency limit's queue for the next attempt's slot.
    Queue,
    /// Waiting for the rate limit's turn booked for the next attempt.
    RateWait,
}
