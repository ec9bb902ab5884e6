//! `overload`: a server whose capacity drops and later recovers, under a
//! fixed arrival rate, with no concurrency limit, static limits and the
//! core's adaptive limits (AIMD, Vegas, Gradient2), each with and without
//! retries.
//!
//! The model, on virtual time:
//! - **the server** ([`crate::server`]) has `concurrency` workers and a FIFO
//!   queue of up to `queue_limit` requests; its latency grows with the
//!   queue, an arrival that finds the queue full is rejected at once with an
//!   overload status (a 503), and it serves every request it queued, whether
//!   or not its caller still waits;
//! - **the clients**: calls arrive open-loop, as a Poisson process at
//!   `call_rate` (by default above the capacity left during the drop), each
//!   from one of `clients` client processes. Every client has its own
//!   [`RetryPolicy`] (1 attempt, or 3 with the shared backoff schedule) and,
//!   per strategy, its own [`ConcurrencyLimit`] set on that policy
//!   ([`RetryPolicyBuilder::concurrency_limit`](steadfast::policy::RetryPolicyBuilder::concurrency_limit)),
//!   on the simulation's clock. Every attempt has the policy's
//!   `attempt_timeout`;
//! - **the drop**: from `drop.start`, for `drop.length`, the server keeps
//!   only `capacity` of its workers (a quarter by default), then gets them
//!   all back.
//!
//! The simulator drives the policy's decision engine itself, as an executor
//! does: before every attempt (first or retry) it asks the gate for a
//! ticket without waiting ([`Limits::admit_now`](steadfast::policy::Limits::admit_now):
//! a slot of the policy's limit); a refusal ends the call at once as
//! [`StopReason::LimitReached`](steadfast::StopReason::LimitReached) (the
//! client sheds it; the policy gets back what it was granted,
//! [`RetryPolicy::abandon`]).
//! When the attempt ends its ticket is finished with the core's rule
//! ([`Ticket::end`], [`Signal::of`](steadfast::limit::Signal::of)): a
//! success is a latency sample (the slot measures it
//! itself, from taking the slot to giving it back, on the limit's clock:
//! the simulation's), a 503 is a drop (an overload status), and a timeout
//! is a drop. Every limit, decision and delay is the core's.
//!
//! **The adaptive limits' settings.** The published defaults (Netflix's)
//! are kept except two, both said in the report:
//! - the floor: AIMD and Gradient2 publish `min_limit` 20, which is above
//!   the concurrency a small server has left in a drop (10 requests served
//!   at once by default), so a limit floored at 20 could never come down to
//!   it. Every adaptive strategy here uses `min_limit` 1 (Vegas' own
//!   default), `max_limit` 200 (AIMD's and Gradient2's; Vegas publishes
//!   1000, lowered so the three share their bounds: a limit of 200 is
//!   already 5 times the server's workers) and the published initial limit
//!   20 (kept within the bounds when they are changed);
//! - the sample window: 100 ms and 10 samples (`window`,
//!   `window_samples`), where the core's default is Netflix's 1 s. At the
//!   default rate a 100 ms window holds about 100 attempts. With 1 s windows
//!   the limits move one step a second (Vegas by a slot, Gradient2 by a
//!   fraction of its limit), so they spend most of the 20 s before the drop
//!   growing and several seconds making half of their move in it (the CLI's
//!   `--limit-window 1s` shows it); with shorter windows Vegas, whose
//!   latency without load is the lowest window average it has seen, reads
//!   the ordinary variation between small windows as queueing and sheds
//!   calls the server could serve (the report says when it did).
//!
//! The numbers, per strategy: **goodput** (calls that succeeded per second,
//! by the time they succeeded) before, during and after the drop; **latency**
//! (p50 and p99, from a call's start to its success, retries and their waits
//! included) of the calls that succeeded in each phase; calls **shed** by
//! the limit; attempts the server **rejected** and attempts that **timed
//! out**; requests served for callers who had gone (**wasted** work); and,
//! with a limit, the **limit over time** (summed over the clients), its
//! level before, during and after the drop, and how long it took to make
//! half its move after the drop and after the recovery.
//!
//! **The comparison** with Netflix's account ("Performance Under Load",
//! 2018): a strategy *keeps goodput* when its goodput is at least [`BUSY`]
//! of the goodput without a limit before and after the drop (it sheds
//! nothing the server could serve) and at least [`BUSY`] of the capacity
//! left in the drop. The run agrees when the p99 in the drop without a
//! limit is at least [`UNPROTECTED_P99`] times the unloaded p99 (the p99
//! without a limit before the drop), and an adaptive limit without retries
//! keeps goodput with a p99 in the drop of at most [`PROTECTED_P99`] times
//! the unloaded one.
//!
//! ```
//! use std::time::Duration;
//! use steadfast_sim::overload::{self, OverloadConfig};
//! use steadfast_sim::storm::Incident;
//!
//! let config = OverloadConfig {
//!     duration: Duration::from_secs(24),
//!     drop: Incident::overload(Duration::from_secs(8), Duration::from_secs(8), 0.25),
//!     ..OverloadConfig::default()
//! };
//! let result = overload::run(&config)?;
//! let none = result.strategy(overload::NO_LIMIT).unwrap();
//! let gradient = result.strategy(overload::GRADIENT2).unwrap();
//! // Without a limit the queue fills and latency climbs; the limit keeps it short.
//! assert!(none.p99_during_ms.unwrap() > 3.0 * gradient.p99_during_ms.unwrap());
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::time::Duration;

use serde::Serialize;
use steadfast::backoff::{Backoff, Rng};
use steadfast::limit::{Aimd, Algorithm, ConcurrencyLimit, Gradient2, Vegas};
use steadfast::policy::gate::Ticket;
use steadfast::policy::{CallState, Decision};
use steadfast::{RetryPolicy, Verdict};

use super::{ScenarioResult, SeededCalls, StrategyResult, mix, run_strategies};
use crate::engine::{Engine, Nanos, SimClock, nanos, secs};
use crate::error::check;
use crate::metrics::{BucketQuantiles, LatencyHistogram, Series};
use crate::server::{Arrival, Server, ServerConfig};
use crate::storm::{Incident, IncidentKind};
use crate::{Agreement, SimError};

const SCOPE: &str = "overload config";

/// An adaptive algorithm's bounds: the limit starts at `initial` and stays
/// within `[min, max]`.
///
/// ```
/// let b = steadfast_sim::overload::Bounds::new(1, 200);
/// assert_eq!((b.initial, b.min, b.max), (20, 1, 200));
/// assert_eq!(steadfast_sim::overload::Bounds::new(1, 8).initial, 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// The limit before the first window.
    pub initial: u32,
    /// The least it may become.
    pub min: u32,
    /// The most it may become.
    pub max: u32,
}

impl Bounds {
    /// `[min, max]`, starting at the published initial limit (20), kept
    /// within them.
    #[must_use]
    pub fn new(min: u32, max: u32) -> Self {
        Self {
            initial: 20.clamp(min, max.max(min)),
            min,
            max,
        }
    }
}

/// The concurrency limit each client gets (one instance per client, on the
/// simulation's clock).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OverloadLimit {
    /// No limit: every attempt goes to the server.
    None,
    /// A bulkhead of this many slots ([`ConcurrencyLimit::fixed`]).
    Fixed {
        /// Attempts in flight at once, at most.
        slots: u32,
    },
    /// [`Aimd`], published defaults but the bounds.
    Aimd(Bounds),
    /// [`Vegas`], published defaults but the bounds.
    Vegas(Bounds),
    /// [`Gradient2`], published defaults but the bounds.
    Gradient2(Bounds),
}

impl OverloadLimit {
    /// Whether an algorithm moves this limit.
    #[must_use]
    pub fn is_adaptive(&self) -> bool {
        matches!(self, Self::Aimd(_) | Self::Vegas(_) | Self::Gradient2(_))
    }

    fn build(
        self,
        config: &OverloadConfig,
        clock: &SimClock,
        seed: u64,
    ) -> Result<Option<ConcurrencyLimit>, SimError> {
        Ok(Some(match self {
            Self::None => return Ok(None),
            Self::Fixed { slots } => {
                ConcurrencyLimit::fixed(slots).build_with_clock(clock.clone())?
            }
            Self::Aimd(b) => adaptive(
                config,
                clock,
                Aimd::builder()
                    .initial_limit(b.initial)
                    .min_limit(b.min)
                    .max_limit(b.max)
                    .build()?,
            )?,
            Self::Vegas(b) => adaptive(
                config,
                clock,
                Vegas::builder()
                    .initial_limit(b.initial)
                    .min_limit(b.min)
                    .max_limit(b.max)
                    .seed(seed)
                    .build()?,
            )?,
            Self::Gradient2(b) => adaptive(
                config,
                clock,
                Gradient2::builder()
                    .initial_limit(b.initial)
                    .min_limit(b.min)
                    .max_limit(b.max)
                    .build()?,
            )?,
        }))
    }
}

/// An adaptive limit moved by `algorithm`, with the scenario's window, on
/// the simulation's clock.
fn adaptive(
    config: &OverloadConfig,
    clock: &SimClock,
    algorithm: impl Algorithm,
) -> Result<ConcurrencyLimit, steadfast::ConfigError> {
    ConcurrencyLimit::adaptive(algorithm)
        .window(config.window, config.window_samples)
        .build_with_clock(clock.clone())
}

/// One strategy: attempts per call and the limit each client gets.
///
/// ```
/// use steadfast_sim::overload::{Bounds, OverloadStrategy};
/// let names: Vec<String> = OverloadStrategy::standard(40, Bounds::new(1, 200))
///     .into_iter().map(|s| s.name).collect();
/// assert_eq!(names[..6], ["no limit", "static 40", "static 20", "AIMD", "Vegas", "Gradient2"]);
/// assert_eq!(names[6], "no limit + retries");
/// assert_eq!(names.len(), 12);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadStrategy {
    /// The name shown in reports.
    pub name: String,
    /// Attempts per call, counting the first (1 = no retries).
    pub max_attempts: u32,
    /// The concurrency limit.
    pub limit: OverloadLimit,
}

/// The name of the strategy without a limit.
pub const NO_LIMIT: &str = "no limit";
/// The name of the AIMD strategy.
pub const AIMD: &str = "AIMD";
/// The name of the Vegas strategy.
pub const VEGAS: &str = "Vegas";
/// The name of the Gradient2 strategy.
pub const GRADIENT2: &str = "Gradient2";
/// What a strategy's name gets with retries (3 attempts).
pub const WITH_RETRIES: &str = " + retries";

impl OverloadStrategy {
    /// The twelve strategies compared by default, for a server of `workers`
    /// (its full concurrency): no limit; a static limit of `workers` and one
    /// of half of it; AIMD, Vegas and Gradient2 within `bounds`. Each with 1
    /// attempt, then each again with 3 (named `... + retries`). A static
    /// limit that would repeat another (a server of 1 worker) is left out.
    #[must_use]
    pub fn standard(workers: u32, bounds: Bounds) -> Vec<Self> {
        let workers = workers.max(1);
        let mut limits = vec![
            (NO_LIMIT.to_owned(), OverloadLimit::None),
            (
                format!("static {workers}"),
                OverloadLimit::Fixed { slots: workers },
            ),
        ];
        let half = (workers / 2).max(1);
        if half != workers {
            limits.push((
                format!("static {half}"),
                OverloadLimit::Fixed { slots: half },
            ));
        }
        limits.extend([
            (AIMD.to_owned(), OverloadLimit::Aimd(bounds)),
            (VEGAS.to_owned(), OverloadLimit::Vegas(bounds)),
            (GRADIENT2.to_owned(), OverloadLimit::Gradient2(bounds)),
        ]);
        let mut out: Vec<Self> = limits
            .iter()
            .map(|(name, limit)| Self {
                name: name.clone(),
                max_attempts: 1,
                limit: *limit,
            })
            .collect();
        out.extend(limits.into_iter().map(|(name, limit)| Self {
            name: format!("{name}{WITH_RETRIES}"),
            max_attempts: 3,
            limit,
        }));
        out
    }
}

/// The `overload` scenario's settings; every field is public, so a caller
/// (the CLI) sets the ones it was given over [`Default`].
///
/// ```
/// use steadfast_sim::overload::OverloadConfig;
/// let config = OverloadConfig::default();
/// assert!(config.validate().is_ok());
/// // 1000 calls/s: half the server's capacity, twice what it keeps in the drop.
/// assert!((config.load() - 0.5).abs() < 1e-9);
/// assert!((config.load_in_drop() - 2.0).abs() < 1e-9);
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct OverloadConfig {
    /// Client processes, each with its own policy and limit (default 1: one
    /// service calling its dependency, every request of it sharing one
    /// limit, as a limit built once and cloned into every handler does).
    pub clients: u32,
    /// Calls per second, all clients together (default 1000: half the
    /// server's capacity, twice what it has left in the drop).
    pub call_rate: f64,
    /// Calls start during this time (default 60 s); the run then lets them
    /// finish.
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub duration: Duration,
    /// The server (default: 40 workers, exponential service with mean
    /// 20 ms, so 2,000 requests/s; a queue of 1,000: 0.5 s of work at full
    /// capacity, 2 s in the drop).
    pub server: ServerConfig,
    /// The round trip added to every response (default 1 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub network_rtt: Duration,
    /// How long a caller waits for one attempt (default 500 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub attempt_timeout: Duration,
    /// The drop (default: capacity down to 25 % from 20 s for 20 s). Must be
    /// an overload that leaves some capacity.
    pub drop: Incident,
    /// The schedule of the strategies with retries (default
    /// [`Backoff::default`]).
    #[serde(skip)]
    pub backoff: Backoff,
    /// The adaptive limits' sample window: at least this long (default
    /// 100 ms; see the module docs).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub window: Duration,
    /// ... and at least this many finished attempts (default 10).
    pub window_samples: u32,
    /// The strategies (default [`OverloadStrategy::standard`] for the
    /// server's workers, within `[1, 200]`).
    pub strategies: Vec<OverloadStrategy>,
    /// The width of a bucket of the goodput and latency series (default
    /// 500 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub bucket: Duration,
    /// How often the limit is sampled for its time series (default 100 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub limit_sample: Duration,
    /// The seed (default 1).
    pub seed: u64,
}

impl Default for OverloadConfig {
    fn default() -> Self {
        let server = ServerConfig {
            concurrency: 40,
            queue_limit: 1_000,
            latency: crate::Latency::Exponential {
                mean: Duration::from_millis(20),
            },
        };
        Self {
            clients: 1,
            call_rate: 1_000.0,
            duration: Duration::from_secs(60),
            strategies: OverloadStrategy::standard(server.concurrency, Bounds::new(1, 200)),
            server,
            network_rtt: Duration::from_millis(1),
            attempt_timeout: Duration::from_millis(500),
            drop: Incident::overload(Duration::from_secs(20), Duration::from_secs(20), 0.25),
            backoff: Backoff::default(),
            window: Duration::from_millis(100),
            window_samples: 10,
            bucket: Duration::from_millis(500),
            limit_sample: Duration::from_millis(100),
            seed: 1,
        }
    }
}

impl OverloadConfig {
    /// The capacity left during the drop, as a fraction (0 for a drop that
    /// is not an overload, which [`validate`](Self::validate) refuses).
    #[must_use]
    pub fn drop_capacity(&self) -> f64 {
        match self.drop.kind {
            IncidentKind::Overload { capacity } => capacity,
            IncidentKind::Outage => 0.0,
        }
    }

    /// The server's workers during the drop (as the server rounds them: up,
    /// at least one).
    #[must_use]
    pub fn workers_in_drop(&self) -> u32 {
        let slots = (f64::from(self.server.concurrency) * self.drop_capacity()).ceil() as u32;
        slots.max(1)
    }

    /// The offered load: `call_rate` over the server's capacity.
    #[must_use]
    pub fn load(&self) -> f64 {
        self.call_rate / self.server.capacity_per_sec()
    }

    /// The offered load over the capacity left in the drop.
    #[must_use]
    pub fn load_in_drop(&self) -> f64 {
        self.load() * f64::from(self.server.concurrency) / f64::from(self.workers_in_drop())
    }

    /// The requests per second the server can serve during the drop.
    #[must_use]
    pub fn capacity_in_drop(&self) -> f64 {
        self.server.capacity_per_sec() * f64::from(self.workers_in_drop())
            / f64::from(self.server.concurrency)
    }

    /// When the drop ends.
    #[must_use]
    pub fn recovery(&self) -> Duration {
        self.drop.end()
    }

    /// Checks every setting; the first broken rule is the error. (The
    /// limits' and policies' own settings are checked by their builders
    /// when the run starts, and come back as [`SimError::Core`].)
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_sim::overload::OverloadConfig;
    /// use steadfast_sim::storm::Incident;
    /// let config = OverloadConfig {
    ///     drop: Incident::overload(Duration::from_secs(50), Duration::from_secs(20), 0.25),
    ///     ..OverloadConfig::default()
    /// };
    /// assert!(config.validate().unwrap_err().to_string().contains("`drop`"));
    /// ```
    ///
    /// # Errors
    /// [`SimError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), SimError> {
        check::clients(SCOPE, self.clients)?;
        check::finite_positive(SCOPE, "call_rate", self.call_rate)?;
        check::positive_duration(SCOPE, "duration", self.duration)?;
        check::positive_duration(SCOPE, "attempt_timeout", self.attempt_timeout)?;
        check::positive_duration(SCOPE, "bucket", self.bucket)?;
        check::positive_duration(SCOPE, "limit_sample", self.limit_sample)?;
        check::positive_duration(SCOPE, "window", self.window)?;
        check::at_least(
            SCOPE,
            "window_samples",
            self.window_samples.into(),
            1,
            "must be at least 1",
        )?;
        self.server.validate_capacity()?;
        match self.drop.kind {
            IncidentKind::Overload { capacity } if capacity > 0.0 && capacity < 1.0 => {}
            kind => {
                return Err(SimError::config(
                    SCOPE,
                    "drop.capacity",
                    "must be an overload that leaves a fraction in (0, 1) of the capacity",
                    kind,
                ));
            }
        }
        check::positive_duration(SCOPE, "drop.length", self.drop.length)?;
        if self.drop.start < self.bucket.saturating_mul(4) {
            return Err(SimError::config(
                SCOPE,
                "drop",
                "must start at least 4 buckets of the time series (2 s by default) into the run, so there is a time before it to compare with",
                self.drop.start,
            ));
        }
        if self
            .drop
            .end()
            .saturating_add(self.bucket.saturating_mul(4))
            > self.duration
        {
            return Err(SimError::config(
                SCOPE,
                "drop",
                "must end at least 4 buckets of the time series (2 s by default) before `duration`, so the recovery can be seen",
                self.drop.end(),
            ));
        }
        check::calls(SCOPE, "call_rate", self.call_rate, self.duration)?;
        check::buckets(SCOPE, "duration", self.duration, self.bucket)?;
        check::buckets(SCOPE, "duration", self.duration, self.limit_sample)?;
        check::strategies(SCOPE, &self.strategies, |s| s.max_attempts)?;
        for s in &self.strategies {
            match s.limit {
                OverloadLimit::None => {}
                OverloadLimit::Fixed { slots } => check::at_least(
                    SCOPE,
                    "strategies.limit.slots",
                    slots.into(),
                    1,
                    "must be at least 1",
                )?,
                OverloadLimit::Aimd(b) | OverloadLimit::Vegas(b) | OverloadLimit::Gradient2(b) => {
                    check::at_least(
                        SCOPE,
                        "strategies.limit.min",
                        b.min.into(),
                        1,
                        "must be at least 1",
                    )?;
                    if b.max < b.min {
                        return Err(SimError::config(
                            SCOPE,
                            "strategies.limit.max",
                            "must be at least the least limit",
                            (b.min, b.max),
                        ));
                    }
                    if !(b.min..=b.max).contains(&b.initial) {
                        return Err(SimError::config(
                            SCOPE,
                            "strategies.limit.initial",
                            "must be within the least and the most limit",
                            (b.initial, b.min, b.max),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// A limit's time series and what it shows (summed over the clients).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LimitTrace {
    /// Seconds between two samples.
    pub step_s: f64,
    /// The limit at `0, step, 2 step, ...` until the run's `duration`.
    pub samples: Vec<u32>,
    /// The most attempts that were in flight at once under the limit.
    pub max_in_flight: u32,
    /// Attempts that took a slot while more were in flight than the limit
    /// allowed (the slot accounting's invariant: always 0).
    pub over_limit: u64,
    /// The mean limit over the second half of the time before the drop.
    pub before: f64,
    /// The mean limit over the second half of the drop (where it settled).
    pub during: f64,
    /// The lowest limit during the drop.
    pub lowest_during: u32,
    /// The mean limit over the second half of the time after the drop.
    pub after: f64,
    /// Seconds from the drop to the first sample at or below halfway from
    /// `before` to `during`; `None` when it did not come down.
    pub drop_follow_s: Option<f64>,
    /// Seconds from the recovery to the first sample at or above halfway
    /// from `during` to `after`; `None` when it did not go up.
    pub recovery_follow_s: Option<f64>,
}

/// One strategy's numbers (example in the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadStrategyResult {
    /// The strategy's name.
    pub name: String,
    /// Whether an algorithm moves its limit.
    pub adaptive: bool,
    /// Attempts per call, counting the first.
    pub max_attempts: u32,
    /// Calls started.
    pub calls: u64,
    /// Calls that succeeded.
    pub succeeded: u64,
    /// Attempts sent to the server.
    pub attempts: u64,
    /// Calls that ended because the limit refused a slot (shed by the
    /// client, at once).
    pub shed: u64,
    /// Of those, calls refused a slot for a retry.
    pub shed_retries: u64,
    /// Attempts the server rejected at once (its queue was full).
    pub rejected: u64,
    /// Attempts that timed out.
    pub timed_out: u64,
    /// Requests the server served whose caller had stopped waiting.
    pub wasted: u64,
    /// Goodput over the second half of the time before the drop, calls/s.
    pub goodput_before: f64,
    /// Goodput during the drop, calls/s.
    pub goodput_during: f64,
    /// Goodput from the recovery to `duration`, calls/s.
    pub goodput_after: f64,
    /// Median latency of the calls that succeeded in the second half of
    /// the time before the drop, ms (`None`: none did).
    pub p50_before_ms: Option<f64>,
    /// Their 99th percentile, ms.
    pub p99_before_ms: Option<f64>,
    /// Median latency of the calls that succeeded during the drop, ms.
    pub p50_during_ms: Option<f64>,
    /// Their 99th percentile, ms.
    pub p99_during_ms: Option<f64>,
    /// Median latency of the calls that succeeded after the drop, ms.
    pub p50_after_ms: Option<f64>,
    /// Their 99th percentile, ms.
    pub p99_after_ms: Option<f64>,
    /// The limit over time; `None` without one.
    pub limit: Option<LimitTrace>,
    /// Calls that succeeded, per bucket of the time they succeeded.
    pub successes_per_bucket: Series,
    /// The median latency of the calls that succeeded in each bucket, ms.
    pub p50_per_bucket_ms: Vec<Option<f64>>,
    /// Their 99th percentile, ms.
    pub p99_per_bucket_ms: Vec<Option<f64>>,
}

impl StrategyResult for OverloadStrategyResult {
    fn name(&self) -> &str {
        &self.name
    }
}

/// The `overload` scenario's result (see [`run`]): its settings, one
/// [`OverloadStrategyResult`] per strategy, and how the numbers compare with
/// Netflix's account of adaptive concurrency limits.
pub type OverloadResult = ScenarioResult<OverloadConfig, OverloadStrategyResult>;

/// Runs every configured strategy on the same seed (example in the
/// [module docs](self)).
///
/// # Errors
/// [`SimError::Config`] for a bad setting, [`SimError::Core`] when a limit's
/// or policy's builder refuses its settings, [`SimError::TooMuchWork`] past
/// the simulator's bound on attempts.
pub fn run(config: &OverloadConfig) -> Result<OverloadResult, SimError> {
    config.validate()?;
    run_strategies(
        config,
        &config.strategies,
        |s| run_one(config, s),
        |r| performance_under_load(config, r),
    )
}

/// A request as the server sees it.
#[derive(Debug, Clone, Copy)]
struct Request {
    call: u32,
    tag: u32,
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Arrival,
    /// A call sends its next attempt.
    Send(u32),
    /// The server finished serving a request.
    Finish(Request),
    /// A response reaches the caller (`ok`: served; else rejected, 503).
    Response {
        call: u32,
        tag: u32,
        ok: bool,
    },
    /// An attempt's timeout.
    Timeout {
        call: u32,
        tag: u32,
    },
    DropStart,
    DropEnd,
    /// Sample the limits.
    Sample,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Served,
    Rejected,
    TimedOut,
}

struct Call {
    client: u32,
    start: Nanos,
    /// The attempt in flight (a number unique in the run), if one is.
    tag: u32,
    waiting: bool,
    state: CallState,
    /// The slot the attempt in flight holds (with a limit).
    ticket: Ticket,
}

type ClientPolicy = RetryPolicy<SeededCalls<Backoff>>;

/// Where time `t` falls: the second half of the time before the drop, the
/// drop, after it, or none of them (warm-up, after `duration`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Before = 0,
    During = 1,
    After = 2,
}

struct Phases {
    before: (Nanos, Nanos),
    drop: (Nanos, Nanos),
    after: (Nanos, Nanos),
}

impl Phases {
    fn of(&self, t: Nanos) -> Option<Phase> {
        let inside = |(a, b): (Nanos, Nanos)| (a..b).contains(&t);
        if inside(self.before) {
            Some(Phase::Before)
        } else if inside(self.drop) {
            Some(Phase::During)
        } else if inside(self.after) {
            Some(Phase::After)
        } else {
            None
        }
    }
}

/// The client side of one run: the calls in flight, their policies, and
/// the counts.
struct Clients {
    policies: Vec<ClientPolicy>,
    calls: Vec<Option<Call>>,
    free: Vec<u32>,
    next_tag: u32,
    timeout: Nanos,
    rtt: Nanos,
    phases: Phases,
    r: OverloadStrategyResult,
    latency: [LatencyHistogram; 3],
    successes: [u64; 3],
    per_bucket: BucketQuantiles,
    max_in_flight: u32,
    over_limit: u64,
}

fn run_one(
    config: &OverloadConfig,
    strategy: &OverloadStrategy,
) -> Result<OverloadStrategyResult, SimError> {
    let mut engine: Engine<Ev> = Engine::new(config.seed);
    let clock = engine.clock().clone();
    let policies: Vec<ClientPolicy> = (0..config.clients)
        .map(|i| {
            let seed = mix(config.seed, u64::from(i));
            let mut builder = RetryPolicy::with_schedule(SeededCalls::new(config.backoff, seed))
                .max_attempts(strategy.max_attempts)
                .attempt_timeout(config.attempt_timeout);
            if let Some(limit) = strategy.limit.build(config, &clock, seed)? {
                builder = builder.concurrency_limit(limit);
            }
            Ok(builder.build()?)
        })
        .collect::<Result<_, SimError>>()?;
    let mut server: Server<Request> = Server::new(&config.server)?;
    // Separate sources, so every strategy sees the same calls at the same
    // times and the same service times, however many attempts it makes.
    let mut arrivals = engine.rng().fork();
    let mut service = engine.rng().fork();
    let bucket = nanos(config.bucket);
    let duration = nanos(config.duration);
    let step = nanos(config.limit_sample);
    let (down, up) = (nanos(config.drop.start), nanos(config.drop.end()));
    let mean_gap = 1e9 / config.call_rate;
    let mut clients = Clients {
        policies,
        calls: Vec::new(),
        free: Vec::new(),
        next_tag: 0,
        timeout: nanos(config.attempt_timeout),
        rtt: nanos(config.network_rtt),
        phases: Phases {
            before: (down / 2, down),
            drop: (down, up),
            after: (up, duration),
        },
        r: OverloadStrategyResult {
            name: strategy.name.clone(),
            adaptive: strategy.limit.is_adaptive(),
            max_attempts: strategy.max_attempts,
            calls: 0,
            succeeded: 0,
            attempts: 0,
            shed: 0,
            shed_retries: 0,
            rejected: 0,
            timed_out: 0,
            wasted: 0,
            goodput_before: 0.0,
            goodput_during: 0.0,
            goodput_after: 0.0,
            p50_before_ms: None,
            p99_before_ms: None,
            p50_during_ms: None,
            p99_during_ms: None,
            p50_after_ms: None,
            p99_after_ms: None,
            limit: None,
            successes_per_bucket: Series::new(bucket),
            p50_per_bucket_ms: Vec::new(),
            p99_per_bucket_ms: Vec::new(),
        },
        latency: [
            LatencyHistogram::new(),
            LatencyHistogram::new(),
            LatencyHistogram::new(),
        ],
        successes: [0; 3],
        per_bucket: BucketQuantiles::new(bucket),
        max_in_flight: 0,
        over_limit: 0,
    };
    let limited = strategy.limit != OverloadLimit::None;
    let mut samples: Vec<u32> = Vec::new();

    engine.schedule(down, Ev::DropStart);
    engine.schedule(up, Ev::DropEnd);
    engine.schedule(0, Ev::Arrival);
    if limited {
        engine.schedule(0, Ev::Sample);
    }
    while let Some((now, event)) = engine.pop() {
        match event {
            Ev::Arrival => {
                let gap = -mean_gap * (1.0 - arrivals.unit_f64()).ln();
                let client = (arrivals.next_u64() % u64::from(config.clients)) as u32;
                let next = now.saturating_add(gap as u64);
                if next < duration {
                    engine.schedule(next, Ev::Arrival);
                }
                let id = clients.start(client, now, &clock);
                clients.send(id, &mut engine, &mut server, &mut service, &clock)?;
            }
            Ev::Send(id) => {
                clients.send(id, &mut engine, &mut server, &mut service, &clock)?;
            }
            Ev::Finish(request) => {
                if let Some((next, time)) = server.finish(&mut service) {
                    engine.schedule(now.saturating_add(time), Ev::Finish(next));
                }
                if clients.is_waiting(request.call, request.tag) {
                    engine.schedule(
                        now.saturating_add(clients.rtt),
                        Ev::Response {
                            call: request.call,
                            tag: request.tag,
                            ok: true,
                        },
                    );
                } else {
                    clients.r.wasted += 1;
                }
            }
            Ev::Response { call, tag, ok } => {
                if !clients.is_waiting(call, tag) {
                    // Timed out while the response travelled.
                    clients.r.wasted += u64::from(ok);
                    continue;
                }
                let ended = if ok { Ended::Served } else { Ended::Rejected };
                clients.outcome(call, ended, &mut engine, &clock);
            }
            Ev::Timeout { call, tag } => {
                if clients.is_waiting(call, tag) {
                    clients.outcome(call, Ended::TimedOut, &mut engine, &clock);
                }
            }
            Ev::DropStart | Ev::DropEnd => {
                let capacity = match event {
                    Ev::DropStart => config.drop_capacity(),
                    _ => 1.0,
                };
                for (request, time) in server.set_capacity(capacity, &mut service) {
                    engine.schedule(now.saturating_add(time), Ev::Finish(request));
                }
            }
            Ev::Sample => {
                samples.push(clients.limit_now());
                let next = now.saturating_add(step);
                if next <= duration {
                    engine.schedule(next, Ev::Sample);
                }
            }
        }
    }
    let buckets = usize::try_from(duration.div_ceil(bucket)).unwrap_or(usize::MAX);
    Ok(clients.finish(
        buckets,
        limited.then(|| limit_trace(samples, step, (down, up), duration)),
    ))
}

impl Clients {
    /// Starts a call from `client` at `now` (no control refuses it: the
    /// policies have none).
    fn start(&mut self, client: u32, now: Nanos, clock: &SimClock) -> u32 {
        self.r.calls += 1;
        let policy = &self.policies[client as usize];
        let state = policy.start(clock, None);
        let call = Call {
            client,
            start: now,
            tag: 0,
            waiting: false,
            state,
            ticket: Ticket::FREE,
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

    fn is_waiting(&self, id: u32, tag: u32) -> bool {
        matches!(self.calls.get(id as usize), Some(Some(c)) if c.waiting && c.tag == tag)
    }

    /// The limits now, summed over the clients.
    fn limit_now(&self) -> u32 {
        self.policies
            .iter()
            .filter_map(|p| p.limits().concurrency_limit())
            .map(ConcurrencyLimit::limit)
            .fold(0u32, u32::saturating_add)
    }

    /// Call `id` makes its next attempt now: a slot of its policy's limit
    /// first (a refusal ends the call, shed), then the request.
    fn send(
        &mut self,
        id: u32,
        engine: &mut Engine<Ev>,
        server: &mut Server<Request>,
        service: &mut Rng,
        clock: &SimClock,
    ) -> Result<(), SimError> {
        let Some(Some(call)) = self.calls.get_mut(id as usize) else {
            return Ok(());
        };
        let policy = &self.policies[call.client as usize];
        // The gate, as the executors ask it (a slot now or never here).
        match policy.limits().admit_now(&[], clock) {
            Ok(ticket) => {
                if let Some(limit) = policy.limits().concurrency_limit() {
                    // One thread: nothing takes or gives back a slot, or
                    // moves the limit, between the acquisition and this
                    // reading, so this is the count with the new attempt.
                    let in_flight = limit.in_flight();
                    if in_flight > limit.limit() {
                        self.over_limit += 1;
                    }
                    self.max_in_flight = self.max_in_flight.max(in_flight);
                }
                call.ticket = ticket;
            }
            Err(_refused) => {
                // StopReason::LimitReached: the call fails at once.
                policy.abandon(&mut call.state);
                self.r.shed += 1;
                if call.state.attempts() > 0 {
                    self.r.shed_retries += 1;
                }
                self.end(id);
                return Ok(());
            }
        }
        policy.attempt_starting(&mut call.state, clock);
        let now = engine.now();
        self.r.attempts += 1;
        if self.r.attempts > check::MAX_ATTEMPTS {
            return Err(SimError::TooMuchWork {
                scenario: "overload",
                limit: check::MAX_ATTEMPTS,
            });
        }
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1);
        call.tag = tag;
        call.waiting = true;
        engine.schedule(
            now.saturating_add(self.timeout),
            Ev::Timeout { call: id, tag },
        );
        match server.arrive(Request { call: id, tag }, service) {
            Arrival::Started(request, time) => {
                engine.schedule(now.saturating_add(time), Ev::Finish(request));
            }
            Arrival::Queued => {}
            Arrival::Rejected(request) => engine.schedule(
                now.saturating_add(self.rtt),
                Ev::Response {
                    call: request.call,
                    tag,
                    ok: false,
                },
            ),
        }
        Ok(())
    }

    /// The attempt in flight of call `id` ended: its slot goes back with
    /// what it showed, and the policy decides what follows.
    fn outcome(&mut self, id: u32, ended: Ended, engine: &mut Engine<Ev>, clock: &SimClock) {
        let Some(Some(call)) = self.calls.get_mut(id as usize) else {
            return;
        };
        call.waiting = false;
        let verdict = if ended == Ended::Served {
            Verdict::Success
        } else {
            Verdict::Retry
        };
        // A 503 is an overload status, a timeout a drop (as the executors
        // finish a timed-out attempt's ticket).
        let ticket = std::mem::take(&mut call.ticket);
        match ended {
            Ended::TimedOut => ticket.timed_out(clock),
            Ended::Rejected => ticket.end(verdict, true),
            Ended::Served => ticket.end(verdict, false),
        }
        match ended {
            Ended::Rejected => self.r.rejected += 1,
            Ended::TimedOut => self.r.timed_out += 1,
            Ended::Served => {}
        }
        let now = engine.now();
        let policy = &self.policies[call.client as usize];
        match policy.decide(&mut call.state, verdict, clock) {
            Decision::Retry(delay) => {
                engine.schedule(now.saturating_add(nanos(delay)), Ev::Send(id));
                return;
            }
            Decision::Succeed => {
                let latency = now.saturating_sub(call.start);
                self.r.succeeded += 1;
                self.r.successes_per_bucket.add(now);
                self.per_bucket.record(now, latency);
                if let Some(phase) = self.phases.of(now) {
                    self.successes[phase as usize] += 1;
                    self.latency[phase as usize].record(latency);
                }
            }
            Decision::Stop(_) => {}
        }
        self.end(id);
    }

    fn end(&mut self, id: u32) {
        if let Some(slot) = self.calls.get_mut(id as usize) {
            *slot = None;
            self.free.push(id);
        }
    }

    fn finish(mut self, buckets: usize, trace: Option<LimitTrace>) -> OverloadStrategyResult {
        let mut r = self.r;
        r.successes_per_bucket.extend_to(buckets);
        self.per_bucket.finish(buckets);
        let ms = |v: &[Option<Nanos>]| -> Vec<Option<f64>> {
            v.iter().map(|n| n.map(|n| n as f64 / 1e6)).collect()
        };
        r.p50_per_bucket_ms =
            ms(&self.per_bucket.p50()[..buckets.min(self.per_bucket.p50().len())]);
        r.p99_per_bucket_ms =
            ms(&self.per_bucket.p99()[..buckets.min(self.per_bucket.p99().len())]);
        let rate = |phase: Phase, (a, b): (Nanos, Nanos)| {
            self.successes[phase as usize] as f64 / secs(b.saturating_sub(a)).max(1e-9)
        };
        r.goodput_before = rate(Phase::Before, self.phases.before);
        r.goodput_during = rate(Phase::During, self.phases.drop);
        r.goodput_after = rate(Phase::After, self.phases.after);
        let q = |h: &LatencyHistogram, q: f64| h.quantile(q).map(|n| n as f64 / 1e6);
        let [before, during, after] = &self.latency;
        (r.p50_before_ms, r.p99_before_ms) = (q(before, 0.5), q(before, 0.99));
        (r.p50_during_ms, r.p99_during_ms) = (q(during, 0.5), q(during, 0.99));
        (r.p50_after_ms, r.p99_after_ms) = (q(after, 0.5), q(after, 0.99));
        r.limit = trace.map(|mut t| {
            t.max_in_flight = self.max_in_flight;
            t.over_limit = self.over_limit;
            t
        });
        r
    }
}

/// The limit's series and its levels and moves (see [`LimitTrace`]).
fn limit_trace(
    samples: Vec<u32>,
    step: Nanos,
    (down, up): (Nanos, Nanos),
    end: Nanos,
) -> LimitTrace {
    let at = |i: usize| i as u64 * step;
    let mean = |from: Nanos, to: Nanos| {
        let (sum, n) = samples
            .iter()
            .enumerate()
            .filter(|&(i, _)| (from..to).contains(&at(i)))
            .fold((0u64, 0u64), |(s, n), (_, &v)| (s + u64::from(v), n + 1));
        if n == 0 { 0.0 } else { sum as f64 / n as f64 }
    };
    let before = mean(down / 2, down);
    let during = mean(down + (up - down) / 2, up);
    let after = mean(up + (end - up) / 2, end);
    let lowest_during = samples
        .iter()
        .enumerate()
        .filter(|&(i, _)| (down..up).contains(&at(i)))
        .map(|(_, &v)| v)
        .min()
        .unwrap_or(0);
    let first = |from: Nanos, to: Nanos, hit: &dyn Fn(f64) -> bool| {
        samples
            .iter()
            .enumerate()
            .find(|&(i, &v)| (from..to).contains(&at(i)) && hit(f64::from(v)))
            .map(|(i, _)| secs(at(i) - from))
    };
    let halfway_down = (before + during) / 2.0;
    let drop_follow_s = (during < before)
        .then(|| first(down, up, &|v| v <= halfway_down))
        .flatten();
    let halfway_up = (during + after) / 2.0;
    let recovery_follow_s = (after > during)
        .then(|| first(up, end.saturating_add(1), &|v| v >= halfway_up))
        .flatten();
    LimitTrace {
        step_s: secs(step),
        samples,
        max_in_flight: 0,
        over_limit: 0,
        before,
        during,
        lowest_during,
        after,
        drop_follow_s,
        recovery_follow_s,
    }
}

/// Netflix Technology Blog, "Performance Under Load" (2018): without a
/// limit, arrivals above a service's capacity grow its queue and its
/// latency until requests time out; an adaptive concurrency limit finds the
/// concurrency the service can take and sheds the excess, so latency stays
/// low while the service stays busy. Held against the run when it has the
/// strategy without a limit and at least one adaptive strategy without
/// retries (found by name and kind); the rules are in the module docs.
fn performance_under_load(
    config: &OverloadConfig,
    results: &[OverloadStrategyResult],
) -> Option<Agreement> {
    let none = results.iter().find(|r| r.name == NO_LIMIT)?;
    let adaptive: Vec<&OverloadStrategyResult> = results
        .iter()
        .filter(|r| r.adaptive && r.max_attempts == 1)
        .collect();
    if adaptive.is_empty() {
        return None;
    }
    let unloaded = none.p99_before_ms?;
    let drop_capacity = config.capacity_in_drop().min(config.call_rate);
    let p99 = |r: &OverloadStrategyResult| r.p99_during_ms.unwrap_or(f64::INFINITY);
    let keeps_goodput = |r: &OverloadStrategyResult| {
        r.goodput_before >= BUSY * none.goodput_before
            && r.goodput_after >= BUSY * none.goodput_after
            && r.goodput_during >= BUSY * drop_capacity
    };
    let lowest = |rs: &mut dyn Iterator<Item = &OverloadStrategyResult>| {
        rs.filter(|r| keeps_goodput(r))
            .min_by(|a, b| p99(a).total_cmp(&p99(b)))
            .map(|r| (r.name.clone(), p99(r)))
    };
    let queued = p99(none) >= UNPROTECTED_P99 * unloaded;
    let best_adaptive = lowest(&mut adaptive.iter().copied());
    let best = lowest(&mut results.iter());
    let agrees = queued
        && best_adaptive
            .as_ref()
            .is_some_and(|(_, p)| *p <= PROTECTED_P99 * unloaded);
    let fmt_p99 = |r: &OverloadStrategyResult| {
        r.p99_during_ms
            .map_or_else(|| "no success".to_owned(), |v| format!("{v:.0} ms"))
    };
    let each = adaptive
        .iter()
        .map(|r| {
            let mut text = format!("{} {} at {:.0}/s", r.name, fmt_p99(r), r.goodput_during);
            let shed = 1.0 - r.goodput_before.min(r.goodput_after) / none.goodput_before.max(1e-9);
            if !keeps_goodput(r) && r.goodput_during >= BUSY * drop_capacity {
                text.push_str(&format!(
                    " but up to {:.0} % less goodput outside the drop",
                    shed * 100.0
                ));
            }
            text
        })
        .collect::<Vec<_>>()
        .join(", ");
    let fmt_best = |b: &Option<(String, f64)>| match b {
        Some((name, p)) => format!("{name} ({:.1}x)", p / unloaded),
        None => "none".to_owned(),
    };
    let lowest_text = if best_adaptive.is_some() && best == best_adaptive {
        format!("{}, among all strategies too", fmt_best(&best))
    } else {
        format!(
            "{} among the adaptive limits, {} among all strategies",
            fmt_best(&best_adaptive),
            fmt_best(&best)
        )
    };
    Some(Agreement {
        source: "Netflix Technology Blog, \"Performance Under Load\" (Landau, Thurston, Bozarth, 2018)",
        claim: "without a limit, arrivals above a service's capacity grow its queue and latency \
                until requests time out; an adaptive concurrency limit finds the concurrency the \
                service can take and sheds the excess, keeping latency low while the service \
                stays busy"
            .to_owned(),
        criterion: format!(
            "without a limit the p99 in the drop is at least {UNPROTECTED_P99:.0}x the unloaded \
             p99, and some adaptive limit that keeps at least {busy:.0} % of the goodput without \
             a limit before and after the drop, and {busy:.0} % of the capacity left in it, keeps \
             the p99 in the drop within {PROTECTED_P99:.0}x the unloaded p99 (thresholds of the \
             simulator, not of the blog)",
            busy = BUSY * 100.0
        ),
        agrees,
        detail: format!(
            "unloaded p99 {unloaded:.0} ms; in the drop (capacity {drop_capacity:.0} calls/s) no \
             limit: p99 {}, goodput {:.0}/s, {} attempts timed out; keeping goodput, the lowest \
             p99 in the drop: {lowest_text}; {each}",
            fmt_p99(none),
            none.goodput_during,
            none.timed_out,
        ),
    })
}

/// Without a limit, the p99 in the drop is at least this many times the
/// unloaded p99 for the comparison with the blog (the queue grew).
pub const UNPROTECTED_P99: f64 = 5.0;
/// With the best adaptive limit, at most this many times.
pub const PROTECTED_P99: f64 = 2.0;
/// The share of goodput that counts as kept in the comparison (see the
/// [module docs](self)).
pub const BUSY: f64 = 0.9;
