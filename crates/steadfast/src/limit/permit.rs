//! [`Permit`]: a slot of a concurrency limit, given back on every path.

use std::fmt;

use super::concurrency::ConcurrencyLimit;
use super::signal::Signal;

/// One slot of a [`ConcurrencyLimit`], held while an attempt is in flight.
///
/// Give it back with [`finish`](Self::finish), saying what the attempt
/// showed; dropped unfinished (the attempt was cancelled, its future
/// dropped, its code panicked) it gives the slot back as
/// [`Signal::Ignored`]. Either way the slot is freed exactly once.
///
/// ```
/// use steadfast::limit::{ConcurrencyLimit, Signal};
/// let limit = ConcurrencyLimit::fixed(1).build()?;
/// let permit = limit.try_acquire()?;
/// assert!(limit.try_acquire().is_err()); // the one slot is taken
/// permit.finish(Signal::Success);
/// let again = limit.try_acquire()?;
/// drop(again); // dropped: given back too
/// assert_eq!(limit.in_flight(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a permit holds its slot until it is finished or dropped"]
pub struct Permit {
    limit: ConcurrencyLimit,
    /// When the attempt started, on the limit's clock (adaptive limits
    /// only; 0 otherwise), or [`RELEASED`] once the slot is given back.
    /// Two words in all, so an executor's future grows by no more.
    started: u64,
}

/// `started` of a permit whose slot was given back.
const RELEASED: u64 = u64::MAX;

impl Permit {
    pub(super) fn new(limit: ConcurrencyLimit, started: u64) -> Self {
        Self {
            limit,
            started: started.min(RELEASED - 1),
        }
    }

    /// Gives the slot back, with what the attempt showed: an adaptive limit
    /// takes a success's latency as a sample and shrinks on a drop.
    #[inline]
    pub fn finish(mut self, signal: Signal) {
        let started = std::mem::replace(&mut self.started, RELEASED);
        self.limit.release(started, signal);
    }

    /// The limit this slot belongs to.
    #[must_use]
    pub fn limit(&self) -> &ConcurrencyLimit {
        &self.limit
    }
}

impl Drop for Permit {
    #[inline]
    fn drop(&mut self) {
        if self.started != RELEASED {
            self.limit.release(self.started, Signal::Ignored);
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("limit", &self.limit.name())
            .field("released", &(self.started == RELEASED))
            .finish_non_exhaustive()
    }
}
