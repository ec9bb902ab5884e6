//! `metastable`: a short trigger, and a collapse that outlives it.
//!
//! The failure retry budgets exist to prevent (Bronson et al., "Metastable
//! Failures in Distributed Systems", HotOS 2021; Huang et al., "Metastable
//! Failures in the Wild", OSDI 2022): a short trigger pushes a server past
//! its capacity, callers time out and retry, the server keeps working on
//! requests whose callers have already given up, and the system stays down
//! **after the trigger is gone**, held there by its own retries.
//!
//! The model, on virtual time:
//! - **the server** ([`crate::server`]) has `concurrency` slots and a FIFO
//!   queue of up to `queue_limit` requests, and serves every request it
//!   queued whether or not its caller still waits (the sustaining effect),
//!   unless the request carries a propagated deadline that has passed when
//!   its turn comes: then it drops it unserved;
//! - **the clients**: calls arrive as a Poisson process at `call_rate` (by
//!   default 70 % of the server's capacity), each from one of `clients`
//!   clients, each with its own [`RetryPolicy`] and retry control. Every
//!   attempt has the policy's `attempt_timeout`; a response that comes later
//!   is wasted work. Between attempts the call waits the delay the policy's
//!   `decide` gives (the shared backoff schedule);
//! - **the trigger**: the server's capacity drops for a short time (10 s
//!   by default, to 30 %), then returns to normal.
//!
//! A strategy with a `deadline` gives each call one deadline, shared by its
//! attempts (an attempt gets what is left, cut by the attempt timeout; the
//! engine starts no retry that would begin past it), and sends the time left
//! with every attempt, encoded as a `grpc-timeout` value, so the server
//! knows when the caller will have given up: the core's deadline model.
//!
//! The simulator decides nothing itself: admission, every retry and every
//! stop come from [`RetryPolicy::admit`] and [`RetryPolicy::decide`], which
//! consult the real [`RetryBudget`](steadfast::control::RetryBudget),
//! [`TokenBucket`](steadfast::control::TokenBucket) and
//! [`AdaptiveThrottle`](steadfast::control::AdaptiveThrottle).
//!
//! The numbers, per strategy: **goodput** (calls that succeeded per second,
//! by the time they succeeded) before, during and at the end of the run;
//! **time to recover**: from the end of the trigger to the start of the first
//! bucket from which every bucket's goodput is at least
//! `recovery_threshold` of the goodput before the trigger, up to the end;
//! **attempts per call** during the trigger and after it; and **wasted
//! work**: requests the server served for callers who had stopped waiting.
//!
//! ```
//! use std::time::Duration;
//! use steadfast_sim::metastable::{self, MetastableConfig};
//!
//! let config = MetastableConfig { duration: Duration::from_secs(60), ..MetastableConfig::default() };
//! let result = metastable::run(&config)?;
//! let plain = result.strategy(metastable::PLAIN).unwrap();
//! let budget = result.strategy(metastable::RETRY_BUDGET).unwrap();
//! assert!(plain.recovery_s.is_none(), "plain retries stay collapsed");
//! assert!(budget.recovery_s.is_some(), "a retry budget recovers");
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};
use steadfast::backoff::{Backoff, Schedule};
use steadfast::deadline::GrpcTimeout;
use steadfast::policy::{CallState, Decision};
use steadfast::{Deadline, RetryPolicy, StopReason, Verdict};

use super::{ScenarioResult, SeededCalls, StrategyResult, mix, run_strategies};
use crate::engine::{Engine, Nanos, nanos, secs};
use crate::error::check;
use crate::metrics::Series;
use crate::server::{Arrival, Server, ServerConfig};
use crate::storm::{Incident, IncidentKind, StormControl};
use crate::{Agreement, SimError};

const SCOPE: &str = "metastable config";

/// A strategy: attempts (counting the first), a retry control, and whether
/// calls carry a deadline that the server sees.
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::metastable::MetastableStrategy;
/// use steadfast_sim::storm::StormControl;
/// let s = MetastableStrategy { name: "2 attempts".into(), max_attempts: 2, control: StormControl::None, deadline: None };
/// assert_eq!(s.max_attempts, 2);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetastableStrategy {
    /// The name shown in reports.
    pub name: String,
    /// Attempts per call, counting the first (1 = no retries).
    pub max_attempts: u32,
    /// The retry control each client gets (one instance per client).
    pub control: StormControl,
    /// One deadline per call, this long, shared by its attempts and
    /// propagated to the server with each (`None`: attempts have only their
    /// own timeout, and the server never knows when a caller gave up).
    #[serde(serialize_with = "crate::serde_util::opt_secs")]
    pub deadline: Option<Duration>,
}

/// The name of the no-retry strategy in [`MetastableStrategy::standard`].
pub const NO_RETRIES: &str = "no retries";
/// The name of the plain 3-attempt strategy.
pub const PLAIN: &str = "3 attempts";
/// The name of the 3-attempt strategy with deadline propagation.
pub const DEADLINE: &str = "3 attempts + deadline";
/// The name of the retry-budget strategy.
pub const RETRY_BUDGET: &str = "retry budget";
/// The name of the gRPC (A6) token-bucket strategy.
pub const TOKEN_BUCKET: &str = "token bucket";
/// The name of the client-side adaptive throttling strategy.
pub const CLIENT_THROTTLING: &str = "adaptive throttle";

impl MetastableStrategy {
    /// The six strategies compared by default: no retries; 3 attempts; 3
    /// attempts with one deadline per call of `deadline` (the attempt
    /// timeout: the time a caller waits), propagated to the server; and 3
    /// attempts with, per client, a 10 % retry budget (10 s window, the SRE
    /// book's), gRPC's token bucket (`maxTokens` 10, `tokenRatio` 0.1, the
    /// spec's example), client-side adaptive throttling (`K` = 2, 2-minute
    /// window, the SRE book's).
    ///
    /// ```
    /// use std::time::Duration;
    /// let names: Vec<String> = steadfast_sim::metastable::MetastableStrategy::standard(Duration::from_secs(1))
    ///     .into_iter().map(|s| s.name).collect();
    /// assert_eq!(names, ["no retries", "3 attempts", "3 attempts + deadline", "retry budget", "token bucket", "adaptive throttle"]);
    /// ```
    #[must_use]
    pub fn standard(deadline: Duration) -> Vec<Self> {
        let with = |name: &str, max_attempts, control, deadline| Self {
            name: name.to_owned(),
            max_attempts,
            control,
            deadline,
        };
        vec![
            with(NO_RETRIES, 1, StormControl::None, None),
            with(PLAIN, 3, StormControl::None, None),
            with(DEADLINE, 3, StormControl::None, Some(deadline)),
            with(
                RETRY_BUDGET,
                3,
                StormControl::RetryBudget {
                    percent: 10.0,
                    min_per_sec: 0,
                    ttl: Duration::from_secs(10),
                },
                None,
            ),
            with(
                TOKEN_BUCKET,
                3,
                StormControl::TokenBucket {
                    max_tokens: 10,
                    token_ratio: 0.1,
                },
                None,
            ),
            with(
                CLIENT_THROTTLING,
                3,
                StormControl::AdaptiveThrottle {
                    k: 2.0,
                    window: Duration::from_secs(120),
                },
                None,
            ),
        ]
    }
}

/// The `metastable` scenario's settings; every field is public, so a caller
/// (the CLI) sets the ones it was given over [`Default`].
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::metastable::MetastableConfig;
/// let config = MetastableConfig { call_rate: 500.0, ..MetastableConfig::default() };
/// assert!(config.validate().is_ok());
/// assert!((config.load() - 0.5).abs() < 1e-9);
/// ```
#[derive(Clone, Serialize)]
pub struct MetastableConfig {
    /// Client processes, each with its own policy and control (default 100).
    pub clients: u32,
    /// Calls per second, all clients together (default 700: 70 % of the
    /// default server's capacity).
    pub call_rate: f64,
    /// Calls start during this time (default 2 min); the run then lets them
    /// finish.
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub duration: Duration,
    /// The server (default: 10 slots, exponential service with mean 10 ms,
    /// so 1,000 requests/s; a queue of 2,000: 2 s of work, more than a
    /// caller waits).
    pub server: ServerConfig,
    /// The round trip added to every response (default 1 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub network_rtt: Duration,
    /// How long a caller waits for one attempt (default 1 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub attempt_timeout: Duration,
    /// The trigger (default: capacity down to 30 % from 30 s for 10 s).
    pub trigger: Incident,
    /// The backoff schedule every strategy retries with (default: the
    /// core's default, exponential from 100 ms with full jitter).
    #[serde(serialize_with = "debug_text")]
    pub backoff: Arc<dyn Schedule>,
    /// The strategies to compare (default [`MetastableStrategy::standard`]
    /// with the attempt timeout as the deadline).
    pub strategies: Vec<MetastableStrategy>,
    /// The width of a bucket of the goodput series (default 1 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub bucket: Duration,
    /// The share of the goodput before the trigger that counts as recovered
    /// (default 0.9).
    pub recovery_threshold: f64,
    /// The seed (default 1).
    pub seed: u64,
}

fn debug_text<S: Serializer, T: fmt::Debug + ?Sized>(
    value: &Arc<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{value:?}"))
}

impl fmt::Debug for MetastableConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetastableConfig")
            .field("clients", &self.clients)
            .field("call_rate", &self.call_rate)
            .field("duration", &self.duration)
            .field("server", &self.server)
            .field("network_rtt", &self.network_rtt)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("trigger", &self.trigger)
            .field("backoff", &self.backoff)
            .field("strategies", &self.strategies)
            .field("bucket", &self.bucket)
            .field("recovery_threshold", &self.recovery_threshold)
            .field("seed", &self.seed)
            .finish()
    }
}

impl Default for MetastableConfig {
    fn default() -> Self {
        let timeout = Duration::from_secs(1);
        Self {
            clients: 100,
            call_rate: 700.0,
            duration: Duration::from_secs(120),
            server: ServerConfig {
                concurrency: 10,
                queue_limit: 2_000,
                latency: crate::Latency::Exponential {
                    mean: Duration::from_millis(10),
                },
            },
            network_rtt: Duration::from_millis(1),
            attempt_timeout: timeout,
            trigger: Incident::overload(Duration::from_secs(30), Duration::from_secs(10), 0.3),
            backoff: Arc::new(Backoff::default()),
            strategies: MetastableStrategy::standard(timeout),
            bucket: Duration::from_secs(1),
            recovery_threshold: 0.9,
            seed: 1,
        }
    }
}

impl MetastableConfig {
    /// The offered load: `call_rate` over the server's capacity.
    #[must_use]
    pub fn load(&self) -> f64 {
        self.call_rate / self.server.capacity_per_sec()
    }

    /// Checks every setting; the first broken rule is the error. (The
    /// controls' own settings are checked by their builders when the run
    /// starts, and come back as [`SimError::Core`].)
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_sim::metastable::MetastableConfig;
    /// let config = MetastableConfig { attempt_timeout: Duration::ZERO, ..MetastableConfig::default() };
    /// assert!(config.validate().unwrap_err().to_string().contains("`attempt_timeout`"));
    /// ```
    pub fn validate(&self) -> Result<(), SimError> {
        check::clients(SCOPE, self.clients)?;
        check::finite_positive(SCOPE, "call_rate", self.call_rate)?;
        check::positive_duration(SCOPE, "duration", self.duration)?;
        check::positive_duration(SCOPE, "bucket", self.bucket)?;
        check::positive_duration(SCOPE, "attempt_timeout", self.attempt_timeout)?;
        check::fraction(SCOPE, "recovery_threshold", self.recovery_threshold)?;
        self.server.validate_capacity()?;
        if let IncidentKind::Overload { capacity } = self.trigger.kind {
            check::fraction(SCOPE, "trigger.capacity", capacity)?;
        }
        if self.trigger.start < self.bucket.saturating_mul(4) {
            return Err(SimError::config(
                SCOPE,
                "trigger",
                "must start at least 4 buckets of the goodput series (4 s by default) into the run, so there is goodput before it to compare with",
                self.trigger.start,
            ));
        }
        if self.trigger.end() >= self.duration {
            return Err(SimError::config(
                SCOPE,
                "trigger",
                "must end before `duration`, so recovery can be seen",
                self.trigger.end(),
            ));
        }
        check::calls(SCOPE, "call_rate", self.call_rate, self.duration)?;
        check::buckets(SCOPE, "duration", self.duration, self.bucket)?;
        check::strategies(SCOPE, &self.strategies, |s| s.max_attempts)?;
        for s in &self.strategies {
            if s.deadline.is_some_and(|d| d.is_zero()) {
                return Err(SimError::config(
                    SCOPE,
                    "strategies.deadline",
                    "must be longer than zero",
                    s.deadline,
                ));
            }
        }
        Ok(())
    }
}

/// One strategy's numbers (example in the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetastableStrategyResult {
    /// The strategy's name.
    pub name: String,
    /// Calls started.
    pub calls: u64,
    /// Calls that succeeded.
    pub succeeded: u64,
    /// Attempts sent to the server.
    pub attempts: u64,
    /// Calls refused before their first attempt (client-side throttling).
    pub refused_locally: u64,
    /// Calls that stopped because a control refused a retry.
    pub retries_refused: u64,
    /// Calls that stopped because their deadline left no time for a retry.
    pub deadline_stops: u64,
    /// Goodput before the trigger (second half of the time before it), calls/s.
    pub goodput_before: f64,
    /// Goodput during the trigger, calls/s.
    pub goodput_during: f64,
    /// Goodput at the end of the run (the last [`end_window_s`](Self::end_window_s)
    /// seconds before `duration`), calls/s.
    pub goodput_end: f64,
    /// The length of the window `goodput_end` is measured over, seconds.
    pub end_window_s: f64,
    /// Seconds from the end of the trigger until goodput is back (see the
    /// module docs); `None` if it never was before the end of the run.
    pub recovery_s: Option<f64>,
    /// Attempts sent during the trigger over the calls started during it.
    pub amplification_during: f64,
    /// Attempts sent after the trigger over the calls started after it.
    pub amplification_after: f64,
    /// Requests the server served (finished working on).
    pub served: u64,
    /// Served requests whose caller had already stopped waiting.
    pub wasted: u64,
    /// Queued requests the server dropped unserved because their
    /// propagated deadline had passed.
    pub dropped: u64,
    /// Calls that succeeded, per bucket of the time they succeeded.
    pub successes_per_bucket: Series,
    /// Attempts sent, per bucket.
    pub attempts_per_bucket: Series,
}

impl MetastableStrategyResult {
    /// `wasted / served` (0 when nothing was served).
    ///
    /// ```no_run
    /// # let result = steadfast_sim::metastable::run(&Default::default())?;
    /// assert!((0.0..=1.0).contains(&result.strategies[0].wasted_share()));
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    #[must_use]
    pub fn wasted_share(&self) -> f64 {
        ratio(self.wasted, self.served)
    }
}

impl StrategyResult for MetastableStrategyResult {
    fn name(&self) -> &str {
        &self.name
    }
}

/// The `metastable` scenario's result (see [`run`]): its settings, one
/// [`MetastableStrategyResult`] per strategy, and how the numbers compare
/// with the metastable-failure papers.
pub type MetastableResult = ScenarioResult<MetastableConfig, MetastableStrategyResult>;

/// Runs every configured strategy on the same seed (example in the
/// [module docs](self)).
///
/// # Errors
/// [`SimError::Config`] for a bad setting, [`SimError::Core`] when a
/// control's builder refuses its settings, [`SimError::TooMuchWork`] past
/// the simulator's bound on attempts.
pub fn run(config: &MetastableConfig) -> Result<MetastableResult, SimError> {
    config.validate()?;
    run_strategies(
        config,
        &config.strategies,
        |s| run_one(config, s),
        metastable_papers,
    )
}

/// A request as the server sees it.
#[derive(Debug, Clone, Copy)]
struct Request {
    call: u32,
    tag: u32,
    /// The propagated deadline (`Nanos::MAX`: none).
    deadline: Nanos,
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Arrival,
    /// A call sends its next attempt.
    Send(u32),
    /// The server finished serving a request.
    Finish(Request),
    /// A response reaches the caller (`ok`: served; else rejected).
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
    TriggerStart,
    TriggerEnd,
}

struct Call {
    client: u32,
    /// The attempt in flight (a number unique in the run), if one is.
    tag: u32,
    waiting: bool,
    state: CallState,
}

type ClientPolicy = RetryPolicy<SeededCalls<Arc<dyn Schedule>>>;

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Where time `t` falls: before, during or after the trigger.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Before,
    During,
    After,
}

struct Tally {
    r: MetastableStrategyResult,
    trigger: (Nanos, Nanos),
    calls_in: [u64; 3],
    attempts_in: [u64; 3],
}

impl Tally {
    fn phase(&self, t: Nanos) -> Phase {
        if t < self.trigger.0 {
            Phase::Before
        } else if t < self.trigger.1 {
            Phase::During
        } else {
            Phase::After
        }
    }

    fn call_started(&mut self, at: Nanos) {
        self.r.calls += 1;
        self.calls_in[self.phase(at) as usize] += 1;
    }

    fn attempt(&mut self, at: Nanos) -> Result<(), SimError> {
        self.r.attempts += 1;
        if self.r.attempts > check::MAX_ATTEMPTS {
            return Err(SimError::TooMuchWork {
                scenario: "metastable",
                limit: check::MAX_ATTEMPTS,
            });
        }
        self.attempts_in[self.phase(at) as usize] += 1;
        self.r.attempts_per_bucket.add(at);
        Ok(())
    }
}

/// The client side of one run: the calls in flight and their policies.
struct Clients {
    policies: Vec<ClientPolicy>,
    calls: Vec<Option<Call>>,
    free: Vec<u32>,
    next_tag: u32,
    /// The deadline each call gets, if the strategy propagates one.
    deadline: Option<Duration>,
}

fn run_one(
    config: &MetastableConfig,
    strategy: &MetastableStrategy,
) -> Result<MetastableStrategyResult, SimError> {
    let mut engine: Engine<Ev> = Engine::new(config.seed);
    let clock = engine.clock().clone();
    let policies: Vec<ClientPolicy> = (0..config.clients)
        .map(|i| {
            let seed = mix(config.seed, u64::from(i));
            let mut builder =
                RetryPolicy::with_schedule(SeededCalls::new(config.backoff.clone(), seed))
                    .max_attempts(strategy.max_attempts)
                    .attempt_timeout(config.attempt_timeout);
            if let Some(control) = strategy.control.build(&clock, seed)? {
                builder = builder.control(control);
            }
            Ok(builder.build()?)
        })
        .collect::<Result<_, SimError>>()?;
    let mut clients = Clients {
        policies,
        calls: Vec::new(),
        free: Vec::new(),
        next_tag: 0,
        deadline: strategy.deadline,
    };
    let mut server: Server<Request> = Server::new(&config.server)?;
    // Separate sources, so every strategy sees the same calls at the same
    // times and the same service times, however many attempts it makes.
    let mut arrivals = engine.rng().fork();
    let mut service = engine.rng().fork();
    let bucket = nanos(config.bucket);
    let duration = nanos(config.duration);
    let rtt = nanos(config.network_rtt);
    let trigger = (nanos(config.trigger.start), nanos(config.trigger.end()));
    let mean_gap = 1e9 / config.call_rate;
    let mut tally = Tally {
        r: MetastableStrategyResult {
            name: strategy.name.clone(),
            calls: 0,
            succeeded: 0,
            attempts: 0,
            refused_locally: 0,
            retries_refused: 0,
            deadline_stops: 0,
            goodput_before: 0.0,
            goodput_during: 0.0,
            goodput_end: 0.0,
            end_window_s: 0.0,
            recovery_s: None,
            amplification_during: 0.0,
            amplification_after: 0.0,
            served: 0,
            wasted: 0,
            dropped: 0,
            successes_per_bucket: Series::new(bucket),
            attempts_per_bucket: Series::new(bucket),
        },
        trigger,
        calls_in: [0; 3],
        attempts_in: [0; 3],
    };
    let mut dropped = 0u64;

    engine.schedule(trigger.0, Ev::TriggerStart);
    engine.schedule(trigger.1, Ev::TriggerEnd);
    engine.schedule(0, Ev::Arrival);
    while let Some((now, event)) = engine.pop() {
        match event {
            Ev::Arrival => {
                let gap = -mean_gap * (1.0 - arrivals.unit_f64()).ln();
                let client = (arrivals.next_u64() % u64::from(config.clients)) as u32;
                let next = now.saturating_add(gap as u64);
                if next < duration {
                    engine.schedule(next, Ev::Arrival);
                }
                tally.call_started(now);
                let Some(id) = clients.start(client, &engine, &mut tally) else {
                    continue;
                };
                clients.send(id, &mut engine, &mut server, &mut service, &mut tally, rtt)?;
            }
            Ev::Send(id) => {
                clients.send(id, &mut engine, &mut server, &mut service, &mut tally, rtt)?;
            }
            Ev::Finish(request) => {
                let next = server.finish_where(&mut service, |r| {
                    let keep = r.deadline > now;
                    dropped += u64::from(!keep);
                    keep
                });
                if let Some((next, time)) = next {
                    engine.schedule(now.saturating_add(time), Ev::Finish(next));
                }
                tally.r.served += 1;
                if clients.is_waiting(request.call, request.tag) {
                    engine.schedule(
                        now.saturating_add(rtt),
                        Ev::Response {
                            call: request.call,
                            tag: request.tag,
                            ok: true,
                        },
                    );
                } else {
                    tally.r.wasted += 1;
                }
            }
            Ev::Response { call, tag, ok } => {
                if !clients.is_waiting(call, tag) {
                    // Timed out while the response travelled.
                    tally.r.wasted += u64::from(ok);
                    continue;
                }
                let verdict = if ok { Verdict::Success } else { Verdict::Retry };
                clients.outcome(call, verdict, &mut engine, &mut tally);
            }
            Ev::Timeout { call, tag } => {
                if clients.is_waiting(call, tag) {
                    clients.outcome(call, Verdict::Retry, &mut engine, &mut tally);
                }
            }
            Ev::TriggerStart | Ev::TriggerEnd => {
                let capacity = match (event, config.trigger.kind) {
                    (Ev::TriggerStart, IncidentKind::Overload { capacity }) => capacity,
                    (Ev::TriggerStart, IncidentKind::Outage) => 0.0,
                    _ => 1.0,
                };
                let started = server.set_capacity_where(capacity, &mut service, |r| {
                    let keep = r.deadline > now;
                    dropped += u64::from(!keep);
                    keep
                });
                for (request, time) in started {
                    engine.schedule(now.saturating_add(time), Ev::Finish(request));
                }
            }
        }
    }
    tally.r.dropped = dropped;
    Ok(finish(tally, config, duration, bucket))
}

impl Clients {
    /// Starts a call from `client` now, unless its control refuses it.
    fn start(&mut self, client: u32, engine: &Engine<Ev>, tally: &mut Tally) -> Option<u32> {
        let policy = &self.policies[client as usize];
        if policy.admit().is_err() {
            tally.r.refused_locally += 1;
            return None;
        }
        let deadline = self.deadline.map(|d| Deadline::after(engine.instant(), d));
        let call = Call {
            client,
            tag: 0,
            waiting: false,
            state: policy.start(engine.clock(), deadline),
        };
        Some(match self.free.pop() {
            Some(id) => {
                self.calls[id as usize] = Some(call);
                id
            }
            None => {
                self.calls.push(Some(call));
                u32::try_from(self.calls.len() - 1).unwrap_or(u32::MAX)
            }
        })
    }

    fn is_waiting(&self, id: u32, tag: u32) -> bool {
        matches!(self.calls.get(id as usize), Some(Some(c)) if c.waiting && c.tag == tag)
    }

    /// Call `id` sends an attempt now.
    #[inline]
    fn send(
        &mut self,
        id: u32,
        engine: &mut Engine<Ev>,
        server: &mut Server<Request>,
        service: &mut steadfast::backoff::Rng,
        tally: &mut Tally,
        rtt: Nanos,
    ) -> Result<(), SimError> {
        let Some(Some(call)) = self.calls.get_mut(id as usize) else {
            return Ok(());
        };
        let now = engine.now();
        tally.attempt(now)?;
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1);
        call.tag = tag;
        call.waiting = true;
        let policy = &self.policies[call.client as usize];
        // The attempt's deadline: the call's, cut by the attempt timeout
        // (`Deadline::for_call`, as the core's executors do).
        let instant = engine.instant();
        let timeout = policy.attempt_timeout().unwrap_or(Duration::MAX);
        let attempt = call.state.deadline().map_or_else(
            || Deadline::after(instant, timeout),
            |d| d.for_call(instant, Some(timeout)),
        );
        let left = attempt.remaining(instant);
        engine.schedule(
            now.saturating_add(nanos(left)),
            Ev::Timeout { call: id, tag },
        );
        // What crosses the wire is the time left, as `grpc-timeout` (rounded
        // up); the server turns it back into a deadline on its own clock.
        let deadline = match call.state.deadline() {
            Some(_) => now.saturating_add(nanos(GrpcTimeout::from_duration(left).to_duration())),
            None => Nanos::MAX,
        };
        let request = Request {
            call: id,
            tag,
            deadline,
        };
        match server.arrive(request, service) {
            Arrival::Started(request, time) => {
                engine.schedule(now.saturating_add(time), Ev::Finish(request));
            }
            Arrival::Queued => {}
            Arrival::Rejected(request) => engine.schedule(
                now.saturating_add(rtt),
                Ev::Response {
                    call: request.call,
                    tag,
                    ok: false,
                },
            ),
        }
        Ok(())
    }

    /// The attempt in flight of call `id` ended with `verdict`: the policy
    /// decides what follows.
    fn outcome(&mut self, id: u32, verdict: Verdict, engine: &mut Engine<Ev>, tally: &mut Tally) {
        let Some(slot) = self.calls.get_mut(id as usize) else {
            return;
        };
        let Some(call) = slot.as_mut() else {
            return;
        };
        call.waiting = false;
        let now = engine.now();
        let policy = &self.policies[call.client as usize];
        match policy.decide(&mut call.state, verdict, engine.clock()) {
            Decision::Retry(delay) => {
                engine.schedule(now.saturating_add(nanos(delay)), Ev::Send(id));
                return;
            }
            Decision::Succeed => {
                tally.r.succeeded += 1;
                tally.r.successes_per_bucket.add(now);
            }
            Decision::Stop(StopReason::Throttled) => tally.r.retries_refused += 1,
            Decision::Stop(StopReason::Deadline) => tally.r.deadline_stops += 1,
            Decision::Stop(_) => {}
        }
        *slot = None;
        self.free.push(id);
    }
}

fn finish(
    tally: Tally,
    config: &MetastableConfig,
    duration: Nanos,
    bucket: Nanos,
) -> MetastableStrategyResult {
    let mut r = tally.r;
    let (start, end) = tally.trigger;
    let buckets = usize::try_from(duration.div_ceil(bucket)).unwrap_or(usize::MAX);
    r.successes_per_bucket.extend_to(buckets);
    r.attempts_per_bucket.extend_to(buckets);
    let rate = |from: Nanos, to: Nanos| {
        // Goodput over [from, to), from whole buckets.
        let (a, b) = (from.div_ceil(bucket), to / bucket);
        if b <= a {
            return 0.0;
        }
        let n: u64 = (a..b)
            .map(|i| r.successes_per_bucket.count_at(i as usize))
            .sum();
        n as f64 / secs((b - a) * bucket)
    };
    r.goodput_before = rate(start / 2, start);
    r.goodput_during = rate(start, end);
    let end_window = (duration - end).min(nanos(Duration::from_secs(20)).max((duration - end) / 2));
    r.end_window_s = secs(end_window);
    r.goodput_end = rate(duration - end_window, duration);
    r.amplification_during = ratio(
        tally.attempts_in[Phase::During as usize],
        tally.calls_in[Phase::During as usize],
    );
    r.amplification_after = ratio(
        tally.attempts_in[Phase::After as usize],
        tally.calls_in[Phase::After as usize],
    );
    // Recovery: the first bucket from the end of the trigger from which every
    // whole bucket up to `duration` reaches the threshold.
    let target = r.goodput_before * config.recovery_threshold;
    let per_bucket = secs(bucket);
    let first = end.div_ceil(bucket);
    let last = duration / bucket; // exclusive: whole buckets only
    let mut from = None;
    for i in (first..last).rev() {
        if r.successes_per_bucket.count_at(i as usize) as f64 / per_bucket >= target {
            from = Some(i);
        } else {
            break;
        }
    }
    r.recovery_s = from.map(|i| secs((i * bucket).saturating_sub(end)));
    r
}

/// Recovery within this many seconds of the trigger's end counts as "within
/// seconds" for the comparison with the papers.
pub const PROMPT_RECOVERY_S: f64 = 15.0;

/// Bronson et al. (2021), Huang et al. (2022): a trigger pushes a system into
/// a bad state that its retries sustain after the trigger is gone; what
/// breaks the loop (fewer retries under failure, no work for callers who
/// left) lets it recover. Held against the run when it has the plain
/// 3-attempt strategy and at least one of the cures (found by name).
fn metastable_papers(results: &[MetastableStrategyResult]) -> Option<Agreement> {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let plain = find(PLAIN)?;
    let cures: Vec<&MetastableStrategyResult> = [DEADLINE, RETRY_BUDGET, TOKEN_BUCKET]
        .into_iter()
        .filter_map(find)
        .collect();
    if cures.is_empty() {
        return None;
    }
    let stays_down = plain.recovery_s.is_none() && plain.goodput_end < 0.5 * plain.goodput_before;
    let prompt =
        |r: &MetastableStrategyResult| r.recovery_s.is_some_and(|s| s <= PROMPT_RECOVERY_S);
    let cured = cures.iter().all(|r| prompt(r));
    let fmt_recovery = |r: &MetastableStrategyResult| match r.recovery_s {
        Some(s) => format!("{} recovered {s:.0} s after the trigger", r.name),
        None => format!("{} never recovered", r.name),
    };
    Some(Agreement {
        source: "Bronson et al., \"Metastable Failures in Distributed Systems\" (HotOS 2021); \
                 Huang et al., \"Metastable Failures in the Wild\" (OSDI 2022)",
        claim: "after a short trigger, plain retries keep the server overloaded and goodput \
                collapsed after the trigger is gone; retry budgets, token buckets and deadline \
                propagation remove that sustaining effect and recover within seconds"
            .to_owned(),
        criterion: format!(
            "plain retries never recover and end below half their goodput before the trigger, \
             and each of the others recovers at most {PROMPT_RECOVERY_S:.0} s after the trigger \
             ends (the simulator's reading of \"within seconds\")"
        ),
        agrees: stays_down && cured,
        detail: format!(
            "plain 3 attempts: goodput {:.0} calls/s before, {:.0} at the end, {}; {}",
            plain.goodput_before,
            plain.goodput_end,
            match plain.recovery_s {
                Some(s) => format!("recovered {s:.0} s after the trigger"),
                None => "never recovered".to_owned(),
            },
            cures
                .iter()
                .map(|r| fmt_recovery(r))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}
