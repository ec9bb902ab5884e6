//! The sweeps of outlier detection, run by the calls themselves when one
//! is due, and what a call's end tells them.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::super::detector::{Detector, Event, Host, Method};
use super::entry::Entry;
use super::{Shared, nanos};
use crate::call::{Answer, EndpointId};

/// What the sweeps need, under one lock: the detector, and each
/// endpoint's ejection state with its identity, in two aligned lists.
pub(super) struct Sweeps {
    pub(super) detector: Detector,
    pub(super) ids: Vec<EndpointId>,
    pub(super) hosts: Vec<Host>,
}

impl Shared {
    /// Runs the sweeps due at `now`, unless another call is running them
    /// (that one goes on without waiting). Costs one relaxed load when
    /// none is due.
    pub(super) fn sweep_if_due(&self, now: Instant) {
        let Some(sweeps) = &self.sweeps else { return };
        let Some(origin) = self.origin.get() else {
            return;
        };
        let elapsed = nanos(now.saturating_duration_since(*origin));
        let due = self.due.load(Ordering::Relaxed);
        if elapsed < due {
            return;
        }
        let Ok(mut s) = sweeps.try_lock() else { return };
        let due = self.due.load(Ordering::Relaxed);
        if elapsed < due {
            return; // swept by the call that held the lock
        }
        let list = self.list();
        let Sweeps {
            detector,
            ids,
            hosts,
        } = &mut *s;
        let interval = nanos(detector.config().interval()).max(1);
        // The tally of the interval that ended, read and zeroed at once.
        for (id, host) in ids.iter().zip(hosts.iter_mut()) {
            let (successes, failures) = list
                .iter()
                .find(|e| e.id == *id)
                .map_or((0, 0), |e| e.tally.take());
            host.set_tally(successes, failures);
        }
        // Sweeps missed while no call came run now, each at its own time,
        // the later ones on empty tallies (no call finished in them). Once
        // nothing is ejected and no multiplier is left, an empty sweep
        // changes nothing: the rest are skipped, so a set idle for a year
        // does not run three million sweeps on its next call.
        let mut at = due;
        while at <= elapsed {
            let when = *origin + Duration::from_nanos(at);
            detector.sweep(when, hosts, |event| apply(&list, ids, event));
            hosts.iter_mut().for_each(|h| h.set_tally(0, 0));
            at = at.saturating_add(interval);
            let settled = hosts.iter().all(|h| !h.is_ejected() && h.multiplier() == 0);
            if settled && at <= elapsed {
                let missed = (elapsed - at) / interval + 1;
                at = at.saturating_add(missed.saturating_mul(interval));
            }
        }
        self.due.store(at, Ordering::Relaxed);
    }

    /// What a call's end says for outlier detection: its tally, and the
    /// failures in a row of Envoy's consecutive rules (which eject at
    /// once, under the sweeps' lock, when one reaches its threshold).
    pub(super) fn record(&self, entry: &Entry, answer: Answer, now: Instant) {
        let Some(config) = &self.outlier else { return };
        let failure = config.is_failure(answer);
        entry.tally.record(failure);
        let (five, gateway) = (
            config.consecutive_5xx(),
            config.consecutive_gateway_failure(),
        );
        if five.is_none() && gateway.is_none() {
            return;
        }
        let mut hit = [None, None];
        match answer {
            Answer::ServerError | Answer::GatewayError => {
                let n = entry.streak_5xx.fetch_add(1, Ordering::Relaxed) + 1;
                if five.is_some_and(|r| n >= r.threshold) {
                    entry.streak_5xx.store(0, Ordering::Relaxed);
                    hit[0] = Some(Method::Consecutive5xx);
                }
                if answer == Answer::GatewayError {
                    let g = entry.streak_gateway.fetch_add(1, Ordering::Relaxed) + 1;
                    if gateway.is_some_and(|r| g >= r.threshold) {
                        entry.streak_gateway.store(0, Ordering::Relaxed);
                        hit[1] = Some(Method::ConsecutiveGatewayFailure);
                    }
                } else {
                    entry.streak_gateway.store(0, Ordering::Relaxed);
                }
            }
            Answer::Ok | Answer::ClientError => {
                entry.streak_5xx.store(0, Ordering::Relaxed);
                entry.streak_gateway.store(0, Ordering::Relaxed);
            }
        }
        if hit == [None, None] {
            return;
        }
        let Some(sweeps) = &self.sweeps else { return };
        let mut s = sweeps.lock().unwrap_or_else(PoisonError::into_inner);
        let list = self.list();
        let Sweeps {
            detector,
            ids,
            hosts,
        } = &mut *s;
        let Some(i) = ids.iter().position(|id| *id == entry.id) else {
            return;
        };
        for method in hit.into_iter().flatten() {
            detector.consecutive(now, hosts, i, method, |event| apply(&list, ids, event));
        }
    }
}

/// A detector's event, applied to the endpoint it names, and told.
fn apply(list: &[Arc<Entry>], ids: &[EndpointId], event: Event) {
    let index = match event {
        Event::Ejected { host, .. } | Event::Unenforced { host, .. } | Event::Returned { host } => {
            host
        }
    };
    let Some(id) = ids.get(index) else { return };
    let Some(entry) = list.iter().find(|e| e.id == *id) else {
        return;
    };
    match event {
        Event::Ejected {
            method, multiplier, ..
        } => {
            entry.ejected.store(true, Ordering::Relaxed);
            tracing::info!(
                target: "steadfast::endpoint",
                endpoint = &*entry.label,
                detection_method = method.as_str(),
                multiplier,
                "endpoint ejected"
            );
            crate::telemetry::ejection_enforced(method.as_str());
        }
        Event::Unenforced { method, reason, .. } => {
            tracing::debug!(
                target: "steadfast::endpoint",
                endpoint = &*entry.label,
                detection_method = method.as_str(),
                unenforced_reason = reason.as_str(),
                "outlier not ejected"
            );
            crate::telemetry::ejection_unenforced(method.as_str(), reason.as_str());
        }
        Event::Returned { .. } => {
            entry.ejected.store(false, Ordering::Relaxed);
            entry.streak_5xx.store(0, Ordering::Relaxed);
            entry.streak_gateway.store(0, Ordering::Relaxed);
            tracing::info!(target: "steadfast::endpoint", endpoint = &*entry.label, "endpoint returned");
        }
    }
}
