//! One endpoint of the set: its identity, its readiness and hold, its
//! load and the tallies outlier detection reads.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Instant;

use super::super::load::PeakEwma;
use super::super::retry_cap::Flight;
use super::tally::Tally;
use super::{Shared, nanos};
use crate::backoff::ConnectionBackoff;
use crate::call::EndpointId;
use crate::rng::Rng;

pub(super) struct Entry {
    pub(super) id: EndpointId,
    pub(super) label: Arc<str>,
    /// The set it belongs to, for a finished pick to report to (weak: the
    /// set holds its entries).
    pub(super) shared: Weak<Shared>,
    /// The set's origin: a pick's start is kept as nanoseconds after it.
    pub(super) origin: Instant,
    /// The set's attempts in flight (every entry's share of them).
    pub(super) flight: Arc<Flight>,
    pub(super) ready: AtomicBool,
    pub(super) ejected: AtomicBool,
    /// Not to be picked before this time, in nanoseconds after `origin`
    /// (0: not held): the connection backoff after a request that never
    /// got through ([`Verdict::Unsent`](crate::Verdict::Unsent)).
    pub(super) held_until: AtomicU64,
    /// Whether `refusals` holds a backoff in progress (read without its
    /// lock by every finish).
    pub(super) backing_off: AtomicBool,
    /// The connection backoff of the refusals in a row.
    pub(super) refusals: Mutex<Option<ConnectionBackoff>>,
    pub(super) in_flight: AtomicU64,
    pub(super) rtt: Mutex<PeakEwma>,
    /// The outcomes since the last sweep (A50's two buckets).
    pub(super) tally: Tally,
    /// Failures in a row (Envoy's consecutive rules).
    pub(super) streak_5xx: AtomicU32,
    pub(super) streak_gateway: AtomicU32,
}

impl Entry {
    /// Whether it may be picked at `at` (nanoseconds after the origin):
    /// ready, and not held.
    pub(super) fn ready_at(&self, at: u64) -> bool {
        self.ready.load(Ordering::Relaxed) && self.held_until.load(Ordering::Relaxed) <= at
    }

    pub(super) fn load(&self, now: Instant) -> f64 {
        let rtt = *self.rtt.lock().unwrap_or_else(PoisonError::into_inner);
        rtt.load(self.in_flight.load(Ordering::Relaxed), now)
    }
}

impl Entry {
    /// A request to it never got through at `now`: held out of the picking
    /// for the next step of its connection backoff.
    #[cold]
    pub(super) fn refused(&self, now: Instant) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let Some(config) = shared.connection_backoff else {
            return;
        };
        let mut refusals = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        let backoff = refusals
            .get_or_insert_with(|| config.connection(Rng::with_seed(shared.draw(Rng::next_u64))));
        let retry_at = backoff.next_attempt(now).retry_at;
        let until = nanos(retry_at.saturating_duration_since(self.origin)).max(1);
        self.held_until.store(until, Ordering::Relaxed);
        self.backing_off.store(true, Ordering::Relaxed);
        tracing::debug!(
            target: "steadfast::endpoint",
            endpoint = &*self.label,
            held_ms = u64::try_from(retry_at.saturating_duration_since(now).as_millis()).unwrap_or(u64::MAX),
            "endpoint refused the connection: held"
        );
    }

    /// It answered: its connection backoff starts over.
    #[cold]
    pub(super) fn answered(&self) {
        let mut refusals = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(backoff) = refusals.as_mut() {
            backoff.reset();
        }
        self.backing_off.store(false, Ordering::Relaxed);
    }
}
