//! A pick: the endpoint a call was given, held until its outcome is
//! told (or the call is dropped).

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::entry::Entry;
use crate::call::{Answer, EndpointId, Verdict};
use crate::classify::Classify;

/// The endpoint a call was given: held while the call is on it, then
/// [`finish`](Self::finish)ed with what its outcome says of the endpoint.
/// Dropped unfinished (a call cancelled), it only leaves: no sample, no
/// count.
#[must_use = "a pick holds its place in the endpoint's load until finished or dropped"]
pub struct Picked {
    pub(super) entry: Arc<Entry>,
    /// When the call started on it, in nanoseconds after the set's
    /// origin, and in the top bit ([`RETRY`]) whether it is a retry or a
    /// hedged copy ([`DONE`] once finished): two words, so that a ticket
    /// holding it stays small.
    pub(super) started: u64,
}

/// A finished pick's `started`.
pub(super) const DONE: u64 = u64::MAX;

/// The bit of `started` that marks a retry or a copy (292 years of
/// nanoseconds below it).
pub(super) const RETRY: u64 = 1 << 63;

impl std::fmt::Debug for Picked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Picked")
            .field("id", &self.entry.id)
            .field("label", &self.entry.label)
            .finish_non_exhaustive()
    }
}

impl Picked {
    /// The endpoint's identity.
    #[must_use]
    pub fn id(&self) -> EndpointId {
        self.entry.id
    }

    /// The endpoint's label.
    #[must_use]
    pub fn label(&self) -> &Arc<str> {
        &self.entry.label
    }

    /// The call on it ended at `now` with `answer`; `hint` is the server's
    /// own (`Retry-After`, pushback), if it sent one. The round trip is a
    /// sample of the endpoint's load; a failure, or a hint, raises its load
    /// instead (a penalty of the hint, 5 s to 300 s), so calls go elsewhere
    /// while it asked for room. The outcome counts for outlier detection as
    /// its model says, and a sweep runs if one is due.
    pub fn finish(mut self, answer: Answer, hint: Option<Duration>, now: Instant) {
        let word = std::mem::replace(&mut self.started, DONE);
        let started = word & !RETRY;
        let entry = &self.entry;
        entry.in_flight.fetch_sub(1, Ordering::Relaxed);
        entry.flight.end(word & RETRY != 0);
        // A server error or a hint is a penalty; anything else (a success,
        // a 4xx without a hint) a sample of the round trip.
        let penalty =
            hint.is_some() || matches!(answer, Answer::ServerError | Answer::GatewayError);
        {
            let mut rtt = entry.rtt.lock().unwrap_or_else(PoisonError::into_inner);
            if penalty {
                rtt.penalize(hint, now);
            } else {
                let started = entry.origin + Duration::from_nanos(started);
                rtt.observe(now.saturating_duration_since(started), now);
            }
        }
        // A set dropped meanwhile has no one left to tell.
        if let Some(shared) = entry.shared.upgrade() {
            shared.record(entry, answer, now);
            shared.sweep_if_due(now);
        }
    }

    /// The attempt on it ended at `now` with `outcome`, which `classify`
    /// judged `verdict`: [finishes](Self::finish) it with the classifier's
    /// [`answer`](Classify::answer) and, as the server's hint, the wait a
    /// [`Verdict::RetryAfter`] carries. The one rule by which an
    /// executor's outcome reaches its endpoint.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use steadfast::Verdict;
    /// use steadfast::classify::AnyError;
    /// use steadfast::endpoint::Endpoints;
    /// let set = Endpoints::builder().seed(1).build()?;
    /// let now = Instant::now();
    /// set.insert("a", now);
    /// let picked = set.pick(now).expect("ready");
    /// let outcome: Result<(), &str> = Err("503");
    /// picked.judge(&AnyError, Verdict::RetryAfter(Duration::from_secs(20)), &outcome, now);
    /// // The hint is a penalty: its round trip is now the 20 s asked for.
    /// assert_eq!(set.snapshot(now)[0].rtt, Duration::from_secs(20));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[inline]
    pub fn judge<K: Classify<T, E>, T, E>(
        self,
        classify: &K,
        verdict: Verdict,
        outcome: &Result<T, E>,
        now: Instant,
    ) {
        let hint = match verdict {
            Verdict::RetryAfter(hint) => Some(hint),
            _ => None,
        };
        if verdict == Verdict::Unsent {
            self.entry.refused(now);
        } else if self.entry.backing_off.load(Ordering::Relaxed) {
            self.entry.answered();
        }
        self.finish(classify.answer(outcome, verdict), hint, now);
    }
}

impl Drop for Picked {
    fn drop(&mut self) {
        if self.started != DONE {
            self.entry.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.entry.flight.end(self.started & RETRY != 0);
        }
    }
}
