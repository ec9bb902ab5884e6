//! [`Endpoints`]: the set a call picks from, shared by every clone: each
//! endpoint's load and health, the pick, and the sweeps of outlier
//! detection, run by the calls themselves when one is due (no task, no
//! timer: a set nobody calls does nothing). One endpoint is an `Entry`
//! (`entry.rs`), a call's hold on one a [`Picked`] (`picked.rs`); the
//! sweeps and what a call's end tells them are in `sweep.rs`.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

mod entry;
mod picked;
mod sweep;
mod tally;

use super::detector::{Detector, Host};
use super::load::{DEFAULT_DECAY, DEFAULT_RTT, PeakEwma};
use super::outlier::OutlierDetection;
use super::pick::{Candidates, power_of_two};
use super::retry_cap::{Flight, RetryCap};
use crate::backoff::GrpcConnectionBackoff;
use crate::call::{EndpointId, Refused};
use crate::config_error::ConfigError;
use crate::rng::Rng;
use entry::Entry;
pub use picked::Picked;
use picked::RETRY;
use sweep::Sweeps;

/// One endpoint as [`Endpoints::snapshot`] shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointState {
    /// Its identity.
    pub id: EndpointId,
    /// Its label (an address, a URL): what reports and errors name.
    pub label: Arc<str>,
    /// Whether it can take calls now: the integration says so
    /// ([`Endpoints::set_ready`]) and it is not held after a refused
    /// connection.
    pub ready: bool,
    /// Whether outlier detection has taken it out.
    pub ejected: bool,
    /// Calls in flight on it.
    pub in_flight: u64,
    /// Its peak-EWMA round-trip time now.
    pub rtt: Duration,
    /// Its ejection multiplier.
    pub multiplier: u32,
}

/// The attempts in flight over an [`Endpoints`] set, as
/// [`Endpoints::flight`] shows them: what its [`RetryCap`] is checked
/// against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    /// Attempts in flight (first attempts, retries and hedged copies).
    pub attempts: u64,
    /// The retries and hedged copies among them.
    pub retries: u64,
    /// Retries and copies the cap turned away, ever.
    pub overflows: u64,
}

struct Shared {
    decay: Duration,
    default_rtt: Duration,
    panic_threshold: u32,
    retry_cap: Option<RetryCap>,
    flight: Arc<Flight>,
    connection_backoff: Option<GrpcConnectionBackoff>,
    /// The detection's configuration, read without the sweeps' lock (what
    /// counts as a failure, the consecutive thresholds).
    outlier: Option<OutlierDetection>,
    list: RwLock<Arc<[Arc<Entry>]>>,
    sweeps: Option<Mutex<Sweeps>>,
    /// The time the first endpoint came, from the caller's clock: the
    /// origin of `due`.
    origin: OnceLock<Instant>,
    /// When the next sweep is due, in nanoseconds after `origin`: one
    /// relaxed load tells a call whether to try for the sweeps' lock.
    due: AtomicU64,
    next_id: AtomicU64,
    /// The pick's draws: a seeded set's own generator (its picks repeat,
    /// under a lock); `None`: each thread's own, so picks from many threads
    /// share no lock.
    rng: Option<Mutex<Rng>>,
}

thread_local! {
    /// The draws of the picks of unseeded sets made on this thread.
    static PICK_RNG: std::cell::RefCell<Rng> = std::cell::RefCell::new(Rng::from_entropy());
}

/// A set of endpoints (replicas of one service) that calls are spread
/// over: the power of two choices by peak-EWMA load × (calls in flight +
/// 1), among the endpoints that are ready and not ejected; outlier
/// detection ([`OutlierDetection`], gRFC A50 by default) takes the bad ones
/// out. Shared by every clone, like every limit. The integration inserts
/// and removes endpoints as its discovery says, marks them ready or not as
/// their connections come and go, and keeps each endpoint's service by its
/// [`EndpointId`].
///
/// When fewer than `panic_threshold` percent of the endpoints are
/// eligible (ready and not ejected), the pick ignores ejection (Envoy's
/// panic mode), rather than pile every call on the few left.
///
/// ```
/// use std::time::{Duration, Instant};
/// use steadfast::endpoint::{Answer, Endpoints};
/// let set = Endpoints::builder().seed(7).build()?;
/// let now = Instant::now();
/// let a = set.insert("10.0.0.1:443", now);
/// let b = set.insert("10.0.0.2:443", now);
/// // `a` answered slowly once: calls go to `b` while `a`'s peak decays.
/// let slow = set.pick(now).expect("two ready endpoints");
/// let slow_id = slow.id();
/// slow.finish(Answer::Ok, None, now + Duration::from_secs(3));
/// let next = set.pick(now + Duration::from_secs(3)).expect("ready");
/// assert_ne!(next.id(), slow_id);
/// assert!([a, b].contains(&next.id()));
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Endpoints {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("len", &self.len())
            .field("panic_threshold", &self.shared.panic_threshold)
            .field("outlier_detection", &self.shared.sweeps.is_some())
            .finish_non_exhaustive()
    }
}

/// Builds an [`Endpoints`] set: [`Endpoints::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct EndpointsBuilder {
    decay: Duration,
    default_rtt: Duration,
    panic_threshold: u32,
    retry_cap: Option<RetryCap>,
    connection_backoff: Option<GrpcConnectionBackoff>,
    outlier: Option<OutlierDetection>,
    seed: Option<u64>,
}

impl EndpointsBuilder {
    /// How fast a round-trip sample is forgotten ([`DEFAULT_DECAY`], 10 s).
    pub fn decay(mut self, decay: Duration) -> Self {
        self.decay = decay;
        self
    }

    /// The round-trip time of an endpoint with no sample yet
    /// ([`DEFAULT_RTT`], 1 s).
    pub fn default_rtt(mut self, rtt: Duration) -> Self {
        self.default_rtt = rtt;
        self
    }

    /// Below this share of eligible endpoints, in percent, the pick ignores
    /// ejection (default 50; 0 never does).
    pub fn panic_threshold(mut self, percent: u32) -> Self {
        self.panic_threshold = percent;
        self
    }

    /// The cap on the retries and hedged copies in flight over the set,
    /// shared by every clone and every caller, or `None` for none
    /// (default: [`RetryCap::default`], 20 % of the attempts in flight, at
    /// least 3).
    pub fn retry_cap(mut self, cap: Option<RetryCap>) -> Self {
        self.retry_cap = cap;
        self
    }

    /// How long an endpoint is held out of the picking after a request
    /// to it never got through (a refused connection,
    /// [`Verdict::Unsent`](crate::Verdict::Unsent)), growing with the
    /// refusals in a row: the gRPC connection backoff (default [`GrpcConnectionBackoff::default`]: 1 s,
    /// then × 1.6 ± 20 % up to 120 s); an answer from it starts the curve
    /// over. `None`: never held (the failure's load penalty alone steers
    /// calls away).
    pub fn connection_backoff(mut self, backoff: Option<GrpcConnectionBackoff>) -> Self {
        self.connection_backoff = backoff;
        self
    }

    /// Outlier detection, or `None` for none (default: gRFC A50's).
    pub fn outlier_detection(mut self, detection: Option<OutlierDetection>) -> Self {
        self.outlier = detection;
        self
    }

    /// Seeds the pick's draws, for a repeatable run (they are then drawn
    /// under a lock; unseeded, each thread draws its own, lock-free).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The set, empty.
    ///
    /// # Errors
    /// A zero decay, or a panic threshold over 100.
    pub fn build(self) -> Result<Endpoints, ConfigError> {
        const WHAT: &str = "endpoint set";
        if self.decay.is_zero() {
            return Err(ConfigError::new(
                WHAT,
                "decay",
                "must be greater than zero",
                self.decay,
            ));
        }
        if self.panic_threshold > 100 {
            return Err(ConfigError::new(
                WHAT,
                "panic_threshold",
                "must be a percentage (0 to 100)",
                self.panic_threshold,
            ));
        }
        let outlier = self.outlier.filter(OutlierDetection::detects);
        let sweeps = outlier.clone().map(|config| {
            Mutex::new(Sweeps {
                detector: Detector::new(config),
                ids: Vec::new(),
                hosts: Vec::new(),
            })
        });
        Ok(Endpoints {
            shared: Arc::new(Shared {
                decay: self.decay,
                default_rtt: self.default_rtt,
                panic_threshold: self.panic_threshold,
                retry_cap: self.retry_cap,
                flight: Arc::new(Flight::new()),
                connection_backoff: self.connection_backoff,
                outlier,
                list: RwLock::new(Arc::from(Vec::new())),
                sweeps,
                origin: OnceLock::new(),
                due: AtomicU64::new(u64::MAX),
                next_id: AtomicU64::new(0),
                rng: self.seed.map(|seed| Mutex::new(Rng::with_seed(seed))),
            }),
        })
    }
}

impl Endpoints {
    /// A builder: 10 s decay, 1 s default round trip, panic under 50 %
    /// eligible, retries capped at 20 % of the attempts in flight (at
    /// least 3), an endpoint that refused a connection held on the gRPC
    /// connection backoff, gRFC A50 outlier detection.
    pub fn builder() -> EndpointsBuilder {
        EndpointsBuilder {
            decay: DEFAULT_DECAY,
            default_rtt: DEFAULT_RTT,
            panic_threshold: 50,
            retry_cap: Some(RetryCap::default()),
            connection_backoff: Some(GrpcConnectionBackoff::default()),
            outlier: Some(OutlierDetection::default()),
            seed: None,
        }
    }

    /// Adds an endpoint labelled `label` at `now`, ready. Calls in flight
    /// on the others are not disturbed.
    pub fn insert(&self, label: impl Into<Arc<str>>, now: Instant) -> EndpointId {
        let id = EndpointId::new(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
        let origin = *self.shared.origin.get_or_init(|| now);
        let entry = Arc::new(Entry {
            id,
            label: label.into(),
            shared: Arc::downgrade(&self.shared),
            origin,
            flight: Arc::clone(&self.shared.flight),
            ready: AtomicBool::new(true),
            ejected: AtomicBool::new(false),
            held_until: AtomicU64::new(0),
            backing_off: AtomicBool::new(false),
            refusals: Mutex::new(None),
            in_flight: AtomicU64::new(0),
            rtt: Mutex::new(PeakEwma::new(
                self.shared.decay,
                self.shared.default_rtt,
                now,
            )),
            tally: tally::Tally::new(),
            streak_5xx: AtomicU32::new(0),
            streak_gateway: AtomicU32::new(0),
        });
        if let Some(sweeps) = &self.shared.sweeps {
            let mut s = sweeps.lock().unwrap_or_else(PoisonError::into_inner);
            if self.shared.due.load(Ordering::Relaxed) == u64::MAX {
                let first = now.saturating_duration_since(origin) + s.detector.config().interval();
                self.shared.due.store(nanos(first), Ordering::Relaxed);
            }
            s.ids.push(id);
            s.hosts.push(Host::new());
        }
        let mut list = self
            .shared
            .list
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut next: Vec<Arc<Entry>> = list.iter().cloned().collect();
        next.push(entry);
        *list = Arc::from(next);
        id
    }

    /// Removes endpoint `id`: it receives nothing new; calls in flight on
    /// it finish (their outcome counts for nothing). `false` if it was not
    /// in the set.
    pub fn remove(&self, id: EndpointId) -> bool {
        let mut list = self
            .shared
            .list
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let before = list.len();
        let next: Vec<Arc<Entry>> = list.iter().filter(|e| e.id != id).cloned().collect();
        let removed = next.len() != before;
        *list = Arc::from(next);
        drop(list);
        if let Some(sweeps) = &self.shared.sweeps {
            let mut s = sweeps.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(i) = s.ids.iter().position(|h| *h == id) {
                s.ids.remove(i);
                s.hosts.remove(i);
            }
        }
        removed
    }

    /// Says whether endpoint `id` can take calls (the integration's
    /// readiness: connected, or not). A set never drops an endpoint for
    /// an error; one that is not ready is only skipped.
    pub fn set_ready(&self, id: EndpointId, ready: bool) {
        if let Some(e) = self.entry(id) {
            e.ready.store(ready, Ordering::Relaxed);
        }
    }

    /// How many endpoints the set has.
    #[must_use]
    pub fn len(&self) -> usize {
        self.list().len()
    }

    /// Whether it has none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Picks the endpoint for a call starting at `now`: the power of two
    /// choices over the eligible endpoints (all the ready ones, in panic),
    /// or `None` when no endpoint is ready. Runs the sweep first if one is
    /// due.
    #[must_use]
    pub fn pick(&self, now: Instant) -> Option<Picked> {
        self.pick_avoiding(now, &[])
    }

    /// [`pick`](Self::pick), among the endpoints not in `avoid` while any
    /// of those is eligible (a retry going elsewhere than where the call
    /// already went).
    ///
    /// The pick counts as a first attempt: a retry or a hedged copy is
    /// [`pick_retry`](Self::pick_retry), under the set's retry cap.
    #[must_use]
    pub fn pick_avoiding(&self, now: Instant, avoid: &[EndpointId]) -> Option<Picked> {
        self.pick_as(now, avoid, false).ok()
    }

    /// The pick for a retry or a hedged copy of a call that already went
    /// to the endpoints in `avoid`: [`pick_avoiding`](Self::pick_avoiding),
    /// under the set's [`RetryCap`]. The pick holds its place among the
    /// retries in flight until finished or dropped.
    ///
    /// ```
    /// use std::time::Instant;
    /// use steadfast::call::Refused;
    /// use steadfast::endpoint::{Endpoints, RetryCap};
    /// let set = Endpoints::builder().retry_cap(Some(RetryCap::new(20, 1)?)).build()?;
    /// let now = Instant::now();
    /// let a = set.insert("a:1", now);
    /// set.insert("b:1", now);
    /// let first = set.pick(now).expect("ready");
    /// let retry = set.pick_retry(now, &[first.id()]).expect("under the floor of one");
    /// // A second retry in flight passes the floor (and 20 % of two attempts).
    /// let refused = set.pick_retry(now, &[a]).unwrap_err();
    /// assert_eq!(refused, Refused::RetryCap { in_flight: 1, cap: 1 });
    /// assert_eq!(set.flight().overflows, 1);
    /// drop(retry);
    /// assert!(set.pick_retry(now, &[a]).is_ok());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    /// [`Refused::NoEndpoint`] when no endpoint is ready,
    /// [`Refused::RetryCap`] when the set has as many retries in flight as
    /// its cap allows.
    pub fn pick_retry(&self, now: Instant, avoid: &[EndpointId]) -> Result<Picked, Refused> {
        self.pick_as(now, avoid, true)
    }

    /// The pick for the gate: a retry (under the cap) when the call
    /// already went somewhere (`avoid` is the endpoints it tried, empty
    /// only for its first attempt or copy).
    #[inline]
    pub(crate) fn pick_attempt(
        &self,
        now: Instant,
        avoid: &[EndpointId],
    ) -> Result<Picked, Refused> {
        self.pick_as(now, avoid, !avoid.is_empty())
    }

    fn pick_as(&self, now: Instant, avoid: &[EndpointId], retry: bool) -> Result<Picked, Refused> {
        self.shared.sweep_if_due(now);
        let list = self.list();
        let at = self.shared.at(now);
        let in_service = |e: &Entry| e.ready_at(at) && !e.ejected.load(Ordering::Relaxed);
        let eligible = list.iter().filter(|e| in_service(e)).count();
        let panic =
            (eligible as u64) * 100 < u64::from(self.shared.panic_threshold) * list.len() as u64;
        let fresh = |e: &Entry| !avoid.contains(&e.id);
        let usable = |e: &Entry, avoiding: bool| {
            (if panic { e.ready_at(at) } else { in_service(e) }) && (!avoiding || fresh(e))
        };
        let avoiding = !avoid.is_empty() && list.iter().any(|e| usable(e, true));
        let view = View {
            list: &list,
            now,
            usable: |e: &Entry| usable(e, avoiding),
        };
        let Some(i) = self.shared.draw(|rng| power_of_two(&view, rng)) else {
            return Err(none_ready(&list, at));
        };
        if retry {
            self.shared.flight.start_retry(self.shared.retry_cap)?;
        } else {
            self.shared.flight.start();
        }
        let entry = Arc::clone(&list[i]);
        entry.in_flight.fetch_add(1, Ordering::Relaxed);
        // Below the retry bit, and never all ones with it ([`DONE`]).
        let started = nanos(now.saturating_duration_since(entry.origin)).min(RETRY - 2);
        Ok(Picked {
            entry,
            started: if retry { started | RETRY } else { started },
        })
    }

    /// The attempts in flight over the set now, the retries and copies
    /// among them, and the retries its cap turned away.
    #[must_use]
    pub fn flight(&self) -> InFlight {
        let (attempts, retries) = self.shared.flight.in_flight();
        InFlight {
            attempts,
            retries,
            overflows: self.shared.flight.overflows(),
        }
    }

    /// How many retries and copies the set's cap turned away, ever
    /// (Envoy's `upstream_rq_retry_overflow`).
    #[must_use]
    pub fn retry_overflows(&self) -> u64 {
        self.shared.flight.overflows()
    }

    /// The set's retry cap, if it has one.
    #[must_use]
    pub fn retry_cap(&self) -> Option<RetryCap> {
        self.shared.retry_cap
    }

    /// Whether an endpoint not in `avoid` is eligible at `now` (ready, not
    /// held, not ejected): where a retry could go instead of waiting for
    /// the hint of the endpoint that just answered. Reads only; runs no
    /// sweep.
    ///
    /// ```
    /// use std::time::Instant;
    /// use steadfast::endpoint::Endpoints;
    /// let set = Endpoints::builder().build()?;
    /// let now = Instant::now();
    /// let a = set.insert("a:1", now);
    /// let b = set.insert("b:1", now);
    /// assert!(set.has_eligible(now, &[a]));
    /// set.set_ready(b, false);
    /// assert!(!set.has_eligible(now, &[a]));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn has_eligible(&self, now: Instant, avoid: &[EndpointId]) -> bool {
        let at = self.shared.at(now);
        self.list()
            .iter()
            .any(|e| e.ready_at(at) && !e.ejected.load(Ordering::Relaxed) && !avoid.contains(&e.id))
    }

    /// Every endpoint's state at `now`, for a dashboard or a test (reads
    /// only; runs no sweep).
    #[must_use]
    pub fn snapshot(&self, now: Instant) -> Vec<EndpointState> {
        let multipliers: Vec<(EndpointId, u32)> =
            self.shared.sweeps.as_ref().map_or_else(Vec::new, |s| {
                let s = s.lock().unwrap_or_else(PoisonError::into_inner);
                s.ids
                    .iter()
                    .zip(&s.hosts)
                    .map(|(id, h)| (*id, h.multiplier()))
                    .collect()
            });
        let at = self.shared.at(now);
        self.list()
            .iter()
            .map(|e| EndpointState {
                id: e.id,
                label: Arc::clone(&e.label),
                ready: e.ready_at(at),
                ejected: e.ejected.load(Ordering::Relaxed),
                in_flight: e.in_flight.load(Ordering::Relaxed),
                rtt: e
                    .rtt
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .estimate(now),
                multiplier: multipliers
                    .iter()
                    .find(|(id, _)| *id == e.id)
                    .map_or(0, |m| m.1),
            })
            .collect()
    }

    fn list(&self) -> Arc<[Arc<Entry>]> {
        self.shared.list()
    }

    fn entry(&self, id: EndpointId) -> Option<Arc<Entry>> {
        self.list().iter().find(|e| e.id == id).cloned()
    }
}

/// The refusal of a pick that found no endpoint ready at `at`: with when
/// the first endpoint held on its connection backoff comes back, if one
/// is (one marked not ready comes back only when marked ready).
#[cold]
fn none_ready(list: &[Arc<Entry>], at: u64) -> Refused {
    let first_back = list
        .iter()
        .filter(|e| e.ready.load(Ordering::Relaxed))
        .map(|e| e.held_until.load(Ordering::Relaxed))
        .filter(|&until| until > at)
        .min();
    Refused::NoEndpoint {
        endpoints: u32::try_from(list.len()).unwrap_or(u32::MAX),
        retry_after: first_back.map(|until| Duration::from_nanos(until - at)),
    }
}

/// A duration in nanoseconds, saturated.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Shared {
    /// Runs `f` on the set's random source: a seeded set's own (under its
    /// lock), else this thread's.
    fn draw<R>(&self, f: impl FnOnce(&mut Rng) -> R) -> R {
        match &self.rng {
            Some(seeded) => f(&mut seeded.lock().unwrap_or_else(PoisonError::into_inner)),
            None => PICK_RNG.with(|rng| f(&mut rng.borrow_mut())),
        }
    }

    /// `now` in nanoseconds after the set's origin (0 before any endpoint
    /// came).
    fn at(&self, now: Instant) -> u64 {
        self.origin
            .get()
            .map_or(0, |origin| nanos(now.saturating_duration_since(*origin)))
    }

    /// The list now: a snapshot the caller keeps while the set changes.
    fn list(&self) -> Arc<[Arc<Entry>]> {
        Arc::clone(&self.list.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The list as the pick sees it.
struct View<'a, U> {
    list: &'a [Arc<Entry>],
    now: Instant,
    usable: U,
}

impl<U: Fn(&Entry) -> bool> Candidates for View<'_, U> {
    fn count(&self) -> usize {
        self.list.len()
    }
    fn eligible(&self, i: usize) -> bool {
        (self.usable)(&self.list[i])
    }
    fn load(&self, i: usize) -> f64 {
        self.list[i].load(self.now)
    }
}
