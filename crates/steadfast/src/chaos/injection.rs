//! [`Injection`]: the faults drawn for one call, and the slot it holds
//! under the ceiling on faults active at once.

use std::sync::Arc;
use std::time::Duration;

use super::value::Shared;
use crate::sync::Ordering;

/// Which fault replaces a call's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultKind {
    /// An error (the chaos's error, or an abort).
    Error,
    /// A substituted outcome: an HTTP status, a gRPC status.
    Outcome,
}

/// The faults drawn for one call: a latency before it, and an error or a
/// substituted outcome instead of it. Holding it holds one of the
/// chaos's active-fault slots; dropping it gives the slot back.
#[derive(Debug)]
#[must_use = "dropping an injection ends its faults"]
pub struct Injection {
    /// The latency to add before the call (or before the fault).
    pub delay: Option<Duration>,
    /// The fault that replaces the call's outcome, if any.
    pub fault: Option<FaultKind>,
    pub(super) _slot: ActiveSlot,
}

/// One of a chaos's slots of active faults, given back on drop.
#[derive(Debug)]
pub(super) struct ActiveSlot(pub(super) Arc<Shared>);

impl Drop for ActiveSlot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Release);
    }
}
