//! `quota`: many clients sharing one provider's quota, with and without a
//! limit of their own, with retries.
//!
//! The model, on virtual time:
//! - **the provider** (an API) admits `quota` requests per second with a
//!   burst of `burst` (by default the quota: 100 at once, then one per
//!   10 ms). Its quota is a real [`RateLimit`] on the simulation's clock:
//!   every request that reaches it is [`check`](RateLimit::check)ed; one
//!   admitted is served after a service time drawn from `latency`, one
//!   refused is answered at once with a **429** whose `Retry-After` is the
//!   limit's own wait ([`RateRefused::retry_after`](steadfast::rate::RateRefused::retry_after)),
//!   written as [`RetryAfter`] says: in whole seconds rounded up by default,
//!   as HTTP's delta-seconds are (and as `steadfast_http::server::RateLimitLayer`
//!   writes them), or in milliseconds. The provider has no other limit: the
//!   quota is all that refuses.
//! - **the clients**: calls arrive open-loop, as a Poisson process at
//!   `call_rate` (by default 160 calls/s, above the quota), each from one of
//!   `clients` clients, picked with a weight of `1 / rank^skew`: unevenly
//!   by default (skew 1: the busiest of 20 clients makes 28 % of the calls,
//!   44 calls/s, the quietest 1.4 %, 2.2 calls/s), as the users of one API
//!   key seldom call alike; skew 0 makes them all alike (8 calls/s each).
//!   Every client has its own
//!   [`RetryPolicy`] ([`max_attempts`](QuotaConfig::max_attempts) attempts, the
//!   shared backoff schedule, an overall deadline of
//!   [`deadline`](QuotaConfig::deadline) from the call's start set as the
//!   policy's `max_elapsed`) and, per strategy, a rate limit set on that
//!   policy ([`RetryPolicyBuilder::rate_limit`](steadfast::policy::RetryPolicyBuilder::rate_limit)
//!   or [`rate_limit_waiting`](steadfast::policy::RetryPolicyBuilder::rate_limit_waiting)).
//!   A request takes half the `network_rtt` to reach the provider and half
//!   to come back.
//!
//! The strategies ([`QuotaStrategy::standard`]):
//! - **no limit, ignoring `Retry-After`**: a 429 is [`Verdict::Retry`]: the
//!   next delay is the backoff schedule's;
//! - **no limit, honouring `Retry-After`**: a 429 is
//!   [`Verdict::RetryAfter`] with the hint: the policy waits what the
//!   provider said (capped, and never past the deadline: a wait that would
//!   end past it stops the call at once);
//! - **per-client limits**: each client a [`RateLimit`] of its share of the
//!   quota (`quota / clients` per second, a burst of `burst / clients`, at
//!   least 1), refusing at once, and the same **waiting** up to a bound;
//! - **a shared limit**: one [`RateLimit`] of the provider's own quota for
//!   every client (as a fleet sharing a quota on Redis would), refusing at
//!   once, and the same waiting up to a bound.
//!
//! The limited strategies honour `Retry-After` too. The simulator drives
//! the policy as the blocking executor does: before every attempt (first or
//! retry) it books a turn of the policy's rate limit with
//! [`RateLimit::reserve`], bounded by the policy's wait and the time left
//! before the deadline; a turn that would come later ends the call at once
//! as [`StopReason::Throttled`] (refused locally; the policy gets back what
//! it granted, [`RetryPolicy::abandon`]), one that comes later than now is
//! waited for, then [`admit`](steadfast::rate::Reservation::admit)ted. Every
//! admission, refusal, delay and stop is the core's.
//!
//! The numbers, per strategy: the requests the provider **received** per
//! second and the **429s** it answered, against its quota; its largest
//! **burst above the rate** ([`BurstPeak`]: the most requests in any
//! stretch of time beyond what the quota's rate earns in it, which a limit
//! that keeps the quota holds at the burst); **goodput** (calls that
//! succeeded per second); calls that **gave up** (attempts spent, or the
//! next wait past the deadline) and calls **refused locally**;
//! **attempts per call** (sent to the provider); and the **latency** (p50,
//! p99) of the calls that succeeded, from the call's start to its success,
//! backoff and limiter waits included, and of the calls that failed.
//!
//! ```
//! use std::time::Duration;
//! use steadfast_sim::quota::{self, QuotaConfig};
//!
//! let config = QuotaConfig { duration: Duration::from_secs(10), ..QuotaConfig::default() };
//! let result = quota::run(&config)?;
//! let storm = result.strategy(quota::IGNORING).unwrap();
//! let shared = result.strategy(quota::SHARED).unwrap();
//! // Retries that ignore Retry-After hammer the provider; a shared limit of
//! // its quota sends it nothing it refuses.
//! assert!(storm.rejected > 1_000);
//! assert_eq!(shared.rejected, 0);
//! assert!(shared.peak_burst <= 100.0);
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::time::Duration;

use serde::Serialize;
use steadfast::backoff::Backoff;
use steadfast::clock::Clock;
use steadfast::policy::gate::{Admission, Turn};
use steadfast::policy::{CallState, Decision, RetryPolicyBuilder};
use steadfast::rate::{Quota, RateLimit};
use steadfast::{RetryPolicy, StopReason, Verdict};

use super::{ScenarioResult, SeededCalls, StrategyResult, mix, run_strategies};
use crate::engine::{Engine, Nanos, SimClock, nanos, secs};
use crate::error::check;
use crate::metrics::{BucketQuantiles, BurstPeak, LatencyHistogram, Series};
use crate::{Latency, SimError};

const SCOPE: &str = "quota config";

/// How the provider writes its wait into a 429's `Retry-After`.
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::quota::RetryAfter;
/// let wait = Duration::from_micros(3_200);
/// assert_eq!(RetryAfter::Seconds.hint(wait), Duration::from_secs(1));
/// assert_eq!(RetryAfter::Millis.hint(wait), Duration::from_millis(4));
/// assert_eq!(RetryAfter::Millis.hint(Duration::from_millis(7)), Duration::from_millis(7));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryAfter {
    /// Whole seconds, rounded up: HTTP's delta-seconds (RFC 9110), as
    /// `steadfast_http::server::RateLimitLayer` writes them. A wait of a
    /// few milliseconds is said as 1 s.
    Seconds,
    /// Milliseconds, rounded up: as gRPC's `grpc-retry-pushback-ms`
    /// (`steadfast_grpc::server::RateLimitLayer`), or an HTTP API that
    /// sends a finer header of its own.
    Millis,
}

impl RetryAfter {
    /// The hint a client reads for the provider's exact `wait`.
    #[must_use]
    pub fn hint(self, wait: Duration) -> Duration {
        let unit = match self {
            Self::Seconds => 1_000_000_000,
            Self::Millis => 1_000_000,
        };
        Duration::from_nanos(nanos(wait).div_ceil(unit).saturating_mul(unit))
    }

    /// The unit, as the report says it.
    #[must_use]
    pub fn unit(self) -> &'static str {
        match self {
            Self::Seconds => "whole seconds",
            Self::Millis => "milliseconds",
        }
    }
}

/// The rate limit the clients of a strategy keep to, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QuotaLimit {
    /// No limit: every attempt goes to the provider.
    None,
    /// Each client its own [`RateLimit`] of its share of the quota
    /// ([`QuotaConfig::client_quota`]).
    PerClient {
        /// How long an attempt may wait for its turn (zero: refused at
        /// once when the limit has no room now).
        #[serde(serialize_with = "crate::serde_util::secs")]
        max_wait: Duration,
    },
    /// One [`RateLimit`] of the provider's quota, shared by every client.
    Shared {
        /// How long an attempt may wait for its turn (zero: refused at
        /// once).
        #[serde(serialize_with = "crate::serde_util::secs")]
        max_wait: Duration,
    },
}

impl QuotaLimit {
    /// How long an attempt may wait for its turn (zero without a limit).
    #[must_use]
    pub fn max_wait(&self) -> Duration {
        match self {
            Self::None => Duration::ZERO,
            Self::PerClient { max_wait } | Self::Shared { max_wait } => *max_wait,
        }
    }
}

/// One strategy: the limit the clients keep to, and whether a 429's
/// `Retry-After` is the delay before the retry.
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::quota::QuotaStrategy;
/// let names: Vec<String> = QuotaStrategy::standard(Duration::from_secs(1))
///     .into_iter().map(|s| s.name).collect();
/// assert_eq!(names, [
///     "no limit, ignoring Retry-After",
///     "no limit, honouring Retry-After",
///     "per-client limits",
///     "per-client limits, waiting",
///     "shared limit",
///     "shared limit, waiting",
/// ]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuotaStrategy {
    /// The name shown in reports.
    pub name: String,
    /// The limit the clients keep to.
    pub limit: QuotaLimit,
    /// Whether a 429 is retried after its `Retry-After` (else after the
    /// backoff schedule's delay).
    pub honours_retry_after: bool,
}

/// The strategy without a limit whose retries ignore `Retry-After`.
pub const IGNORING: &str = "no limit, ignoring Retry-After";
/// The strategy without a limit whose retries honour `Retry-After`.
pub const HONOURING: &str = "no limit, honouring Retry-After";
/// Per-client limits, refusing at once.
pub const PER_CLIENT: &str = "per-client limits";
/// Per-client limits, waiting for a turn.
pub const PER_CLIENT_WAITING: &str = "per-client limits, waiting";
/// One shared limit, refusing at once.
pub const SHARED: &str = "shared limit";
/// One shared limit, waiting for a turn.
pub const SHARED_WAITING: &str = "shared limit, waiting";

impl QuotaStrategy {
    /// The six strategies compared by default (see the [module docs](self)):
    /// no limit, ignoring and honouring `Retry-After`; per-client limits and
    /// a shared limit, each refusing at once and waiting up to `max_wait`
    /// (both honouring `Retry-After`).
    #[must_use]
    pub fn standard(max_wait: Duration) -> Vec<Self> {
        let s = |name: &str, limit, honours_retry_after| Self {
            name: name.to_owned(),
            limit,
            honours_retry_after,
        };
        let zero = Duration::ZERO;
        vec![
            s(IGNORING, QuotaLimit::None, false),
            s(HONOURING, QuotaLimit::None, true),
            s(PER_CLIENT, QuotaLimit::PerClient { max_wait: zero }, true),
            s(PER_CLIENT_WAITING, QuotaLimit::PerClient { max_wait }, true),
            s(SHARED, QuotaLimit::Shared { max_wait: zero }, true),
            s(SHARED_WAITING, QuotaLimit::Shared { max_wait }, true),
        ]
    }
}

/// The `quota` scenario's settings; every field is public, so a caller (the
/// CLI) sets the ones it was given over [`Default`].
///
/// ```
/// use steadfast_sim::quota::QuotaConfig;
/// let config = QuotaConfig::default();
/// assert!(config.validate().is_ok());
/// // 160 calls/s against 100/s: 1.6 times the quota.
/// assert!((config.load() - 1.6).abs() < 1e-9);
/// assert_eq!(config.burst(), 100);
/// // Each client's share: 5 per second, a burst of 5.
/// let share = config.client_quota()?;
/// assert_eq!((share.interval(), share.burst()), (std::time::Duration::from_millis(200), 5));
/// # Ok::<(), steadfast_sim::SimError>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct QuotaConfig {
    /// Requests per second the provider admits (default 100).
    pub quota: u32,
    /// Requests it admits at once; `None` (the default): the quota, as
    /// [`Quota`] has it.
    pub burst: Option<u32>,
    /// How the provider writes its wait into `Retry-After` (default whole
    /// seconds, rounded up).
    pub retry_after: RetryAfter,
    /// Clients sharing the quota, each with its own policy (default 20).
    pub clients: u32,
    /// Calls per second, all clients together (default 160: 1.6 times the
    /// quota, 8 per client on average).
    pub call_rate: f64,
    /// How unevenly the calls are spread over the clients: client `i`
    /// (from 1) makes a share proportional to `1 / i^skew` (default 1: the
    /// busiest of 20 clients makes 28 % of the calls, the quietest 1.4 %;
    /// 0: all alike).
    pub skew: f64,
    /// Calls start during this time (default 60 s); the run then lets them
    /// finish.
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub duration: Duration,
    /// The provider's service time of a request it admits (default
    /// exponential with mean 20 ms); a 429 takes none.
    pub latency: Latency,
    /// The round trip added to every response (default 10 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub network_rtt: Duration,
    /// Attempts per call, counting the first (default 4).
    pub max_attempts: u32,
    /// Each call's overall deadline from its start (default 2 s): the
    /// policy's `max_elapsed`, which bounds every wait, a `Retry-After` and
    /// a limiter's turn included.
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub deadline: Duration,
    /// The schedule of the retries that ignore `Retry-After`, and of every
    /// retry that has no hint (default [`Backoff::default`]: 100 ms
    /// doubling, full jitter).
    #[serde(skip)]
    pub backoff: Backoff,
    /// The strategies (default [`QuotaStrategy::standard`], waiting up to
    /// 1 s).
    pub strategies: Vec<QuotaStrategy>,
    /// The width of a bucket of the time series (default 1 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub bucket: Duration,
    /// The seed (default 1).
    pub seed: u64,
}

impl Default for QuotaConfig {
    fn default() -> Self {
        Self {
            quota: 100,
            burst: None,
            retry_after: RetryAfter::Seconds,
            clients: 20,
            call_rate: 160.0,
            skew: 1.0,
            duration: Duration::from_secs(60),
            latency: Latency::Exponential {
                mean: Duration::from_millis(20),
            },
            network_rtt: Duration::from_millis(10),
            max_attempts: 4,
            deadline: Duration::from_secs(2),
            backoff: Backoff::default(),
            strategies: QuotaStrategy::standard(Duration::from_secs(1)),
            bucket: Duration::from_secs(1),
            seed: 1,
        }
    }
}

/// The most requests per second a quota may have: one per nanosecond.
const MAX_QUOTA: u64 = 1_000_000_000;

impl QuotaConfig {
    /// The provider's burst: [`burst`](Self::burst) or the quota.
    #[must_use]
    pub fn burst(&self) -> u32 {
        self.burst.unwrap_or(self.quota)
    }

    /// The demand over the quota.
    #[must_use]
    pub fn load(&self) -> f64 {
        self.call_rate / f64::from(self.quota.max(1))
    }

    /// The provider's quota: `quota` per second, a burst of
    /// [`burst`](Self::burst).
    ///
    /// # Errors
    /// [`SimError::Core`] when the core refuses it (a configuration that
    /// [`validate`](Self::validate)s never is).
    pub fn provider_quota(&self) -> Result<Quota, SimError> {
        Ok(Quota::per_second(self.quota)?.with_burst(self.burst())?)
    }

    /// A client's share of the quota, for the per-client limits: `quota`
    /// per `clients` seconds (so `quota / clients` per second, exactly), a
    /// burst of `burst / clients` (rounded down, at least 1: the shares'
    /// bursts add up to at most the provider's when there are no more
    /// clients than its burst).
    ///
    /// # Errors
    /// As [`provider_quota`](Self::provider_quota).
    pub fn client_quota(&self) -> Result<Quota, SimError> {
        let period = Duration::from_secs(u64::from(self.clients.max(1)));
        let burst = (self.burst() / self.clients.max(1)).max(1);
        Ok(Quota::per(period, self.quota)?.with_burst(burst)?)
    }

    /// Each client's calls per second, busiest first (see
    /// [`skew`](Self::skew)).
    ///
    /// ```
    /// use steadfast_sim::quota::QuotaConfig;
    /// let skewed = QuotaConfig::default().client_rates();
    /// assert_eq!(skewed.len(), 20);
    /// assert!((skewed[0] / skewed[1] - 2.0).abs() < 1e-9);
    /// assert!((skewed.iter().sum::<f64>() - 160.0).abs() < 1e-9);
    /// let even = QuotaConfig { skew: 0.0, ..QuotaConfig::default() }.client_rates();
    /// assert!(even.iter().all(|r| (r - 8.0).abs() < 1e-9));
    /// ```
    #[must_use]
    pub fn client_rates(&self) -> Vec<f64> {
        let weights = self.weights();
        let total: f64 = weights.iter().sum();
        weights.iter().map(|w| self.call_rate * w / total).collect()
    }

    fn weights(&self) -> Vec<f64> {
        (1..=self.clients)
            .map(|i| f64::from(i).powf(-self.skew))
            .collect()
    }

    /// The share of the quota the per-client limits cannot use, in requests
    /// per second: what the clients that call less than their share leave
    /// of it (0 with even demand above the quota).
    ///
    /// ```
    /// use steadfast_sim::quota::QuotaConfig;
    /// // The 12 quietest of 20 clients call less than their 5/s.
    /// assert!((QuotaConfig::default().unused_shares() - 20.9).abs() < 0.1);
    /// assert_eq!(QuotaConfig { skew: 0.0, ..QuotaConfig::default() }.unused_shares(), 0.0);
    /// ```
    #[must_use]
    pub fn unused_shares(&self) -> f64 {
        let share = f64::from(self.quota) / f64::from(self.clients.max(1));
        self.client_rates()
            .iter()
            .map(|r| (share - r).max(0.0))
            .sum()
    }

    /// Checks every setting; the first broken rule is the error.
    ///
    /// ```
    /// use steadfast_sim::quota::QuotaConfig;
    /// let config = QuotaConfig { quota: 0, ..QuotaConfig::default() };
    /// assert_eq!(
    ///     config.validate().unwrap_err().to_string(),
    ///     "invalid quota config: `quota` must be at least 1 request per second (got 0)"
    /// );
    /// ```
    ///
    /// # Errors
    /// [`SimError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), SimError> {
        check::at_least(
            SCOPE,
            "quota",
            self.quota.into(),
            1,
            "must be at least 1 request per second",
        )?;
        check::at_most(
            SCOPE,
            "quota",
            self.quota.into(),
            MAX_QUOTA,
            "must be at most 1,000,000,000 requests per second",
        )?;
        if let Some(burst) = self.burst {
            check::at_least(SCOPE, "burst", burst.into(), 1, "must be at least 1")?;
            check::at_most(
                SCOPE,
                "burst",
                burst.into(),
                MAX_QUOTA,
                "must be at most 1,000,000,000",
            )?;
        }
        check::clients(SCOPE, self.clients)?;
        check::finite_positive(SCOPE, "call_rate", self.call_rate)?;
        if !(self.skew.is_finite() && self.skew >= 0.0) {
            return Err(SimError::config(
                SCOPE,
                "skew",
                "must be a finite number >= 0",
                self.skew,
            ));
        }
        check::positive_duration(SCOPE, "duration", self.duration)?;
        check::positive_duration(SCOPE, "deadline", self.deadline)?;
        check::positive_duration(SCOPE, "bucket", self.bucket)?;
        check::at_least(
            SCOPE,
            "max_attempts",
            self.max_attempts.into(),
            1,
            "must be at least 1",
        )?;
        check::at_most(
            SCOPE,
            "max_attempts",
            self.max_attempts.into(),
            100,
            "must be at most 100",
        )?;
        self.latency.validate()?;
        check::calls(SCOPE, "call_rate", self.call_rate, self.duration)?;
        check::buckets(SCOPE, "duration", self.duration, self.bucket)?;
        // The series run on until the last call's deadline (an attempt is
        // never sent past it) and the round trip of its last attempt.
        check::buckets(
            SCOPE,
            "deadline",
            self.duration
                .saturating_add(self.deadline)
                .saturating_add(self.network_rtt),
            self.bucket,
        )?;
        if self.strategies.is_empty() {
            return Err(SimError::config(
                SCOPE,
                "strategies",
                "must name at least one",
                0,
            ));
        }
        // Within the bounds above, the core builds both quotas; a check here
        // keeps that promise honest.
        self.provider_quota()?;
        self.client_quota()?;
        Ok(())
    }
}

/// One strategy's numbers (example in the [module docs](self)). Rates are
/// per second over the run's `duration`, counting what happened in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuotaStrategyResult {
    /// The strategy's name.
    pub name: String,
    /// The limit its clients kept to.
    pub limit: QuotaLimit,
    /// Whether its retries honoured `Retry-After`.
    pub honours_retry_after: bool,
    /// Calls started.
    pub calls: u64,
    /// Calls that succeeded.
    pub succeeded: u64,
    /// Calls that spent their attempts on 429s.
    pub exhausted: u64,
    /// Calls that stopped at their deadline: the next wait (a
    /// `Retry-After`, a backoff delay) would have ended past it, or the
    /// attempt in flight was still unanswered at it.
    pub past_deadline: u64,
    /// Of those, calls whose last attempt was still in flight at the
    /// deadline (cut off there, as an executor does).
    pub cut_at_deadline: u64,
    /// Calls whose limit refused an attempt (no room now, or no turn
    /// within the bound): [`StopReason::Throttled`], failed at once.
    pub refused_locally: u64,
    /// Of those, calls refused for a retry (after a 429).
    pub refused_retries: u64,
    /// Attempts that waited for their turn of the limit.
    pub waited_for_turn: u64,
    /// Attempts sent to the provider.
    pub attempts: u64,
    /// Requests the provider admitted.
    pub admitted: u64,
    /// Requests it refused with a 429.
    pub rejected: u64,
    /// Requests the provider received per second.
    pub received_per_s: f64,
    /// Requests it admitted per second.
    pub admitted_per_s: f64,
    /// 429s it answered per second.
    pub rejected_per_s: f64,
    /// Calls that succeeded per second (by the time they did).
    pub goodput_per_s: f64,
    /// The provider's largest burst above its quota's rate, in requests
    /// ([`BurstPeak`] over every request it received): at most the burst
    /// when the clients keep to the quota.
    pub peak_burst: f64,
    /// Median latency of the calls that succeeded, ms (from the call's
    /// start, every wait included; `None`: none did).
    pub p50_ms: Option<f64>,
    /// Their 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Median time from a call's start to its failure, ms (`None`: none
    /// failed).
    pub failed_p50_ms: Option<f64>,
    /// Its 99th percentile, ms.
    pub failed_p99_ms: Option<f64>,
    /// Requests the provider received, per bucket.
    pub received_per_bucket: Series,
    /// 429s it answered, per bucket.
    pub rejected_per_bucket: Series,
    /// Calls that succeeded, per bucket of the time they did.
    pub successes_per_bucket: Series,
    /// The 99th percentile latency of the calls that succeeded in each
    /// bucket, ms.
    pub p99_per_bucket_ms: Vec<Option<f64>>,
}

impl QuotaStrategyResult {
    /// Attempts sent to the provider per call started (a call refused
    /// locally before its first attempt sent none).
    #[must_use]
    pub fn attempts_per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.attempts as f64 / self.calls as f64
        }
    }

    /// Calls that gave up after 429s (attempts spent, or past the deadline).
    #[must_use]
    pub fn gave_up(&self) -> u64 {
        self.exhausted + self.past_deadline
    }

    /// Calls that failed, however.
    #[must_use]
    pub fn failed(&self) -> u64 {
        self.gave_up() + self.refused_locally
    }
}

impl StrategyResult for QuotaStrategyResult {
    fn name(&self) -> &str {
        &self.name
    }
}

/// The `quota` scenario's result (see [`run`]): its settings and one
/// [`QuotaStrategyResult`] per strategy. It has no published result to be
/// held against (`agreement` is `None`); the report's notes say what the
/// numbers show.
pub type QuotaResult = ScenarioResult<QuotaConfig, QuotaStrategyResult>;

/// Runs every configured strategy on the same seed: the same calls, from the
/// same clients, at the same times, and the same sequence of service times
/// for the requests the provider admits (example in the [module docs](self)).
///
/// # Errors
/// [`SimError::Config`] for a bad setting, [`SimError::Core`] when a
/// policy's builder refuses its settings, [`SimError::TooMuchWork`] past
/// the simulator's bound on attempts.
pub fn run(config: &QuotaConfig) -> Result<QuotaResult, SimError> {
    config.validate()?;
    run_strategies(config, &config.strategies, |s| run_one(config, s), |_| None)
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    /// The next call of the demand.
    Arrival,
    /// A call's next attempt goes (after a backoff, a hint, or its turn).
    Send(u32),
    /// An attempt reaches the provider.
    Arrive(u32),
    /// The provider's answer reaches the caller.
    Response { call: u32, answer: Answer },
}

/// What the provider answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Served,
    /// A 429, with its `Retry-After` (always there: a request of cost 1
    /// fits every burst, so the limit always says when).
    TooMany(Option<Duration>),
}

struct Call {
    client: u32,
    start: Nanos,
    state: CallState,
    /// The turn booked with the limit, waited for before the attempt goes.
    turn: Option<Turn>,
}

type ClientPolicy = RetryPolicy<SeededCalls<Backoff>>;

/// The client side of one run: the calls in flight, their policies, and the
/// counts.
struct Clients {
    policies: Vec<ClientPolicy>,
    honours: bool,
    calls: Vec<Option<Call>>,
    free: Vec<u32>,
    end: Nanos,
    deadline: Nanos,
    r: QuotaStrategyResult,
    in_run: InRun,
    latency: LatencyHistogram,
    failed: LatencyHistogram,
    per_bucket: BucketQuantiles,
}

/// Counts of what happened before the end of `duration`, for the rates.
#[derive(Default)]
struct InRun {
    received: u64,
    admitted: u64,
    rejected: u64,
    succeeded: u64,
}

/// `builder` with `limit`, refusing at once or waiting up to `max_wait`.
fn with_limit(
    builder: RetryPolicyBuilder<SeededCalls<Backoff>>,
    limit: RateLimit,
    max_wait: Duration,
) -> RetryPolicyBuilder<SeededCalls<Backoff>> {
    if max_wait.is_zero() {
        builder.rate_limit(limit)
    } else {
        builder.rate_limit_waiting(limit, max_wait)
    }
}

fn run_one(
    config: &QuotaConfig,
    strategy: &QuotaStrategy,
) -> Result<QuotaStrategyResult, SimError> {
    let mut engine: Engine<Ev> = Engine::new(config.seed);
    let clock = engine.clock().clone();
    let provider = RateLimit::builder()
        .name("provider quota")
        .quota(config.provider_quota()?)
        .build_with_clock(clock.clone())?;
    let shared = RateLimit::builder()
        .name("shared limit")
        .quota(config.provider_quota()?)
        .build_with_clock(clock.clone())?;
    let policies: Vec<ClientPolicy> = (0..config.clients)
        .map(|i| {
            let seed = mix(config.seed, u64::from(i));
            let mut builder = RetryPolicy::with_schedule(SeededCalls::new(config.backoff, seed))
                .max_attempts(config.max_attempts)
                .max_elapsed(config.deadline);
            match strategy.limit {
                QuotaLimit::None => {}
                QuotaLimit::PerClient { max_wait } => {
                    let own = RateLimit::builder()
                        .name("per-client limit")
                        .quota(config.client_quota()?)
                        .build_with_clock(clock.clone())?;
                    builder = with_limit(builder, own, max_wait);
                }
                QuotaLimit::Shared { max_wait } => {
                    builder = with_limit(builder, shared.clone(), max_wait);
                }
            }
            Ok(builder.build()?)
        })
        .collect::<Result<_, SimError>>()?;
    // Separate sources, so every strategy sees the same calls from the same
    // clients at the same times, and the same service times, however many
    // attempts it makes.
    let mut arrivals = engine.rng().fork();
    let mut service = engine.rng().fork();
    let cumulative: Vec<f64> = {
        let weights = config.weights();
        let total: f64 = weights.iter().sum();
        let mut sum = 0.0;
        weights
            .iter()
            .map(|w| {
                sum += w / total;
                sum
            })
            .collect()
    };
    let bucket = nanos(config.bucket);
    let duration = nanos(config.duration);
    let half_rtt = nanos(config.network_rtt) / 2;
    let mean_gap = 1e9 / config.call_rate;
    let mut clients = Clients {
        policies,
        honours: strategy.honours_retry_after,
        calls: Vec::new(),
        free: Vec::new(),
        end: duration,
        deadline: nanos(config.deadline),
        r: QuotaStrategyResult {
            name: strategy.name.clone(),
            limit: strategy.limit,
            honours_retry_after: strategy.honours_retry_after,
            calls: 0,
            succeeded: 0,
            exhausted: 0,
            past_deadline: 0,
            cut_at_deadline: 0,
            refused_locally: 0,
            refused_retries: 0,
            waited_for_turn: 0,
            attempts: 0,
            admitted: 0,
            rejected: 0,
            received_per_s: 0.0,
            admitted_per_s: 0.0,
            rejected_per_s: 0.0,
            goodput_per_s: 0.0,
            peak_burst: 0.0,
            p50_ms: None,
            p99_ms: None,
            failed_p50_ms: None,
            failed_p99_ms: None,
            received_per_bucket: Series::new(bucket),
            rejected_per_bucket: Series::new(bucket),
            successes_per_bucket: Series::new(bucket),
            p99_per_bucket_ms: Vec::new(),
        },
        in_run: InRun::default(),
        latency: LatencyHistogram::new(),
        failed: LatencyHistogram::new(),
        per_bucket: BucketQuantiles::new(bucket),
    };
    let mut burst = BurstPeak::new(nanos(config.provider_quota()?.interval()));

    engine.schedule(0, Ev::Arrival);
    while let Some((now, event)) = engine.pop() {
        match event {
            Ev::Arrival => {
                let gap = -mean_gap * (1.0 - arrivals.unit_f64()).ln();
                let u = arrivals.unit_f64();
                let client = cumulative
                    .partition_point(|&c| c <= u)
                    .min(cumulative.len() - 1);
                let next = now.saturating_add(gap as u64);
                if next < duration {
                    engine.schedule(next, Ev::Arrival);
                }
                let id = clients.start(u32::try_from(client).unwrap_or(0), now, &clock);
                clients.send(id, &mut engine, &clock, half_rtt)?;
            }
            Ev::Send(id) => clients.send(id, &mut engine, &clock, half_rtt)?,
            Ev::Arrive(id) => {
                clients.r.received_per_bucket.add(now);
                burst.add(now);
                let in_run = now < duration;
                clients.in_run.received += u64::from(in_run);
                match provider.check() {
                    Ok(()) => {
                        clients.r.admitted += 1;
                        clients.in_run.admitted += u64::from(in_run);
                        let time = nanos(config.latency.sample(&mut service));
                        engine.schedule(
                            now.saturating_add(time).saturating_add(half_rtt),
                            Ev::Response {
                                call: id,
                                answer: Answer::Served,
                            },
                        );
                    }
                    Err(refused) => {
                        clients.r.rejected += 1;
                        clients.r.rejected_per_bucket.add(now);
                        clients.in_run.rejected += u64::from(in_run);
                        let hint = refused.retry_after.map(|w| config.retry_after.hint(w));
                        engine.schedule(
                            now.saturating_add(half_rtt),
                            Ev::Response {
                                call: id,
                                answer: Answer::TooMany(hint),
                            },
                        );
                    }
                }
            }
            Ev::Response { call, answer } => clients.outcome(call, answer, &mut engine, &clock),
        }
    }
    let buckets = usize::try_from(duration.div_ceil(bucket)).unwrap_or(usize::MAX);
    let mut r = clients.finish(buckets, secs(duration));
    r.peak_burst = burst.peak();
    Ok(r)
}

impl Clients {
    /// Starts a call from `client` at `now`: its state, with its deadline.
    fn start(&mut self, client: u32, now: Nanos, clock: &SimClock) -> u32 {
        self.r.calls += 1;
        let state = self.policies[client as usize].start(clock, None);
        let call = Call {
            client,
            start: now,
            state,
            turn: None,
        };
        match self.free.pop() {
            Some(id) => {
                self.calls[id as usize] = Some(call);
                id
            }
            None => {
                self.calls.push(Some(call));
                u32::try_from(self.calls.len() - 1).unwrap_or(u32::MAX)
            }
        }
    }

    /// Call `id` makes its next attempt now: admitted by its policy's rate
    /// limit first (at once, after a turn it waits for, or refused: the call
    /// ends), then sent.
    fn send(
        &mut self,
        id: u32,
        engine: &mut Engine<Ev>,
        clock: &SimClock,
        half_rtt: Nanos,
    ) -> Result<(), SimError> {
        let now = engine.now();
        let Some(Some(call)) = self.calls.get_mut(id as usize) else {
            return Ok(());
        };
        let policy = &self.policies[call.client as usize];
        // The gate, as the executors ask it: a turn of the policy's rate
        // limit within its wait and the time left before the deadline, or
        // none; a turn waited for is taken when it comes.
        let admission = match call.turn.take() {
            Some(turn) => turn.take(policy.limits(), call.state.avoid(), clock),
            None => policy
                .limits()
                .admit(call.state.deadline(), call.state.avoid(), clock),
        };
        match admission {
            // No concurrency limit here: the ticket holds nothing.
            Admission::Admitted(_ticket) => {}
            Admission::Turn(turn) => {
                self.r.waited_for_turn += 1;
                engine.schedule(now.saturating_add(nanos(turn.wait())), Ev::Send(id));
                call.turn = Some(turn);
                return Ok(());
            }
            // A queue would need a waiter the simulation does not model:
            // refused (and counted by the limit), as a limit without one.
            Admission::Queue(_) | Admission::Refused(_) => {
                if let Admission::Queue(queue) = admission {
                    let _ = queue.give_up();
                }
                // StopReason::Throttled: the call fails at once.
                policy.abandon(&mut call.state);
                self.r.refused_locally += 1;
                if call.state.attempts() > 0 {
                    self.r.refused_retries += 1;
                }
                let latency = now.saturating_sub(call.start);
                self.failed.record(latency);
                self.end(id);
                return Ok(());
            }
        }
        policy.attempt_starting(&mut call.state, clock);
        self.r.attempts += 1;
        if self.r.attempts > check::MAX_ATTEMPTS {
            return Err(SimError::TooMuchWork {
                scenario: "quota",
                limit: check::MAX_ATTEMPTS,
            });
        }
        engine.schedule(now.saturating_add(half_rtt), Ev::Arrive(id));
        Ok(())
    }

    /// The provider's answer to call `id` arrived; the policy decides what
    /// follows. An answer after the call's deadline is too late: an executor
    /// has cut the attempt off at the deadline, and the call failed there.
    fn outcome(&mut self, id: u32, answer: Answer, engine: &mut Engine<Ev>, clock: &SimClock) {
        let now = engine.now();
        let Some(Some(call)) = self.calls.get_mut(id as usize) else {
            return;
        };
        let latency = now.saturating_sub(call.start);
        let policy = &self.policies[call.client as usize];
        if call
            .state
            .deadline()
            .is_some_and(|d| d.is_expired(clock.now()))
        {
            policy.abandon(&mut call.state);
            self.r.past_deadline += 1;
            self.r.cut_at_deadline += 1;
            self.failed.record(latency.min(self.deadline));
            self.end(id);
            return;
        }
        let verdict = match answer {
            Answer::Served => Verdict::Success,
            Answer::TooMany(Some(hint)) if self.honours => Verdict::RetryAfter(hint),
            Answer::TooMany(_) => Verdict::Retry,
        };
        match policy.decide(&mut call.state, verdict, clock) {
            Decision::Retry(delay) => {
                engine.schedule(now.saturating_add(nanos(delay)), Ev::Send(id));
                return;
            }
            Decision::Succeed => {
                self.r.succeeded += 1;
                self.in_run.succeeded += u64::from(now < self.end);
                self.r.successes_per_bucket.add(now);
                self.latency.record(latency);
                self.per_bucket.record(now, latency);
            }
            Decision::Stop(reason) => {
                match reason {
                    StopReason::Deadline => self.r.past_deadline += 1,
                    _ => self.r.exhausted += 1,
                }
                self.failed.record(latency);
            }
        }
        self.end(id);
    }

    fn end(&mut self, id: u32) {
        if let Some(slot) = self.calls.get_mut(id as usize) {
            *slot = None;
            self.free.push(id);
        }
    }

    fn finish(mut self, buckets: usize, run_s: f64) -> QuotaStrategyResult {
        let mut r = self.r;
        r.received_per_bucket.extend_to(buckets);
        r.rejected_per_bucket.extend_to(buckets);
        r.successes_per_bucket.extend_to(buckets);
        self.per_bucket.finish(buckets);
        r.p99_per_bucket_ms = self.per_bucket.p99()[..buckets.min(self.per_bucket.p99().len())]
            .iter()
            .map(|n| n.map(|n| n as f64 / 1e6))
            .collect();
        let rate = |n: u64| n as f64 / run_s.max(1e-9);
        r.received_per_s = rate(self.in_run.received);
        r.admitted_per_s = rate(self.in_run.admitted);
        r.rejected_per_s = rate(self.in_run.rejected);
        r.goodput_per_s = rate(self.in_run.succeeded);
        let q = |h: &LatencyHistogram, q: f64| h.quantile(q).map(|n| n as f64 / 1e6);
        (r.p50_ms, r.p99_ms) = (q(&self.latency, 0.5), q(&self.latency, 0.99));
        (r.failed_p50_ms, r.failed_p99_ms) = (q(&self.failed, 0.5), q(&self.failed, 0.99));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_round_up_to_their_unit() {
        assert_eq!(
            RetryAfter::Seconds.hint(Duration::from_nanos(1)),
            Duration::from_secs(1)
        );
        assert_eq!(
            RetryAfter::Seconds.hint(Duration::from_millis(1_001)),
            Duration::from_secs(2)
        );
        assert_eq!(
            RetryAfter::Seconds.hint(Duration::from_secs(3)),
            Duration::from_secs(3)
        );
        assert_eq!(
            RetryAfter::Millis.hint(Duration::from_nanos(1_000_001)),
            Duration::from_millis(2)
        );
        assert_eq!(RetryAfter::Millis.hint(Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn the_shares_add_up_to_the_quota() {
        for (quota, clients, burst) in [(100, 20, None), (7, 3, None), (10, 40, Some(10))] {
            let c = QuotaConfig {
                quota,
                clients,
                burst,
                ..QuotaConfig::default()
            };
            let share = c.client_quota().unwrap();
            let per_s = 1e9 / share.interval().as_nanos() as f64;
            assert!(
                (per_s * f64::from(clients) - f64::from(quota)).abs() < 1e-6,
                "{quota}/{clients}: {per_s}"
            );
            assert!(share.burst() >= 1);
            if c.burst() >= clients {
                assert!(share.burst() * clients <= c.burst());
            }
        }
    }

    #[test]
    fn the_largest_configuration_validate_accepts_builds_its_quotas() {
        for (quota, burst, clients) in [
            (1, Some(1_000_000_000), 1),
            (1_000_000_000, None, 1_000_000),
            (1, None, 1_000_000),
            (1_000_000_000, Some(1), 1),
        ] {
            let c = QuotaConfig {
                quota,
                burst,
                clients,
                call_rate: 1.0,
                ..QuotaConfig::default()
            };
            assert!(c.validate().is_ok(), "{quota} {burst:?} {clients}");
        }
    }
}
