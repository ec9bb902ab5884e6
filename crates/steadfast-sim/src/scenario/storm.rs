//! `storm`: a retry storm during an incident.
//!
//! Calls arrive as a Poisson process at `call_rate` per second, each from one
//! of `clients` clients picked at random, for `duration`. Every client has its
//! own [`RetryPolicy`] (attempts, the shared backoff schedule) and its own
//! retry control, as a real client process would. Each attempt goes to one
//! [`Server`] with fixed capacity (see [`crate::server`]): concurrency slots, a
//! bounded queue, and fast rejections when both are full. Responses reach the
//! client after `network_rtt`.
//!
//! During the `incident` the server is either down (every attempt fails fast,
//! and the requests in service or waiting when it went down fail) or
//! overloaded (its capacity drops to a fraction). Each strategy runs on the
//! same seed, so they see the same calls.
//!
//! The simulator decides nothing itself: a call is admitted or refused by
//! `RetryPolicy::admit` (the control), and after each attempt the policy's
//! `decide` says succeed, retry after a delay (the schedule's), or stop
//! (attempts exhausted, or the control refused).
//!
//! The numbers:
//! - **load amplification**: attempts sent to the server during the incident
//!   divided by the calls started during it;
//! - **success rate**: calls that succeeded, over the whole run and over the
//!   calls started during the incident;
//! - **time to recover**: from the end of the incident to the start of the
//!   first bucket after which every bucket's calls succeed at least at
//!   `recovery_threshold` (calls counted in the bucket they started in).
//!
//! ```
//! use std::time::Duration;
//! use steadfast_sim::storm::{self, Incident, StormConfig};
//!
//! let config = StormConfig {
//!     call_rate: 500.0,
//!     duration: Duration::from_secs(6),
//!     incident: Incident::outage(Duration::from_secs(2), Duration::from_secs(2)),
//!     ..StormConfig::default()
//! };
//! let result = storm::run(&config)?;
//! let plain = result.strategy("3 attempts").unwrap();
//! assert!(plain.amplification > 2.5);
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};
use steadfast::backoff::{Backoff, Schedule};
use steadfast::control::{AdaptiveThrottle, RetryBudget, TokenBucket};
use steadfast::policy::{CallState, Decision};
use steadfast::{RetryControl, RetryPolicy, StopReason, Verdict};

use super::{ScenarioResult, SeededCalls, StrategyResult, mix, run_strategies};
use crate::engine::{Engine, Nanos, nanos, secs};
use crate::error::check;
use crate::metrics::Series;
use crate::server::{Arrival, Server, ServerConfig};
use crate::{Agreement, SimError};

const SCOPE: &str = "storm config";

/// What goes wrong with the server during the incident (see [`Incident`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IncidentKind {
    /// The server is down: every attempt fails at once.
    Outage,
    /// The server keeps only this fraction (0..=1) of its concurrency.
    Overload {
        /// The fraction of capacity left.
        capacity: f64,
    },
}

/// The incident: when it starts, how long it lasts, and what it is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Incident {
    /// When it starts.
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub start: Duration,
    /// How long it lasts.
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub length: Duration,
    /// What it is.
    pub kind: IncidentKind,
}

impl Incident {
    /// An outage from `start` for `length`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let i = steadfast_sim::storm::Incident::outage(Duration::from_secs(30), Duration::from_secs(30));
    /// assert_eq!(i.end(), Duration::from_secs(60));
    /// ```
    #[must_use]
    pub const fn outage(start: Duration, length: Duration) -> Self {
        Self {
            start,
            length,
            kind: IncidentKind::Outage,
        }
    }

    /// An overload from `start` for `length` that leaves `capacity` (0..=1)
    /// of the server's concurrency.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_sim::storm::{Incident, IncidentKind};
    /// let i = Incident::overload(Duration::from_secs(30), Duration::from_secs(30), 0.25);
    /// assert_eq!(i.kind, IncidentKind::Overload { capacity: 0.25 });
    /// ```
    #[must_use]
    pub const fn overload(start: Duration, length: Duration, capacity: f64) -> Self {
        Self {
            start,
            length,
            kind: IncidentKind::Overload { capacity },
        }
    }

    /// When it ends.
    #[must_use]
    pub fn end(&self) -> Duration {
        self.start.saturating_add(self.length)
    }
}

/// Which retry control each client gets (one instance per client, with
/// these settings).
///
/// ```
/// use steadfast_sim::storm::{StormControl, StormStrategy};
/// let budget_of_20 = StormStrategy {
///     name: "20 % budget".into(),
///     max_attempts: 3,
///     control: StormControl::RetryBudget { percent: 20.0, min_per_sec: 0, ttl: std::time::Duration::from_secs(10) },
/// };
/// assert_eq!(budget_of_20.max_attempts, 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StormControl {
    /// No control: retries up to the attempt limit.
    None,
    /// gRFC A6 retry throttling ([`TokenBucket`]).
    TokenBucket {
        /// `maxTokens` (0 < n <= 1000).
        max_tokens: u32,
        /// `tokenRatio` (> 0, 3 decimals).
        token_ratio: f64,
    },
    /// A retry budget ([`RetryBudget`]): retries as a percentage of calls.
    RetryBudget {
        /// Retries allowed per 100 calls.
        percent: f64,
        /// Retries allowed per second regardless of calls.
        min_per_sec: u32,
        /// The window calls and retries are counted over.
        #[serde(serialize_with = "crate::serde_util::secs")]
        ttl: Duration,
    },
    /// Client-side adaptive throttling from the SRE book ([`AdaptiveThrottle`]).
    AdaptiveThrottle {
        /// The multiplier `K` (>= 1).
        k: f64,
        /// The window requests and accepts are counted over.
        #[serde(serialize_with = "crate::serde_util::secs")]
        window: Duration,
    },
}

impl StormControl {
    pub(crate) fn build(
        self,
        clock: &crate::engine::SimClock,
        seed: u64,
    ) -> Result<Option<Arc<dyn RetryControl>>, SimError> {
        Ok(match self {
            Self::None => None,
            Self::TokenBucket {
                max_tokens,
                token_ratio,
            } => Some(Arc::new(
                TokenBucket::builder()
                    .max_tokens(max_tokens)
                    .token_ratio(token_ratio)
                    .build()?,
            )),
            Self::RetryBudget {
                percent,
                min_per_sec,
                ttl,
            } => Some(Arc::new(
                RetryBudget::builder()
                    .percent(percent)
                    .min_per_sec(min_per_sec)
                    .ttl(ttl)
                    .build_with_clock(clock.clone())?,
            )),
            Self::AdaptiveThrottle { k, window } => Some(Arc::new(
                AdaptiveThrottle::builder()
                    .k(k)
                    .window(window)
                    .seed(seed)
                    .build_with_clock(clock.clone())?,
            )),
        })
    }
}

/// A retry strategy: attempts (counting the first) and a control (example on
/// [`StormControl`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StormStrategy {
    /// The name shown in reports.
    pub name: String,
    /// Attempts per call, counting the first (1 = no retries).
    pub max_attempts: u32,
    /// The retry control each client gets.
    pub control: StormControl,
}

impl StormStrategy {
    /// The five strategies compared by default: no retries; 3 attempts with
    /// no control; 3 attempts with gRPC's token bucket (`maxTokens` 10,
    /// `tokenRatio` 0.1, the spec's example); with a 10 % retry budget
    /// (no per-second floor, 10 s window: the SRE book's per-client budget);
    /// with client-side throttling (`K` = 2, 2-minute window: the SRE book's).
    ///
    /// ```
    /// let names: Vec<String> = steadfast_sim::storm::StormStrategy::standard().into_iter().map(|s| s.name).collect();
    /// assert_eq!(names, ["no retries", "3 attempts", "token bucket", "retry budget", "adaptive throttle"]);
    /// ```
    #[must_use]
    pub fn standard() -> Vec<Self> {
        let with = |name: &str, max_attempts, control| Self {
            name: name.to_owned(),
            max_attempts,
            control,
        };
        vec![
            with(NO_RETRIES, 1, StormControl::None),
            with(PLAIN, 3, StormControl::None),
            with(
                TOKEN_BUCKET,
                3,
                StormControl::TokenBucket {
                    max_tokens: 10,
                    token_ratio: 0.1,
                },
            ),
            with(
                RETRY_BUDGET,
                3,
                StormControl::RetryBudget {
                    percent: 10.0,
                    min_per_sec: 0,
                    ttl: Duration::from_secs(10),
                },
            ),
            with(
                CLIENT_THROTTLING,
                3,
                StormControl::AdaptiveThrottle {
                    k: 2.0,
                    window: Duration::from_secs(120),
                },
            ),
        ]
    }
}

/// The name of the no-retry strategy in [`StormStrategy::standard`].
pub const NO_RETRIES: &str = "no retries";
/// The name of the plain 3-attempt strategy in [`StormStrategy::standard`].
pub const PLAIN: &str = "3 attempts";
/// The name of the token-bucket strategy in [`StormStrategy::standard`].
pub const TOKEN_BUCKET: &str = "token bucket";
/// The name of the retry-budget strategy in [`StormStrategy::standard`].
pub const RETRY_BUDGET: &str = "retry budget";
/// The name of the client-side throttling strategy in [`StormStrategy::standard`].
pub const CLIENT_THROTTLING: &str = "adaptive throttle";

/// The `storm` scenario's settings; every field is public, so a caller (the
/// CLI) sets the ones it was given over [`Default`].
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::storm::{Incident, StormConfig};
/// let config = StormConfig {
///     call_rate: 5_000.0,
///     incident: Incident::overload(Duration::from_secs(20), Duration::from_secs(40), 0.5),
///     ..StormConfig::default()
/// };
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Serialize)]
pub struct StormConfig {
    /// Client processes, each with its own policy and control (default 100).
    pub clients: u32,
    /// Calls per second, all clients together (default 2,000).
    pub call_rate: f64,
    /// Calls start during this time; the run then lets them finish (default
    /// 180 s: the incident, then two minutes, the adaptive throttle's window).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub duration: Duration,
    /// The server (default: 30 slots, a queue of 30, exponential 10 ms:
    /// about 3,000 requests per second, so the calls use two thirds of it).
    pub server: ServerConfig,
    /// Added to every response, success or rejection (default 1 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub network_rtt: Duration,
    /// The incident (default an outage from 30 s to 60 s).
    pub incident: Incident,
    /// The backoff every strategy retries with (default `Backoff::default()`:
    /// exponential from 100 ms, ×2, max 10 s, full jitter).
    #[serde(serialize_with = "debug_text")]
    pub backoff: Arc<dyn Schedule>,
    /// The strategies to compare (default [`StormStrategy::standard`]).
    pub strategies: Vec<StormStrategy>,
    /// The width of the buckets of the time series and of the recovery
    /// check (default 1 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub bucket: Duration,
    /// The share of a bucket's calls that must succeed for it to count as
    /// recovered (default 0.99).
    pub recovery_threshold: f64,
    /// How finely the clock the controls read follows the simulation
    /// (default 100 µs; see [`Engine::with_clock_resolution`]). The
    /// controls count in slots of a second or more, so this changes no
    /// decision that matters; it is kept so that earlier runs reproduce.
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub clock_resolution: Duration,
    /// The seed (default 1).
    pub seed: u64,
}

fn debug_text<S: Serializer, T: fmt::Debug + ?Sized>(
    value: &Arc<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{value:?}"))
}

impl fmt::Debug for StormConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StormConfig")
            .field("clients", &self.clients)
            .field("call_rate", &self.call_rate)
            .field("duration", &self.duration)
            .field("server", &self.server)
            .field("network_rtt", &self.network_rtt)
            .field("incident", &self.incident)
            .field("backoff", &self.backoff)
            .field("strategies", &self.strategies)
            .field("bucket", &self.bucket)
            .field("recovery_threshold", &self.recovery_threshold)
            .field("clock_resolution", &self.clock_resolution)
            .field("seed", &self.seed)
            .finish()
    }
}

impl Default for StormConfig {
    fn default() -> Self {
        Self {
            clients: 100,
            call_rate: 2000.0,
            duration: Duration::from_secs(180),
            server: ServerConfig {
                concurrency: 30,
                queue_limit: 30,
                latency: crate::Latency::Exponential {
                    mean: Duration::from_millis(10),
                },
            },
            network_rtt: Duration::from_millis(1),
            incident: Incident::outage(Duration::from_secs(30), Duration::from_secs(30)),
            backoff: Arc::new(Backoff::default()),
            strategies: StormStrategy::standard(),
            bucket: Duration::from_secs(1),
            recovery_threshold: 0.99,
            clock_resolution: Duration::from_micros(100),
            seed: 1,
        }
    }
}

impl StormConfig {
    /// Checks every setting; the first broken rule is the error. (The
    /// controls' own settings are checked by their builders when the run
    /// starts, and come back as [`SimError::Core`].)
    ///
    /// ```
    /// use steadfast_sim::storm::StormConfig;
    /// let config = StormConfig { call_rate: f64::NAN, ..StormConfig::default() };
    /// assert!(config.validate().unwrap_err().to_string().contains("`call_rate`"));
    /// ```
    pub fn validate(&self) -> Result<(), SimError> {
        check::clients(SCOPE, self.clients)?;
        check::finite_positive(SCOPE, "call_rate", self.call_rate)?;
        check::positive_duration(SCOPE, "duration", self.duration)?;
        check::positive_duration(SCOPE, "bucket", self.bucket)?;
        check::fraction(SCOPE, "recovery_threshold", self.recovery_threshold)?;
        if self.clock_resolution > Duration::from_secs(1) {
            return Err(SimError::config(
                SCOPE,
                "clock_resolution",
                "must be at most 1 s",
                self.clock_resolution,
            ));
        }
        self.server.validate_capacity()?;
        if let IncidentKind::Overload { capacity } = self.incident.kind {
            check::fraction(SCOPE, "incident.capacity", capacity)?;
        }
        if self.incident.end() > self.duration {
            return Err(SimError::config(
                SCOPE,
                "incident",
                "must end within `duration`",
                self.incident.end(),
            ));
        }
        // A bound on the work: the expected number of calls.
        check::calls(SCOPE, "call_rate", self.call_rate, self.duration)?;
        check::buckets(SCOPE, "duration", self.duration, self.bucket)?;
        check::strategies(SCOPE, &self.strategies, |s| s.max_attempts)?;
        Ok(())
    }
}

/// One strategy's numbers (example in the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StormStrategyResult {
    /// The strategy's name.
    pub name: String,
    /// Calls started.
    pub calls: u64,
    /// Attempts sent to the server.
    pub attempts: u64,
    /// Calls refused before their first attempt (client-side throttling).
    pub refused_locally: u64,
    /// Calls that stopped because a control refused a retry.
    pub retries_refused: u64,
    /// Calls that stopped with their attempts exhausted.
    pub exhausted: u64,
    /// Calls started during the incident.
    pub incident_calls: u64,
    /// Attempts sent during the incident.
    pub incident_attempts: u64,
    /// `incident_attempts / incident_calls`.
    pub amplification: f64,
    /// Calls that succeeded, over all calls.
    pub success_rate: f64,
    /// Calls started during the incident that succeeded, over those calls.
    pub incident_success_rate: f64,
    /// Seconds from the end of the incident until the calls succeed again
    /// (see the module docs); `None` if they never did before the end.
    pub recovery_s: Option<f64>,
    /// Attempts sent per bucket.
    pub attempts_per_bucket: Series,
    /// Calls started per bucket.
    pub calls_per_bucket: Series,
    /// Calls started per bucket that succeeded.
    pub successes_per_bucket: Series,
}

impl StormStrategyResult {
    /// The share of the calls started in each bucket that succeeded (1 for
    /// an empty bucket).
    ///
    /// ```no_run
    /// # let result = steadfast_sim::storm::run(&Default::default())?;
    /// let rates = result.strategies[0].success_rate_per_bucket();
    /// assert!(rates.iter().all(|r| (0.0..=1.0).contains(r)));
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    #[must_use]
    pub fn success_rate_per_bucket(&self) -> Vec<f64> {
        self.calls_per_bucket
            .counts()
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                if n == 0 {
                    1.0
                } else {
                    self.successes_per_bucket.count_at(i) as f64 / n as f64
                }
            })
            .collect()
    }
}

/// The `storm` scenario's result (see [`run`]): its settings, one
/// [`StormStrategyResult`] per strategy, and how the numbers compare with the SRE book.
pub type StormResult = ScenarioResult<StormConfig, StormStrategyResult>;

impl StrategyResult for StormStrategyResult {
    fn name(&self) -> &str {
        &self.name
    }
}

/// Runs every configured strategy on the same seed (example in the
/// [module docs](self)).
///
/// # Errors
/// [`SimError::Config`] for a bad setting, [`SimError::Core`] when a
/// control's builder refuses its settings.
pub fn run(config: &StormConfig) -> Result<StormResult, SimError> {
    config.validate()?;
    run_strategies(config, &config.strategies, |s| run_one(config, s), sre_book)
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    /// The next call arrives.
    Arrival,
    /// A call sends an attempt.
    Send(u32),
    /// The server finished serving a call's attempt (started in `epoch`).
    Finish { call: u32, epoch: u32 },
    /// A call hears back: success or failure.
    Response { call: u32, ok: bool },
    /// The incident starts.
    IncidentStart,
    /// The incident ends.
    IncidentEnd,
}

struct Call {
    client: u32,
    start: Nanos,
    state: CallState,
}

type ClientPolicy = RetryPolicy<SeededCalls<Arc<dyn Schedule>>>;

/// Counters for one run.
struct Tally {
    r: StormStrategyResult,
    incident: (Nanos, Nanos),
    over_limit: bool,
}

impl Tally {
    fn in_incident(&self, t: Nanos) -> bool {
        (self.incident.0..self.incident.1).contains(&t)
    }

    fn call_started(&mut self, at: Nanos) {
        self.r.calls += 1;
        self.r.calls_per_bucket.add(at);
        if self.in_incident(at) {
            self.r.incident_calls += 1;
        }
    }

    fn attempt(&mut self, at: Nanos) {
        self.r.attempts += 1;
        if self.r.attempts > check::MAX_ATTEMPTS {
            self.over_limit = true;
        }
        self.r.attempts_per_bucket.add(at);
        if self.in_incident(at) {
            self.r.incident_attempts += 1;
        }
    }

    fn success(&mut self, started: Nanos, incident_successes: &mut u64) {
        self.r.successes_per_bucket.add(started);
        if self.in_incident(started) {
            *incident_successes += 1;
        }
    }
}

fn run_one(
    config: &StormConfig,
    strategy: &StormStrategy,
) -> Result<StormStrategyResult, SimError> {
    let mut engine: Engine<Ev> =
        Engine::new(config.seed).with_clock_resolution(config.clock_resolution);
    let clock = engine.clock().clone();
    let policies: Vec<ClientPolicy> = (0..config.clients)
        .map(|i| {
            let seed = mix(config.seed, u64::from(i));
            let mut builder =
                RetryPolicy::with_schedule(SeededCalls::new(config.backoff.clone(), seed))
                    .max_attempts(strategy.max_attempts);
            if let Some(control) = strategy.control.build(&clock, seed)? {
                builder = builder.control(control);
            }
            Ok(builder.build()?)
        })
        .collect::<Result<_, SimError>>()?;
    let mut server: Server<u32> = Server::new(&config.server)?;
    // Separate sources, so every strategy sees the same calls at the same
    // times and the same service times, however many attempts it makes.
    let mut arrivals = engine.rng().fork();
    let mut service = engine.rng().fork();
    let mut epoch = 0u32;
    let bucket = nanos(config.bucket);
    let duration = nanos(config.duration);
    let rtt = nanos(config.network_rtt);
    let incident = (nanos(config.incident.start), nanos(config.incident.end()));
    let mean_gap = 1e9 / config.call_rate;
    let mut tally = Tally {
        r: StormStrategyResult {
            name: strategy.name.clone(),
            calls: 0,
            attempts: 0,
            refused_locally: 0,
            retries_refused: 0,
            exhausted: 0,
            incident_calls: 0,
            incident_attempts: 0,
            amplification: 0.0,
            success_rate: 0.0,
            incident_success_rate: 0.0,
            recovery_s: None,
            attempts_per_bucket: Series::new(bucket),
            calls_per_bucket: Series::new(bucket),
            successes_per_bucket: Series::new(bucket),
        },
        incident,
        over_limit: false,
    };
    let (mut successes, mut incident_successes) = (0u64, 0u64);
    let mut calls: Vec<Option<Call>> = Vec::new();
    let mut free: Vec<u32> = Vec::new();

    engine.schedule(incident.0, Ev::IncidentStart);
    engine.schedule(incident.1, Ev::IncidentEnd);
    engine.schedule(0, Ev::Arrival);
    while let Some((now, event)) = engine.pop() {
        if tally.over_limit {
            return Err(SimError::TooMuchWork {
                scenario: "storm",
                limit: check::MAX_ATTEMPTS,
            });
        }
        match event {
            Ev::Arrival => {
                let gap = -mean_gap * (1.0 - arrivals.unit_f64()).ln();
                let client = (arrivals.next_u64() % u64::from(config.clients)) as u32;
                let next = now.saturating_add(gap as u64);
                if next < duration {
                    engine.schedule(next, Ev::Arrival);
                }
                tally.call_started(now);
                let policy = &policies[client as usize];
                if policy.admit().is_err() {
                    tally.r.refused_locally += 1;
                    continue;
                }
                let call = Call {
                    client,
                    start: now,
                    state: policy.start(&clock, None),
                };
                let id = match free.pop() {
                    Some(id) => {
                        calls[id as usize] = Some(call);
                        id
                    }
                    None => {
                        calls.push(Some(call));
                        u32::try_from(calls.len() - 1).unwrap_or(u32::MAX)
                    }
                };
                send(
                    &mut engine,
                    &mut server,
                    &mut service,
                    &mut tally,
                    id,
                    epoch,
                    rtt,
                );
            }
            Ev::Send(id) => {
                send(
                    &mut engine,
                    &mut server,
                    &mut service,
                    &mut tally,
                    id,
                    epoch,
                    rtt,
                );
            }
            Ev::Finish {
                call,
                epoch: started_in,
            } => {
                let ok = started_in == epoch && server.is_up();
                let next = server.finish(&mut service);
                engine.schedule(now.saturating_add(rtt), Ev::Response { call, ok });
                if let Some((next, service)) = next {
                    engine.schedule(
                        now.saturating_add(service),
                        Ev::Finish { call: next, epoch },
                    );
                }
            }
            Ev::Response { call: id, ok } => {
                let Some(slot) = calls.get_mut(id as usize) else {
                    continue;
                };
                let Some(call) = slot.as_mut() else {
                    continue;
                };
                let policy = &policies[call.client as usize];
                let verdict = if ok { Verdict::Success } else { Verdict::Retry };
                match policy.decide(&mut call.state, verdict, &clock) {
                    Decision::Retry(delay) => {
                        engine.schedule(now.saturating_add(nanos(delay)), Ev::Send(id));
                        continue;
                    }
                    Decision::Succeed => {
                        successes += 1;
                        tally.success(call.start, &mut incident_successes);
                    }
                    Decision::Stop(StopReason::Throttled) => tally.r.retries_refused += 1,
                    Decision::Stop(_) => tally.r.exhausted += 1,
                }
                *slot = None;
                free.push(id);
            }
            Ev::IncidentStart => match config.incident.kind {
                IncidentKind::Outage => {
                    epoch += 1;
                    for id in server.set_up(false) {
                        engine.schedule(
                            now.saturating_add(rtt),
                            Ev::Response {
                                call: id,
                                ok: false,
                            },
                        );
                    }
                }
                IncidentKind::Overload { capacity } => {
                    let started = server.set_capacity(capacity, &mut service);
                    schedule_started(&mut engine, now, started, epoch);
                }
            },
            Ev::IncidentEnd => {
                server.set_up(true);
                let started = server.set_capacity(1.0, &mut service);
                schedule_started(&mut engine, now, started, epoch);
            }
        }
    }

    let mut r = tally.r;
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    r.amplification = ratio(r.incident_attempts, r.incident_calls);
    r.success_rate = ratio(successes, r.calls);
    r.incident_success_rate = ratio(incident_successes, r.incident_calls);
    let buckets = usize::try_from(duration.div_ceil(bucket)).unwrap_or(usize::MAX);
    r.calls_per_bucket.extend_to(buckets);
    r.attempts_per_bucket.extend_to(buckets);
    r.successes_per_bucket.extend_to(buckets);
    r.recovery_s = recovery(&r, incident.1, bucket, buckets, config.recovery_threshold);
    Ok(r)
}

/// One attempt of call `id` reaches the server now.
#[inline]
fn send(
    engine: &mut Engine<Ev>,
    server: &mut Server<u32>,
    service: &mut steadfast::backoff::Rng,
    tally: &mut Tally,
    id: u32,
    epoch: u32,
    rtt: Nanos,
) {
    let now = engine.now();
    tally.attempt(now);
    match server.arrive(id, service) {
        Arrival::Started(id, time) => {
            engine.schedule(now.saturating_add(time), Ev::Finish { call: id, epoch });
        }
        Arrival::Queued => {}
        Arrival::Rejected(id) => {
            engine.schedule(
                now.saturating_add(rtt),
                Ev::Response {
                    call: id,
                    ok: false,
                },
            );
        }
    }
}

fn schedule_started(engine: &mut Engine<Ev>, now: Nanos, started: Vec<(u32, Nanos)>, epoch: u32) {
    for (call, service) in started {
        engine.schedule(now.saturating_add(service), Ev::Finish { call, epoch });
    }
}

/// Seconds from `end` to the start of the first bucket (starting at or after
/// `end`) from which every bucket up to the last full one meets `threshold`.
fn recovery(
    r: &StormStrategyResult,
    end: Nanos,
    bucket: Nanos,
    buckets: usize,
    threshold: f64,
) -> Option<f64> {
    let rates = r.success_rate_per_bucket();
    let first = usize::try_from(end.div_ceil(bucket)).unwrap_or(usize::MAX);
    if first >= buckets {
        return None;
    }
    let mut recovered_from = None;
    for i in (first..buckets).rev() {
        if rates.get(i).copied().unwrap_or(1.0) >= threshold {
            recovered_from = Some(i);
        } else {
            break;
        }
    }
    recovered_from.map(|i| secs((i as u64 * bucket).saturating_sub(end)))
}

/// The SRE book ("Handling Overload"): without a budget, retries at every
/// layer multiply load (3 attempts: up to 3x, when every attempt fails; this
/// run agrees when plain retries at least double it); a per-client retry
/// budget of 10 % bounds it at about 1.1x. Held against the run when it has the plain
/// and the retry-budget strategies (found by name).
fn sre_book(results: &[StormStrategyResult]) -> Option<Agreement> {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let plain = find(PLAIN)?;
    let budget = find(RETRY_BUDGET)?;
    let bucket = find(TOKEN_BUCKET);
    // "Multiply": at least double. Three attempts triple the load only when
    // every attempt fails (an outage); in an overload some succeed at once.
    let agrees = plain.amplification >= 2.0
        && budget.amplification <= 1.25
        && bucket.is_none_or(|b| b.amplification <= 1.25);
    Some(Agreement {
        source: "Beyer et al., Site Reliability Engineering (Google, 2016), ch. 21-22: retry budgets",
        claim: "plain retries multiply the load in an incident (3 attempts: up to 3x, when every attempt fails); a 10 % retry budget holds it to about 1.1x".to_owned(),
        criterion: "plain retries at least double the attempts per call started in the incident, \
                    and the retry budget (and the token bucket, if run) hold them to 1.25x or less"
            .to_owned(),
        agrees,
        detail: format!(
            "amplification during the incident: plain 3 attempts {:.2}x, retry budget {:.2}x{}",
            plain.amplification,
            budget.amplification,
            bucket.map_or_else(String::new, |b| format!(", token bucket {:.2}x", b.amplification)),
        ),
    })
}
