//! [`FleetRateLimit`]: quotas a [`QuotaBackend`] keeps for a whole fleet,
//! with what every remote check needs around it: a bound on the wait for
//! an answer, a cache of keys known to be over their quota, and a choice,
//! made when the limit is built, of what to do while the backend cannot
//! answer.

use std::fmt;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::{Either, select};

use super::backend::{BackendError, Decision, QuotaBackend, QuotaCheck};
use super::keyed::{DEFAULT_MAX_KEYS, KeyedRateLimit};
use super::limiter::DEFAULT_RATE_LIMIT_NAME;
use super::over_limit::{Known, OverLimit};
use super::quota::Quota;
use crate::call::RateRefused;
use crate::clock::{AsyncClock, Stopwatch};
use crate::config_error::ConfigError;
use crate::telemetry;

/// How long a limit waits for its backend's answer unless told otherwise.
pub const DEFAULT_BACKEND_TIMEOUT: Duration = Duration::from_millis(20);

/// What a limit does while its backend cannot answer.
enum WhenDown {
    /// Refuse every call.
    Closed,
    /// Admit under a local limit per key.
    Open(KeyedRateLimit<String>),
}

#[derive(Default)]
struct Counters {
    asked: AtomicU64,
    admitted: AtomicU64,
    refused: AtomicU64,
    cached_refusals: AtomicU64,
    backend_errors: AtomicU64,
    timeouts: AtomicU64,
    local_admitted: AtomicU64,
    local_refused: AtomicU64,
    closed_refusals: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

struct Fleet<B, C> {
    name: &'static str,
    quotas: Box<[Quota]>,
    /// The largest cost any call may have (the smallest burst).
    max_cost: u32,
    /// The longest wait a quota can ask (the largest window): a backend
    /// asking for more is not answering by the algorithm.
    max_wait: Duration,
    backend: B,
    clock: C,
    now: Stopwatch<C>,
    /// How far a reading of `now` may trail real time, in nanoseconds.
    lag: u64,
    timeout: Duration,
    when_down: WhenDown,
    over: OverLimit,
    /// Whether the last answer was an error (to log an outage once).
    down: AtomicBool,
    counters: Counters,
}

/// A rate limit whose quotas a [`QuotaBackend`] keeps for many processes
/// (a fleet of instances sharing a provider's quota, on Redis with the
/// `steadfast-redis` crate), by the same algorithm as [`RateLimit`](super::RateLimit).
///
/// Around every remote check:
/// - **a bound on the wait** for the backend's answer
///   ([`timeout`](FleetRateLimitBuilder::timeout), default
///   [`DEFAULT_BACKEND_TIMEOUT`], 20 ms), on the limit's clock;
/// - **a cache of keys over their quota**: a refusal says when the call
///   would be admitted, and until then a call of the same cost for that
///   key is refused here without asking (a hot key over its limit costs
///   the backend nothing), and so is a dearer one under a limit of one
///   quota, with its longer wait (its extra cost's share of the quota on
///   top); under several quotas a dearer call is asked (which quota binds
///   it is not known), and a cheaper one always is (it may fit); bounded
///   by [`max_keys`](FleetRateLimitBuilder::max_keys);
/// - **an explicit choice for an outage**, required by the builder:
///   [`fail_open`](FleetRateLimitBuilder::fail_open) admits under a local
///   quota per key while the backend cannot answer (unreachable, slower
///   than the bound, or answering garbage),
///   [`fail_closed`](FleetRateLimitBuilder::fail_closed) refuses. The
///   first error of an outage is logged (a `tracing` warning) and its end
///   too; every call after an error asks the backend again, so the limit is
///   back on it as soon as it answers.
/// - **counters** ([`stats`](Self::stats), and with the `metrics` feature
///   the counter `steadfast.rate.fleet` labelled by `limit` and `outcome`).
///
/// Clones share everything.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::VirtualClock;
/// use steadfast::rate::{BackendError, Decision, FleetRateLimit, FleetRefused, Quota, QuotaBackend, QuotaCheck};
///
/// /// A backend that is down.
/// struct Down;
/// impl QuotaBackend for Down {
///     async fn check(&self, _: QuotaCheck<'_>) -> Result<Decision, BackendError> {
///         Err(BackendError::new("connection refused"))
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let limit = FleetRateLimit::builder(Down)
///     .name("maps api")
///     .quota(Quota::per_second(100)?)
///     .fail_open(Quota::per_second(2)?) // each instance's share while Redis is away
///     .build_with_clock(VirtualClock::new())?;
/// assert!(limit.check("tenant-1").await.is_ok());
/// assert!(limit.check("tenant-1").await.is_ok());
/// let refused = limit.check("tenant-1").await.unwrap_err();
/// assert_eq!(refused.retry_after(), Some(Duration::from_millis(500)));
/// assert_eq!(limit.stats().backend_errors, 3);
/// assert_eq!(limit.stats().local_admitted, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct FleetRateLimit<B, C = crate::clock::DefaultClock> {
    shared: Arc<Fleet<B, C>>,
}

impl<B, C> Clone for FleetRateLimit<B, C> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<B: QuotaBackend> FleetRateLimit<B> {
    /// A limit on `backend` to configure: at least one quota, and either
    /// [`fail_open`](FleetRateLimitBuilder::fail_open) or
    /// [`fail_closed`](FleetRateLimitBuilder::fail_closed).
    pub fn builder(backend: B) -> FleetRateLimitBuilder<B> {
        FleetRateLimitBuilder {
            backend,
            name: DEFAULT_RATE_LIMIT_NAME,
            quotas: Vec::new(),
            timeout: DEFAULT_BACKEND_TIMEOUT,
            when_down: None,
            max_keys: DEFAULT_MAX_KEYS,
        }
    }
}

impl<B: QuotaBackend, C: AsyncClock> FleetRateLimit<B, C> {
    /// What the limit knows, without asking the backend, of when a call
    /// of cost `cost` for `key` would be admitted: the wait of a key its
    /// cache holds as over its quota (as [`check_n`](Self::check_n) would
    /// answer it, without the call), `Some(ZERO)` for a cost of 0, `None`
    /// when only the backend knows (a key not held; a cheaper call, which
    /// may fit; a dearer one under several quotas). Reads only.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::rate::{Decision, FleetRateLimit, Quota, QuotaBackend, QuotaCheck, BackendError};
    /// struct Full;
    /// impl QuotaBackend for Full {
    ///     async fn check(&self, _: QuotaCheck<'_>) -> Result<Decision, BackendError> {
    ///         Ok(Decision::Refuse { retry_after: Some(Duration::from_millis(300)) })
    ///     }
    /// }
    /// # futures::executor::block_on(async {
    /// let clock = steadfast::clock::VirtualClock::manual();
    /// let limit = FleetRateLimit::builder(Full)
    ///     .quota(Quota::per_second(5)?)
    ///     .fail_closed()
    ///     .build_with_clock(clock)?;
    /// assert_eq!(limit.known_wait("k", 1), None); // not asked yet
    /// assert!(limit.check("k").await.is_err());
    /// assert_eq!(limit.known_wait("k", 1), Some(Duration::from_millis(300)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    #[must_use]
    pub fn known_wait(&self, key: &str, cost: u32) -> Option<Duration> {
        let fleet = &*self.shared;
        if cost == 0 {
            return Some(Duration::ZERO);
        }
        let now = fleet.now.elapsed_nanos();
        match fleet.over.peek(key, cost, now.saturating_add(fleet.lag)) {
            Known::Over(wait) => Some(Duration::from_nanos(wait.saturating_add(2 * fleet.lag))),
            Known::Nothing | Known::CheaperMayFit => None,
        }
    }

    /// Admits a call of cost 1 for `key` (`""` for one quota shared by
    /// every caller), or refuses it.
    ///
    /// # Errors
    /// [`FleetRefused`]: over the quota (with the wait), or the backend
    /// could not answer and the limit fails closed.
    pub async fn check(&self, key: &str) -> Result<(), FleetRefused> {
        self.check_n(key, 1).await
    }

    /// Admits a call of cost `cost` for `key`, or refuses it. A cost of 0
    /// is admitted without asking; a cost above a quota's burst is refused
    /// without asking (it never fits).
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub async fn check_n(&self, key: &str, cost: u32) -> Result<(), FleetRefused> {
        let fleet = &*self.shared;
        if cost == 0 {
            return Ok(());
        }
        if cost > fleet.max_cost {
            return Err(FleetRefused::Quota(fleet.refused(None)));
        }
        let now = fleet.now.elapsed_nanos();
        // The entry's end and this reading each trail real time by up to
        // `lag`: one about to end is asked about, and the wait told is
        // padded by it.
        let known = fleet.over.lookup(key, cost, now.saturating_add(fleet.lag));
        if let Known::Over(wait) = known {
            let wait = wait.saturating_add(2 * fleet.lag);
            fleet.count(&fleet.counters.cached_refusals, "cached");
            return Err(FleetRefused::Quota(
                fleet.refused(Some(Duration::from_nanos(wait))),
            ));
        }
        bump(&fleet.counters.asked);
        match fleet.ask(key, cost).await {
            Ok(Decision::Admit) => {
                fleet.answered();
                if known == Known::CheaperMayFit {
                    fleet.over.forget(key);
                }
                fleet.count(&fleet.counters.admitted, "admitted");
                Ok(())
            }
            Ok(Decision::Refuse { retry_after }) => {
                fleet.answered();
                fleet.count(&fleet.counters.refused, "refused");
                if let Some(wait) = retry_after {
                    let wait_ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
                    // From the time read before asking: the entry ends no
                    // later than the backend's own wait.
                    fleet
                        .over
                        .remember(key, cost, now.saturating_add(wait_ns), now);
                }
                Err(FleetRefused::Quota(fleet.refused(retry_after)))
            }
            Err(error) => self.down(key, cost, error),
        }
    }

    /// The backend could not answer: fail as the limit was built to.
    fn down(&self, key: &str, cost: u32, error: BackendError) -> Result<(), FleetRefused> {
        let fleet = &*self.shared;
        if error.is_timeout() {
            fleet.count(&fleet.counters.timeouts, "timeout");
        }
        fleet.count(&fleet.counters.backend_errors, "backend_error");
        let open = matches!(fleet.when_down, WhenDown::Open(_));
        if !fleet.down.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                limit = fleet.name,
                %error,
                "rate limit's quota backend cannot answer: {}",
                if open { "admitting under the local limit (fails open)" } else { "refusing every call (fails closed)" }
            );
        }
        match &fleet.when_down {
            WhenDown::Closed => {
                fleet.count(&fleet.counters.closed_refusals, "closed");
                Err(FleetRefused::Unavailable {
                    by: fleet.name,
                    error,
                })
            }
            WhenDown::Open(local) => match local.check_n(key, cost) {
                Ok(()) => {
                    fleet.count(&fleet.counters.local_admitted, "local_admitted");
                    Ok(())
                }
                Err(refused) => {
                    fleet.count(&fleet.counters.local_refused, "local_refused");
                    Err(FleetRefused::Quota(refused))
                }
            },
        }
    }
}

impl<B, C> FleetRateLimit<B, C> {
    /// The limit's name, as refusals carry it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.shared.name
    }

    /// The quotas the backend keeps, in the order they were given.
    pub fn quotas(&self) -> impl Iterator<Item = Quota> + '_ {
        self.shared.quotas.iter().copied()
    }

    /// The backend.
    #[must_use]
    pub fn backend(&self) -> &B {
        &self.shared.backend
    }

    /// What the limit has done so far.
    #[must_use]
    pub fn stats(&self) -> FleetStats {
        let c = &self.shared.counters;
        let read = |a: &AtomicU64| a.load(Ordering::Relaxed);
        FleetStats {
            asked: read(&c.asked),
            admitted: read(&c.admitted),
            refused: read(&c.refused),
            cached_refusals: read(&c.cached_refusals),
            backend_errors: read(&c.backend_errors),
            timeouts: read(&c.timeouts),
            local_admitted: read(&c.local_admitted),
            local_refused: read(&c.local_refused),
            closed_refusals: read(&c.closed_refusals),
            cached_keys: self.shared.over.len() as u64,
        }
    }
}

impl<B: QuotaBackend, C: AsyncClock> Fleet<B, C> {
    /// The backend's answer within the timeout.
    async fn ask(&self, key: &str, cost: u32) -> Result<Decision, BackendError> {
        if !self.clock.can_sleep() {
            return Err(BackendError::new(
                "no timer here to bound the wait for an answer (outside the clock's runtime?)",
            ));
        }
        let remote = pin!(self.backend.check(QuotaCheck {
            limit: self.name,
            key,
            quotas: &self.quotas,
            cost,
        }));
        let timer = pin!(self.clock.sleep(self.timeout));
        match select(remote, timer).await {
            Either::Left((
                Ok(Decision::Refuse {
                    retry_after: Some(wait),
                }),
                _,
            )) if wait > self.max_wait => Err(BackendError::new(format!(
                "answered a wait of {wait:?}, longer than any of the limit's quotas can ask ({:?})",
                self.max_wait
            ))),
            Either::Left((answer, _)) => answer,
            Either::Right(((), _)) => Err(BackendError::timed_out(self.timeout)),
        }
    }
}

impl<B, C> Fleet<B, C> {
    fn refused(&self, retry_after: Option<Duration>) -> RateRefused {
        RateRefused {
            by: self.name,
            retry_after,
        }
    }

    fn count(&self, counter: &AtomicU64, outcome: &'static str) {
        bump(counter);
        telemetry::fleet_check(self.name, outcome);
    }

    /// The backend answered: the end of an outage, if there was one.
    fn answered(&self) {
        if self.down.load(Ordering::Relaxed) && self.down.swap(false, Ordering::Relaxed) {
            tracing::info!(
                limit = self.name,
                "rate limit's quota backend answers again"
            );
        }
    }
}

impl<B, C> fmt::Debug for FleetRateLimit<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetRateLimit")
            .field("name", &self.shared.name)
            .field("quotas", &self.shared.quotas)
            .field("timeout", &self.shared.timeout)
            .field(
                "fails",
                &match self.shared.when_down {
                    WhenDown::Closed => "closed",
                    WhenDown::Open(_) => "open",
                },
            )
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// A call a [`FleetRateLimit`] did not admit.
#[derive(Debug)]
#[non_exhaustive]
pub enum FleetRefused {
    /// Over a quota: by the backend's answer, from the cache of keys over
    /// their quota, or by the local limit while the backend is away.
    Quota(RateRefused),
    /// The backend could not answer and the limit fails closed.
    Unavailable {
        /// The limit's name.
        by: &'static str,
        /// Why the backend did not answer.
        error: BackendError,
    },
}

impl FleetRefused {
    /// The time until the call would be admitted, when it is known (never
    /// for a call refused because the backend could not answer).
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Quota(refused) => refused.retry_after,
            Self::Unavailable { .. } => None,
        }
    }

    /// The limit's name.
    #[must_use]
    pub fn by(&self) -> &'static str {
        match self {
            Self::Quota(refused) => refused.by,
            Self::Unavailable { by, .. } => by,
        }
    }
}

impl fmt::Display for FleetRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Quota(refused) => refused.fmt(f),
            Self::Unavailable { by, error } => write!(
                f,
                "rate limit {by}: refused because its backend cannot answer and it fails closed ({error})"
            ),
        }
    }
}

impl std::error::Error for FleetRefused {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Quota(refused) => Some(refused),
            Self::Unavailable { error, .. } => Some(error),
        }
    }
}

/// What a [`FleetRateLimit`] has done since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetStats {
    /// Checks sent to the backend.
    pub asked: u64,
    /// Calls the backend admitted.
    pub admitted: u64,
    /// Calls the backend refused.
    pub refused: u64,
    /// Calls refused from the cache of keys over their quota, without asking.
    pub cached_refusals: u64,
    /// Checks the backend could not answer (timeouts included).
    pub backend_errors: u64,
    /// Of those, checks it did not answer in time.
    pub timeouts: u64,
    /// Calls admitted by the local limit while the backend could not answer.
    pub local_admitted: u64,
    /// Calls refused by the local limit while the backend could not answer.
    pub local_refused: u64,
    /// Calls refused because the backend could not answer (fails closed).
    pub closed_refusals: u64,
    /// Keys in the over-quota cache now.
    pub cached_keys: u64,
}

/// The configuration of a [`FleetRateLimit`].
pub struct FleetRateLimitBuilder<B> {
    backend: B,
    name: &'static str,
    quotas: Vec<Quota>,
    timeout: Duration,
    when_down: Option<Result<Vec<Quota>, ()>>,
    max_keys: usize,
}

impl<B> fmt::Debug for FleetRateLimitBuilder<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetRateLimitBuilder")
            .field("name", &self.name)
            .field("quotas", &self.quotas)
            .field("timeout", &self.timeout)
            .field("max_keys", &self.max_keys)
            .finish_non_exhaustive()
    }
}

impl<B: QuotaBackend> FleetRateLimitBuilder<B> {
    /// The name refusals carry (default [`DEFAULT_RATE_LIMIT_NAME`]); a
    /// backend may keep limits' keys apart by it.
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// A quota the backend keeps for the whole fleet; with several, a call
    /// must fit every one.
    pub fn quota(mut self, quota: Quota) -> Self {
        self.quotas.push(quota);
        self
    }

    /// The longest wait for the backend's answer (default 20 ms): past it
    /// the check counts as a backend error.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// While the backend cannot answer, admit calls under `local`, a quota
    /// per key in this process alone (give it this instance's share of the
    /// fleet's quota: the fleet's count over the instances). Call again to
    /// combine several local quotas.
    pub fn fail_open(mut self, local: Quota) -> Self {
        match &mut self.when_down {
            Some(Ok(quotas)) => quotas.push(local),
            _ => self.when_down = Some(Ok(vec![local])),
        }
        self
    }

    /// While the backend cannot answer, refuse every call
    /// ([`FleetRefused::Unavailable`]).
    pub fn fail_closed(mut self) -> Self {
        self.when_down = Some(Err(()));
        self
    }

    /// The most keys the over-quota cache, and the local limit of
    /// [`fail_open`](Self::fail_open), hold (default [`DEFAULT_MAX_KEYS`]).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The limit, on the default async clock.
    ///
    /// # Errors
    /// As [`build_with_clock`](Self::build_with_clock).
    #[cfg(any(feature = "tokio", feature = "futures-timer", feature = "async-io"))]
    pub fn build(self) -> Result<FleetRateLimit<B>, ConfigError> {
        self.build_with_clock(crate::clock::DefaultClock::default())
    }

    /// The limit, on `clock` (its timer bounds the wait for an answer).
    ///
    /// # Errors
    /// A [`ConfigError`] if no quota was given or more than 8, neither
    /// `fail_open` nor `fail_closed` was chosen, the timeout is zero,
    /// `max_keys` is zero, or the backend cannot keep a quota.
    pub fn build_with_clock<C: AsyncClock>(
        self,
        clock: C,
    ) -> Result<FleetRateLimit<B, C>, ConfigError> {
        const NAME: &str = "fleet rate limit";
        super::quota::check_count(NAME, &self.quotas)?;
        if self.timeout.is_zero() {
            return Err(ConfigError::new(
                NAME,
                "timeout",
                "must be more than zero",
                self.timeout,
            ));
        }
        if self.max_keys == 0 {
            return Err(ConfigError::new(NAME, "max_keys", "must be at least 1", 0));
        }
        for quota in &self.quotas {
            self.backend.supports(quota)?;
        }
        let when_down = match self.when_down {
            None => {
                return Err(ConfigError::new(
                    NAME,
                    "fail_open / fail_closed",
                    "must be chosen: what the limit does while its backend cannot answer",
                    "neither",
                ));
            }
            Some(Err(())) => WhenDown::Closed,
            Some(Ok(local)) => {
                let local = local
                    .into_iter()
                    .fold(
                        KeyedRateLimit::builder().name(self.name),
                        super::keyed::KeyedRateLimitBuilder::quota,
                    )
                    .max_keys(self.max_keys)
                    .build_with_clock(clock.clone())?;
                WhenDown::Open(local)
            }
        };
        let max_cost = self.quotas.iter().map(Quota::burst).min().unwrap_or(1);
        let max_wait = self
            .quotas
            .iter()
            .map(|q| q.interval().saturating_mul(q.burst()))
            .max()
            .unwrap_or(Duration::ZERO);
        let now = Stopwatch::new(clock.clone());
        // Under one quota a dearer call's wait is known from a cheaper one's.
        let per_unit = match &self.quotas[..] {
            [one] => Some(one.cell().interval),
            _ => None,
        };
        Ok(FleetRateLimit {
            shared: Arc::new(Fleet {
                lag: now.lag_nanos(),
                name: self.name,
                quotas: self.quotas.into(),
                max_cost,
                max_wait,
                backend: self.backend,
                now,
                clock,
                timeout: self.timeout,
                when_down,
                over: OverLimit::new(self.max_keys, per_unit),
                down: AtomicBool::new(false),
                counters: Counters::default(),
            }),
        })
    }
}
