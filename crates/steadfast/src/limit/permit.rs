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
    /// When the attempt started, on the limit's clock (adaptive limits only).
    started: u64,
    /// Attempts in flight when it started, itself included.
    in_flight: u32,
    released: bool,
}

impl Permit {
    pub(super) fn new(limit: ConcurrencyLimit, started: u64, in_flight: u32) -> Self {
        Self {
            limit,
            started,
            in_flight,
            released: false,
        }
    }

    /// Gives the slot back, with what the attempt showed: an adaptive limit
    /// takes a success's latency as a sample and shrinks on a drop.
    #[inline]
    pub fn finish(mut self, signal: Signal) {
        self.released = true;
        self.limit.release(self.started, self.in_flight, signal);
    }

    /// Attempts in flight under the limit when this one took its slot,
    /// itself included.
    #[must_use]
    pub fn in_flight(&self) -> u32 {
        self.in_flight
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
        if !self.released {
            self.limit
                .release(self.started, self.in_flight, Signal::Ignored);
        }
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("limit", &self.limit.name())
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}
