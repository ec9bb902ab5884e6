//! `replicas`: one bad replica among good ones, and where retries go.
//!
//! Calls arrive as a Poisson process at `call_rate` per second, each from one
//! of `clients` client processes picked at random. The service has
//! `replicas` replicas, each a server of its own (see [`crate::server`]); the
//! first `bad` of them fail a share `bad_failure` of what they serve (the
//! rest serve as the good ones do). Per strategy:
//!
//! - **retry anywhere**: every attempt goes to a replica drawn uniformly at
//!   random, whatever the call tried before (a client over a DNS name, or
//!   tonic's balancer, whose load is a constant, so its power of two
//!   choices is a coin toss);
//! - **retry elsewhere**: each client has its own [`Endpoints`] set and a
//!   policy over it (`.endpoints(set)`): every attempt passes the gate,
//!   which picks by load among the replicas the call has not tried, and
//!   the ticket tells the set what came of it; no outlier detection;
//! - **retry elsewhere + ejection**: the same, with Envoy's outlier
//!   detection (five failures in a row eject a replica for 30 s, longer
//!   each time).
//!
//! The simulator decides nothing: the gate picks (`Limits::admit`), the
//! ticket reports (`Ticket::finish`), and the policy's `decide` says
//! succeed, retry (the schedule's delay) or stop.
//!
//! The numbers, per strategy: attempts per call, the share of calls that
//! succeeded, the attempts that reached a bad replica (its load), and the
//! calls that met a bad replica on more than one attempt.
//!
//! What the default run shows: the endpoint set's pick does most of the
//! work before any ejection. A failure raises its replica's load by a 5 s
//! penalty (peak-EWMA, 10 s decay), so the power of two choices, which
//! always compares two distinct replicas, stops picking the bad one after
//! its first failure or two, until the penalty has decayed below a good
//! replica's load; Envoy's five failures in a row are then rarely reached.
//! Ejection earns its place where the penalty does not steer: a replica
//! that fails slowly (its round trip is a sample like any other) or one
//! the classifier does not call a failure.
//!
//! ```
//! use std::time::Duration;
//! use steadfast_sim::replicas::{self, ReplicasConfig};
//!
//! let config = ReplicasConfig {
//!     call_rate: 200.0,
//!     duration: Duration::from_secs(20),
//!     ..ReplicasConfig::default()
//! };
//! let result = replicas::run(&config)?;
//! let anywhere = result.strategy("retry anywhere").unwrap();
//! let elsewhere = result.strategy("retry elsewhere").unwrap();
//! let ejecting = result.strategy("retry elsewhere + ejection").unwrap();
//! assert_eq!(elsewhere.met_bad_twice, 0);
//! assert!(anywhere.met_bad_twice > 0);
//! assert!(elsewhere.success_rate > anywhere.success_rate);
//! // A failure's load penalty steers the pick away from the bad replica.
//! assert!(elsewhere.bad_attempts * 10 < anywhere.bad_attempts);
//! assert!(ejecting.bad_attempts <= elsewhere.bad_attempts);
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::time::Duration;

use serde::Serialize;
use steadfast::backoff::Backoff;
use steadfast::call::EndpointId;
use steadfast::classify::AnyError;
use steadfast::endpoint::{Endpoints, OutlierDetection};
use steadfast::policy::gate::{Admission, Ticket};
use steadfast::policy::{CallState, Decision};
use steadfast::{RetryPolicy, Verdict};

use super::{Calls, ScenarioResult, SeededCalls, StrategyResult, exp_gap, mix, run_strategies};
use crate::engine::{Engine, SimClock, nanos};
use crate::error::check;
use crate::metrics::Series;
use crate::server::{Arrival, Server, ServerConfig};
use crate::{Agreement, SimError};

const SCOPE: &str = "replicas config";

/// How a strategy takes replicas out of the picking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Ejection {
    /// Never.
    None,
    /// Envoy's outlier detection at its defaults
    /// ([`OutlierDetection::envoy`]).
    Envoy,
    /// gRFC A50's at its defaults ([`OutlierDetection::a50`]).
    A50,
}

impl Ejection {
    fn detection(self) -> Result<Option<OutlierDetection>, SimError> {
        Ok(match self {
            Self::None => None,
            Self::Envoy => Some(OutlierDetection::envoy().build()?),
            Self::A50 => Some(OutlierDetection::a50().build()?),
        })
    }
}

/// One strategy: attempts per call, where retries go, and ejection.
///
/// ```
/// let names: Vec<String> = steadfast_sim::replicas::ReplicasStrategy::standard()
///     .into_iter()
///     .map(|s| s.name)
///     .collect();
/// assert_eq!(names, ["retry anywhere", "retry elsewhere", "retry elsewhere + ejection"]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicasStrategy {
    /// The name shown in reports.
    pub name: String,
    /// Attempts per call, counting the first.
    pub max_attempts: u32,
    /// Whether attempts go through an endpoint set (load-aware, retries
    /// elsewhere) rather than to a replica drawn at random.
    pub elsewhere: bool,
    /// The set's outlier detection (only with `elsewhere`).
    pub ejection: Ejection,
}

impl ReplicasStrategy {
    /// The three strategies compared by default, all with 3 attempts.
    #[must_use]
    pub fn standard() -> Vec<Self> {
        let with = |name: &str, elsewhere, ejection| Self {
            name: name.to_owned(),
            max_attempts: 3,
            elsewhere,
            ejection,
        };
        vec![
            with(ANYWHERE, false, Ejection::None),
            with(ELSEWHERE, true, Ejection::None),
            with(ELSEWHERE_EJECTING, true, Ejection::Envoy),
        ]
    }
}

/// The name of the strategy that retries on a random replica.
pub const ANYWHERE: &str = "retry anywhere";
/// The name of the strategy that retries on a replica not tried.
pub const ELSEWHERE: &str = "retry elsewhere";
/// The name of the strategy that also ejects failing replicas.
pub const ELSEWHERE_EJECTING: &str = "retry elsewhere + ejection";

/// The `replicas` scenario's settings; every field is public, so a caller
/// (the CLI) sets the ones it was given over [`Default`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicasConfig {
    /// Client processes, each with its own policy and endpoint set
    /// (default 10).
    pub clients: u32,
    /// Replicas of the service (default 5).
    pub replicas: u32,
    /// How many of them are bad: the first `bad` (default 1).
    pub bad: u32,
    /// The share of what a bad replica serves that fails (default 1.0).
    pub bad_failure: f64,
    /// Calls per second, over all clients (default 1000).
    pub call_rate: f64,
    /// How long calls arrive (default 60 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub duration: Duration,
    /// Each replica (default: 20 slots, a queue of 20, exponential 10 ms
    /// service: about 2000 requests/s each).
    pub server: ServerConfig,
    /// Added to every response (default 1 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub network_rtt: Duration,
    /// The retry schedule of every strategy (default [`Backoff::default`]).
    #[serde(skip)]
    pub backoff: Backoff,
    /// The strategies (default [`ReplicasStrategy::standard`]).
    pub strategies: Vec<ReplicasStrategy>,
    /// The width of the time series' buckets (default 1 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub bucket: Duration,
    /// The seed (default 1).
    pub seed: u64,
}

impl Default for ReplicasConfig {
    fn default() -> Self {
        Self {
            clients: 10,
            replicas: 5,
            bad: 1,
            bad_failure: 1.0,
            call_rate: 1000.0,
            duration: Duration::from_secs(60),
            server: ServerConfig {
                concurrency: 20,
                queue_limit: 20,
                latency: crate::Latency::Exponential {
                    mean: Duration::from_millis(10),
                },
            },
            network_rtt: Duration::from_millis(1),
            backoff: Backoff::default(),
            strategies: ReplicasStrategy::standard(),
            bucket: Duration::from_secs(1),
            seed: 1,
        }
    }
}

impl ReplicasConfig {
    /// Checks every setting; the first broken rule is the error.
    ///
    /// ```
    /// use steadfast_sim::replicas::ReplicasConfig;
    /// let config = ReplicasConfig { bad: 5, ..ReplicasConfig::default() };
    /// assert!(config.validate().unwrap_err().to_string().contains("`bad`"));
    /// ```
    ///
    /// # Errors
    /// [`SimError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), SimError> {
        check::clients(SCOPE, self.clients)?;
        check::at_least(
            SCOPE,
            "replicas",
            self.replicas.into(),
            2,
            "must be at least 2",
        )?;
        check::at_most(
            SCOPE,
            "replicas",
            self.replicas.into(),
            1_000,
            "must be at most 1,000",
        )?;
        if self.bad >= self.replicas {
            return Err(SimError::config(
                SCOPE,
                "bad",
                "must be fewer than `replicas` (at least one good replica)",
                self.bad,
            ));
        }
        check::fraction(SCOPE, "bad_failure", self.bad_failure)?;
        check::finite_positive(SCOPE, "call_rate", self.call_rate)?;
        check::positive_duration(SCOPE, "duration", self.duration)?;
        check::positive_duration(SCOPE, "bucket", self.bucket)?;
        check::calls(SCOPE, "call_rate", self.call_rate, self.duration)?;
        check::buckets(SCOPE, "duration", self.duration, self.bucket)?;
        self.server.validate_capacity()?;
        check::strategies(SCOPE, &self.strategies, |s| s.max_attempts)?;
        Ok(())
    }
}

/// One strategy's numbers (example in the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicasStrategyResult {
    /// The strategy's name.
    pub name: String,
    /// Calls started.
    pub calls: u64,
    /// Attempts sent.
    pub attempts: u64,
    /// Attempts per call.
    pub attempts_per_call: f64,
    /// Calls that succeeded, over all calls.
    pub success_rate: f64,
    /// Attempts that reached a bad replica.
    pub bad_attempts: u64,
    /// Their share of all attempts.
    pub bad_share: f64,
    /// Calls that met a bad replica on more than one attempt.
    pub met_bad_twice: u64,
    /// Retries the endpoint set's retry cap turned away.
    pub capped: u64,
    /// Attempts that reached a bad replica, per bucket.
    pub bad_per_bucket: Series,
}

impl StrategyResult for ReplicasStrategyResult {
    fn name(&self) -> &str {
        &self.name
    }
}

/// The `replicas` scenario's result (see [`run`]).
pub type ReplicasResult = ScenarioResult<ReplicasConfig, ReplicasStrategyResult>;

/// Runs every configured strategy on the same seed (example in the
/// [module docs](self)).
///
/// # Errors
/// [`SimError::Config`] for a bad setting, [`SimError::Core`] when the
/// core refuses one.
pub fn run(config: &ReplicasConfig) -> Result<ReplicasResult, SimError> {
    config.validate()?;
    run_strategies(
        config,
        &config.strategies,
        |s| run_one(config, s),
        |r| previous_hosts(config, r),
    )
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Arrival,
    Send(u32),
    Finish { replica: u32, call: u32 },
    Response { call: u32, ok: bool },
}

/// A client process: its policy, and the ids of its set's replicas in
/// replica order (empty without a set).
struct Client {
    policy: RetryPolicy<SeededCalls<Backoff>>,
    ids: Vec<EndpointId>,
}

struct Call {
    client: u32,
    state: CallState,
    ticket: Ticket,
    bad_met: u32,
}

fn run_one(
    config: &ReplicasConfig,
    strategy: &ReplicasStrategy,
) -> Result<ReplicasStrategyResult, SimError> {
    let mut engine: Engine<Ev> =
        Engine::new(config.seed).with_clock_resolution(Duration::from_micros(100));
    let clock: SimClock = engine.clock().clone();
    let detection = strategy.ejection.detection()?;
    let clients: Vec<Client> = (0..config.clients)
        .map(|i| {
            let seed = mix(config.seed, u64::from(i));
            let mut builder = RetryPolicy::with_schedule(SeededCalls::new(config.backoff, seed))
                .max_attempts(strategy.max_attempts);
            let mut ids = Vec::new();
            if strategy.elsewhere {
                let set = Endpoints::builder()
                    .seed(seed)
                    .outlier_detection(detection.clone())
                    .build()?;
                let now = engine.instant();
                ids = (0..config.replicas)
                    .map(|r| set.insert(format!("replica-{r}"), now))
                    .collect();
                builder = builder.endpoints(set);
            }
            Ok(Client {
                policy: builder.build()?,
                ids,
            })
        })
        .collect::<Result<_, SimError>>()?;
    let mut servers: Vec<Server<u32>> = (0..config.replicas)
        .map(|_| Server::new(&config.server))
        .collect::<Result<_, _>>()?;
    let mut arrivals = engine.rng().fork();
    let mut service = engine.rng().fork();
    let mut picks = engine.rng().fork();
    let mut failures = engine.rng().fork();
    let duration = nanos(config.duration);
    let rtt = nanos(config.network_rtt);
    let mean_gap = 1e9 / config.call_rate;
    let mut r = ReplicasStrategyResult {
        name: strategy.name.clone(),
        calls: 0,
        attempts: 0,
        attempts_per_call: 0.0,
        success_rate: 0.0,
        bad_attempts: 0,
        bad_share: 0.0,
        met_bad_twice: 0,
        capped: 0,
        bad_per_bucket: Series::new(nanos(config.bucket)),
    };
    let mut successes = 0u64;
    let mut calls: Calls<Call> = Calls::new();

    engine.schedule(0, Ev::Arrival);
    while let Some((now, event)) = engine.pop() {
        if r.attempts > check::MAX_ATTEMPTS {
            return Err(SimError::TooMuchWork {
                scenario: "replicas",
                limit: check::MAX_ATTEMPTS,
            });
        }
        let id = match event {
            Ev::Arrival => {
                let gap = exp_gap(&mut arrivals, mean_gap);
                let client = (arrivals.next_u64() % u64::from(config.clients)) as u32;
                let next = now.saturating_add(gap);
                if next < duration {
                    engine.schedule(next, Ev::Arrival);
                }
                r.calls += 1;
                let state = clients[client as usize].policy.start(&clock, None);
                calls.insert(Call {
                    client,
                    state,
                    ticket: Ticket::FREE,
                    bad_met: 0,
                })
            }
            Ev::Send(id) => id,
            Ev::Finish { replica, call } => {
                let bad = replica < config.bad;
                let ok = !(bad && failures.unit_f64() < config.bad_failure);
                let next = servers[replica as usize].finish(&mut service);
                engine.schedule(now.saturating_add(rtt), Ev::Response { call, ok });
                if let Some((next, time)) = next {
                    engine.schedule(
                        now.saturating_add(time),
                        Ev::Finish {
                            replica,
                            call: next,
                        },
                    );
                }
                continue;
            }
            Ev::Response { call: id, ok } => {
                let Some(call) = calls.get_mut(id) else {
                    continue;
                };
                let policy = &clients[call.client as usize].policy;
                let verdict = if ok { Verdict::Success } else { Verdict::Retry };
                let outcome: Result<(), ()> = if ok { Ok(()) } else { Err(()) };
                std::mem::take(&mut call.ticket).finish(&AnyError, verdict, &outcome, &clock);
                match policy.decide(&mut call.state, verdict, &clock) {
                    Decision::Retry(delay) => {
                        engine.schedule(now.saturating_add(nanos(delay)), Ev::Send(id));
                        continue;
                    }
                    Decision::Succeed => successes += 1,
                    Decision::Stop(_) => {}
                }
                if call.bad_met > 1 {
                    r.met_bad_twice += 1;
                }
                calls.remove(id);
                continue;
            }
        };
        // Call `id` sends an attempt now: to the replica the gate picks, or
        // to one drawn at random.
        let Some(call) = calls.get_mut(id) else {
            continue;
        };
        let client = &clients[call.client as usize];
        let replica = if client.ids.is_empty() {
            (picks.next_u64() % u64::from(config.replicas)) as u32
        } else {
            let limits = client.policy.limits();
            match limits.admit(call.state.deadline(), call.state.avoid(), &clock) {
                Admission::Admitted(ticket) => {
                    call.state.went_to(&ticket);
                    let picked = ticket.endpoint();
                    call.ticket = ticket;
                    let index = client.ids.iter().position(|i| Some(*i) == picked);
                    u32::try_from(index.unwrap_or(0)).unwrap_or(0)
                }
                // The set's retry cap (no limit here waits): the call ends
                // with its last attempt's failure.
                _ => {
                    r.capped += 1;
                    if call.bad_met > 1 {
                        r.met_bad_twice += 1;
                    }
                    calls.remove(id);
                    continue;
                }
            }
        };
        r.attempts += 1;
        if replica < config.bad {
            r.bad_attempts += 1;
            r.bad_per_bucket.add(now);
            call.bad_met += 1;
        }
        match servers[replica as usize].arrive(id, &mut service) {
            Arrival::Started(id, time) => {
                engine.schedule(now.saturating_add(time), Ev::Finish { replica, call: id });
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

    let buckets = usize::try_from(duration.div_ceil(nanos(config.bucket))).unwrap_or(usize::MAX);
    r.bad_per_bucket.extend_to(buckets);
    if r.calls > 0 {
        r.success_rate = successes as f64 / r.calls as f64;
        r.attempts_per_call = r.attempts as f64 / r.calls as f64;
    }
    if r.attempts > 0 {
        r.bad_share = r.bad_attempts as f64 / r.attempts as f64;
    }
    Ok(r)
}

/// Envoy's `previous_hosts` retry predicate: a retry routed away from the
/// hosts a request already tried never lands on the host that just failed
/// it. Held against the run when it has the anywhere and elsewhere
/// strategies (found by name): with retries elsewhere no call meets a bad
/// replica twice while good ones are left to try, and with at most as many
/// attempts as good replicas no call fails for want of one; a random pick
/// fails about (bad / replicas × bad_failure)^attempts of its calls.
fn previous_hosts(
    config: &ReplicasConfig,
    results: &[ReplicasStrategyResult],
) -> Option<Agreement> {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let anywhere = find(ANYWHERE)?;
    let elsewhere = find(ELSEWHERE)?;
    let attempts = config
        .strategies
        .iter()
        .find(|s| s.name == ANYWHERE)?
        .max_attempts;
    let p = f64::from(config.bad) / f64::from(config.replicas) * config.bad_failure;
    let expected = p.powi(i32::try_from(attempts).unwrap_or(i32::MAX));
    let failed = 1.0 - anywhere.success_rate;
    // Within a factor of two of the expectation, or within what 10 calls
    // of noise make of it.
    let slack = 10.0 / (anywhere.calls.max(1) as f64);
    let random_as_expected = failed <= 2.0 * expected + slack && failed >= expected / 2.0 - slack;
    let enough_good = config.replicas - config.bad >= 1;
    let elsewhere_clean = elsewhere.met_bad_twice == 0 || config.bad > 1;
    Some(Agreement {
        source: "Envoy documentation: retry_host_predicate, envoy.retry_host_predicates.previous_hosts",
        claim: "routing a retry away from the hosts a request already tried keeps it off the \
                host that just failed it"
            .to_owned(),
        criterion: "with retries elsewhere, no call meets the bad replica twice (one bad \
                    replica); with a random pick, the calls that fail are within a factor of 2 \
                    of (bad / replicas x failure)^attempts"
            .to_owned(),
        agrees: enough_good && elsewhere_clean && random_as_expected,
        detail: format!(
            "calls that met a bad replica twice: {} anywhere, {} elsewhere; calls failed: \
             {:.3} % anywhere (expected {:.3} %), {:.3} % elsewhere",
            anywhere.met_bad_twice,
            elsewhere.met_bad_twice,
            failed * 100.0,
            expected * 100.0,
            (1.0 - elsewhere.success_rate) * 100.0,
        ),
    })
}
