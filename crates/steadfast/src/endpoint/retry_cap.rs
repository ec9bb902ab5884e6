//! [`RetryCap`]: one cap on the retries and hedged copies in flight over an
//! endpoint set, a share of the attempts in flight with a floor (Envoy's
//! `retry_budget`: 20 % and 3), and the counters it is checked against.

use crate::call::Refused;
use crate::config_error::ConfigError;
use crate::sync::{AtomicU64, Ordering};

/// How many retries and hedged copies may be in flight over an endpoint
/// set at once: `percent` of the attempts in flight on it (first attempts,
/// retries and copies alike, from every clone and every caller of the
/// set), and never fewer than `min_concurrency`. A retry over the cap is
/// not sent: the call stops with its last attempt's outcome
/// ([`StopReason::RetryCapped`](crate::StopReason::RetryCapped)), and the
/// set counts it ([`Endpoints::retry_overflows`](super::Endpoints::retry_overflows)).
///
/// The defaults are Envoy's `retry_budget`: 20 % and 3. A fleet of
/// clients retrying at once against a failing set then adds at most a
/// fifth to the load on the replicas left, where retries unbounded would
/// multiply it by the attempts allowed.
///
/// ```
/// use steadfast::endpoint::RetryCap;
/// let cap = RetryCap::default();
/// assert_eq!((cap.percent(), cap.min_concurrency()), (20, 3));
/// // With 100 attempts in flight, 20 may be retries; with 4, the floor: 3.
/// assert_eq!((cap.limit(100), cap.limit(4)), (20, 3));
/// assert!(RetryCap::new(120, 3).is_err());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryCap {
    percent: u32,
    min_concurrency: u32,
}

impl RetryCap {
    /// The default share of the attempts in flight, in percent.
    pub const DEFAULT_PERCENT: u32 = 20;
    /// The default floor.
    pub const DEFAULT_MIN_CONCURRENCY: u32 = 3;

    /// A cap of `percent` of the attempts in flight, at least
    /// `min_concurrency`.
    ///
    /// # Errors
    /// A percentage over 100.
    pub fn new(percent: u32, min_concurrency: u32) -> Result<Self, ConfigError> {
        if percent > 100 {
            return Err(ConfigError::new(
                "retry cap",
                "percent",
                "must be a percentage (0 to 100)",
                percent,
            ));
        }
        Ok(Self {
            percent,
            min_concurrency,
        })
    }

    /// The share of the attempts in flight, in percent.
    #[must_use]
    pub const fn percent(&self) -> u32 {
        self.percent
    }

    /// The floor.
    #[must_use]
    pub const fn min_concurrency(&self) -> u32 {
        self.min_concurrency
    }

    /// How many retries and copies may be in flight while `active`
    /// attempts are: `percent` of them (rounded down), at least the floor.
    #[must_use]
    pub const fn limit(&self, active: u64) -> u64 {
        let share = active.saturating_mul(self.percent as u64) / 100;
        if share > self.min_concurrency as u64 {
            share
        } else {
            self.min_concurrency as u64
        }
    }
}

impl Default for RetryCap {
    fn default() -> Self {
        Self {
            percent: Self::DEFAULT_PERCENT,
            min_concurrency: Self::DEFAULT_MIN_CONCURRENCY,
        }
    }
}

/// The set's attempts in flight, the retries and copies among them, and
/// the retries the cap turned away; shared by the set and its entries (a
/// pick ends, finished or dropped, through its entry).
#[derive(Debug)]
pub(super) struct Flight {
    active: AtomicU64,
    retries: AtomicU64,
    overflows: AtomicU64,
}

impl Flight {
    /// Nothing in flight.
    pub(super) fn new() -> Self {
        Self {
            active: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            overflows: AtomicU64::new(0),
        }
    }

    /// A first attempt starts.
    #[inline]
    pub(super) fn start(&self) {
        self.active.fetch_add(1, Ordering::Relaxed);
    }

    /// A retry or hedged copy asks to start under `cap` (`None`: no cap):
    /// it takes a place among the retries in flight, or is refused and
    /// counted. Exact under any number of callers: the place is taken by a
    /// compare-and-swap against the cap read with it.
    pub(super) fn start_retry(&self, cap: Option<RetryCap>) -> Result<(), Refused> {
        let Some(cap) = cap else {
            self.retries.fetch_add(1, Ordering::Relaxed);
            self.active.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        };
        let mut retries = self.retries.load(Ordering::Relaxed);
        loop {
            let limit = cap.limit(self.active.load(Ordering::Relaxed));
            if retries >= limit {
                self.overflows.fetch_add(1, Ordering::Relaxed);
                crate::telemetry::retry_overflow();
                return Err(Refused::RetryCap {
                    in_flight: u32::try_from(retries).unwrap_or(u32::MAX),
                    cap: u32::try_from(limit).unwrap_or(u32::MAX),
                });
            }
            match self.retries.compare_exchange_weak(
                retries,
                retries + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => retries = now,
            }
        }
        self.active.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// An attempt ends (`retry`: it was a retry or a copy).
    #[inline]
    pub(super) fn end(&self, retry: bool) {
        self.active.fetch_sub(1, Ordering::Relaxed);
        if retry {
            self.retries.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Attempts in flight, and the retries and copies among them.
    pub(super) fn in_flight(&self) -> (u64, u64) {
        (
            self.active.load(Ordering::Relaxed),
            self.retries.load(Ordering::Relaxed),
        )
    }

    /// Retries the cap turned away, ever.
    pub(super) fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Two retries asking at once for the last place under a floor of
    /// one: exactly one goes, the other is refused and counted, and the
    /// counts come back to zero.
    #[test]
    fn the_last_place_goes_to_one() {
        loom::model(|| {
            let flight = loom::sync::Arc::new(Flight::new());
            let cap = Some(RetryCap::new(0, 1).unwrap());
            let other = loom::sync::Arc::clone(&flight);
            let t = loom::thread::spawn(move || {
                let got = other.start_retry(cap).is_ok();
                if got {
                    other.end(true);
                }
                got
            });
            let mine = flight.start_retry(cap).is_ok();
            if mine {
                flight.end(true);
            }
            let theirs = t.join().unwrap();
            // Both may go when one ended before the other asked.
            assert!(mine || theirs, "a free place is never refused to both");
            assert_eq!(flight.overflows(), u64::from(!mine) + u64::from(!theirs));
            assert_eq!(flight.in_flight(), (0, 0));
        });
    }

    /// Held retries: two asking for one place, neither ending, never both
    /// get it.
    #[test]
    fn never_two_in_one_place() {
        loom::model(|| {
            let flight = loom::sync::Arc::new(Flight::new());
            let cap = Some(RetryCap::new(0, 1).unwrap());
            let other = loom::sync::Arc::clone(&flight);
            let t = loom::thread::spawn(move || other.start_retry(cap).is_ok());
            let mine = flight.start_retry(cap).is_ok();
            let theirs = t.join().unwrap();
            assert!(mine != theirs, "exactly one holds the one place");
            assert_eq!(flight.in_flight(), (1, 1));
            assert_eq!(flight.overflows(), 1);
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the order of starts and ends, the retries in flight
        /// never pass the cap of the attempts in flight when each was let
        /// in, nor its floor's worth when nothing else runs; and every end
        /// gives back exactly what its start took.
        #[test]
        fn never_over_the_cap(percent in 0u32..=100, min in 0u32..6, ops in proptest::collection::vec((any::<bool>(), any::<bool>()), 0..200)) {
            let cap = RetryCap::new(percent, min).unwrap();
            let flight = Flight::new();
            let mut held: Vec<bool> = Vec::new();
            let mut refused = 0u64;
            for (start, retry) in ops {
                if start || held.is_empty() {
                    if retry {
                        let (active, retries) = flight.in_flight();
                        match flight.start_retry(Some(cap)) {
                            Ok(()) => {
                                prop_assert!(retries < cap.limit(active));
                                held.push(true);
                            }
                            Err(Refused::RetryCap { in_flight, cap: limit }) => {
                                prop_assert_eq!(u64::from(in_flight), retries);
                                prop_assert_eq!(u64::from(limit), cap.limit(active));
                                prop_assert!(retries >= cap.limit(active));
                                refused += 1;
                            }
                            Err(other) => prop_assert!(false, "{other}"),
                        }
                    } else {
                        flight.start();
                        held.push(false);
                    }
                } else {
                    let retry = held.swap_remove(0);
                    flight.end(retry);
                }
                let retries_held = held.iter().filter(|r| **r).count() as u64;
                prop_assert_eq!(flight.in_flight(), (held.len() as u64, retries_held));
            }
            prop_assert_eq!(flight.overflows(), refused);
        }
    }

    #[test]
    fn no_cap_counts_but_never_refuses() {
        let flight = Flight::new();
        for _ in 0..50 {
            assert!(flight.start_retry(None).is_ok());
        }
        assert_eq!(flight.in_flight(), (50, 50));
        assert_eq!(flight.overflows(), 0);
    }
}
