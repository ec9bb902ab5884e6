//! `breaker`: a dependency that goes down for a while and comes back, with
//! and without a circuit breaker.
//!
//! Calls arrive as a Poisson process at `call_rate` per second, each from one
//! of `clients` clients picked at random. Every client has its own
//! [`RetryPolicy`] and, per strategy, its own [`CircuitBreaker`] (a client
//! process keeps one breaker per dependency), alone or with a
//! [`RetryBudget`] (both in one [`AllOf`]), on the simulation's virtual
//! clock. The server (see [`crate::server`]) is down during the `outage`:
//! every attempt that reaches it fails at once.
//!
//! The simulator decides nothing: a call is admitted or refused by
//! `RetryPolicy::admit` (the breaker), and after each attempt the policy's
//! `decide` says succeed, retry (the schedule's delay), or stop.
//!
//! The numbers, per strategy:
//! - **attempts on the down server**: attempts that reached it while it was
//!   down (what the breaker is for);
//! - **first-second load**: attempts that reached the server in its first
//!   second back up, beside the steady load before the outage;
//! - **time to full recovery**: from the end of the outage to the start of
//!   the first bucket after which every bucket's calls succeed at least at
//!   `recovery_threshold` (calls counted in the bucket they started in);
//! - **refused while up**: calls the breakers refused after the server was
//!   back (what the breaker costs: they wait for their probe).
//!
//! ```
//! use std::time::Duration;
//! use steadfast_sim::breaker::{self, BreakerConfig};
//!
//! let config = BreakerConfig {
//!     clients: 10,
//!     call_rate: 200.0,
//!     duration: Duration::from_secs(30),
//!     outage_start: Duration::from_secs(5),
//!     outage_length: Duration::from_secs(10),
//!     ..BreakerConfig::default()
//! };
//! let result = breaker::run(&config)?;
//! let plain = result.strategy("no breaker").unwrap();
//! let guarded = result.strategy("breaker").unwrap();
//! assert!(guarded.down_attempts * 5 < plain.down_attempts);
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use steadfast::backoff::Backoff;
use steadfast::control::{AllOf, CircuitBreaker, RetryBudget, WindowKind};
use steadfast::policy::{CallState, Decision};
use steadfast::{RetryControl, RetryPolicy, Verdict};

use super::{Calls, ScenarioResult, SeededCalls, StrategyResult, exp_gap, mix, run_strategies};
use crate::engine::{Engine, Nanos, SimClock, nanos, secs};
use crate::error::check;
use crate::metrics::Series;
use crate::server::{Arrival, Server, ServerConfig};
use crate::{Agreement, SimError};

const SCOPE: &str = "breaker config";

/// A breaker's settings in the scenario (each client builds its own).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BreakerSettings {
    /// Opens at this failure ratio.
    pub failure_ratio: f64,
    /// The sampling window (a time window).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub window: Duration,
    /// The fewest calls in the window before it may open.
    pub min_calls: u32,
    /// The break.
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub break_duration: Duration,
    /// Probes per half-open round.
    pub probes: u32,
}

impl Default for BreakerSettings {
    /// Ratio 0.5, a 10 s window with at least 50 calls (at the default
    /// rate, a client's calls of 2.5 s), a 5 s break, 1 probe.
    fn default() -> Self {
        Self {
            failure_ratio: 0.5,
            window: Duration::from_secs(10),
            min_calls: 50,
            break_duration: Duration::from_secs(5),
            probes: 1,
        }
    }
}

/// One strategy: attempts per call, and which controls each client gets.
///
/// ```
/// let names: Vec<String> = steadfast_sim::breaker::BreakerStrategy::standard().into_iter().map(|s| s.name).collect();
/// assert_eq!(names, ["no breaker", "breaker", "breaker + budget"]);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakerStrategy {
    /// The name shown in reports.
    pub name: String,
    /// Attempts per call, counting the first.
    pub max_attempts: u32,
    /// The circuit breaker, if any.
    pub breaker: Option<BreakerSettings>,
    /// A retry budget (percent of calls, no per-second floor, 10 s), if any.
    pub budget_percent: Option<f64>,
}

impl BreakerStrategy {
    /// The three strategies compared by default, all with 3 attempts: no
    /// breaker; a breaker ([`BreakerSettings::default`]); the breaker and a
    /// 10 % retry budget.
    #[must_use]
    pub fn standard() -> Vec<Self> {
        let with = |name: &str, breaker, budget_percent| Self {
            name: name.to_owned(),
            max_attempts: 3,
            breaker,
            budget_percent,
        };
        vec![
            with(NO_BREAKER, None, None),
            with(BREAKER, Some(BreakerSettings::default()), None),
            with(
                BREAKER_AND_BUDGET,
                Some(BreakerSettings::default()),
                Some(10.0),
            ),
        ]
    }

    /// A client's control (`None`: no control), and its breaker for the
    /// counts.
    fn control(&self, clock: &SimClock) -> Result<ClientControl, SimError> {
        let breaker = match self.breaker {
            Some(b) => Some(Arc::new(
                CircuitBreaker::builder()
                    .failure_ratio(b.failure_ratio)
                    .window(WindowKind::Time(b.window))
                    .min_calls(b.min_calls)
                    .break_duration(b.break_duration)
                    .probes(b.probes)
                    .build_with_clock(clock.clone())?,
            )),
            None => None,
        };
        let budget = match self.budget_percent {
            Some(percent) => Some(Arc::new(
                RetryBudget::builder()
                    .percent(percent)
                    .min_per_sec(0)
                    .ttl(Duration::from_secs(10))
                    .build_with_clock(clock.clone())?,
            ) as Arc<dyn RetryControl>),
            None => None,
        };
        let as_control = breaker.clone().map(|b| b as Arc<dyn RetryControl>);
        let control = match (as_control, budget) {
            (Some(a), Some(b)) => Some(Arc::new(AllOf::new(vec![a, b])) as Arc<dyn RetryControl>),
            (a, b) => a.or(b),
        };
        Ok((control, breaker))
    }
}

type ClientControl = (
    Option<Arc<dyn RetryControl>>,
    Option<Arc<CircuitBreaker<SimClock>>>,
);

/// The name of the strategy without a breaker in [`BreakerStrategy::standard`].
pub const NO_BREAKER: &str = "no breaker";
/// The name of the breaker strategy in [`BreakerStrategy::standard`].
pub const BREAKER: &str = "breaker";
/// The name of the breaker-and-budget strategy in [`BreakerStrategy::standard`].
pub const BREAKER_AND_BUDGET: &str = "breaker + budget";

/// The `breaker` scenario's settings; every field is public, so a caller
/// (the CLI) sets the ones it was given over [`Default`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakerConfig {
    /// Client processes, each with its own policy and controls (default 50).
    pub clients: u32,
    /// Calls per second, over all clients (default 1000).
    pub call_rate: f64,
    /// How long calls arrive (default 60 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub duration: Duration,
    /// The server (default: 30 slots, a queue of 30, exponential 10 ms
    /// service: about 3000 requests/s).
    pub server: ServerConfig,
    /// Added to every response (default 1 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub network_rtt: Duration,
    /// When the server goes down (default 20 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub outage_start: Duration,
    /// How long it stays down (default 15 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub outage_length: Duration,
    /// The retry schedule of every strategy (default [`Backoff::default`]).
    #[serde(skip)]
    pub backoff: Backoff,
    /// The strategies (default [`BreakerStrategy::standard`]).
    pub strategies: Vec<BreakerStrategy>,
    /// The width of the time series' buckets (default 250 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub bucket: Duration,
    /// The share of a bucket's calls that must succeed for it to count as
    /// recovered (default 0.99).
    pub recovery_threshold: f64,
    /// The seed (default 1).
    pub seed: u64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            clients: 50,
            call_rate: 1000.0,
            duration: Duration::from_secs(60),
            server: ServerConfig {
                concurrency: 30,
                queue_limit: 30,
                latency: crate::Latency::Exponential {
                    mean: Duration::from_millis(10),
                },
            },
            network_rtt: Duration::from_millis(1),
            outage_start: Duration::from_secs(20),
            outage_length: Duration::from_secs(15),
            backoff: Backoff::default(),
            strategies: BreakerStrategy::standard(),
            bucket: Duration::from_millis(250),
            recovery_threshold: 0.99,
            seed: 1,
        }
    }
}

impl BreakerConfig {
    /// When the server comes back.
    #[must_use]
    pub fn outage_end(&self) -> Duration {
        self.outage_start.saturating_add(self.outage_length)
    }

    /// Checks every setting; the first broken rule is the error (the
    /// controls' own settings are checked by their builders when the run
    /// starts, and come back as [`SimError::Core`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_sim::breaker::BreakerConfig;
    /// let config = BreakerConfig { outage_length: Duration::from_secs(100), ..BreakerConfig::default() };
    /// assert!(config.validate().unwrap_err().to_string().contains("`outage_length`"));
    /// ```
    ///
    /// # Errors
    /// [`SimError::Config`] naming the field.
    pub fn validate(&self) -> Result<(), SimError> {
        check::clients(SCOPE, self.clients)?;
        check::finite_positive(SCOPE, "call_rate", self.call_rate)?;
        check::positive_duration(SCOPE, "duration", self.duration)?;
        check::positive_duration(SCOPE, "outage_length", self.outage_length)?;
        check::positive_duration(SCOPE, "bucket", self.bucket)?;
        check::fraction(SCOPE, "recovery_threshold", self.recovery_threshold)?;
        self.server.validate_capacity()?;
        if self.outage_end() > self.duration {
            return Err(SimError::config(
                SCOPE,
                "outage_length",
                "must end (with `outage_start`) within `duration`",
                self.outage_length,
            ));
        }
        let calls = self.call_rate * self.duration.as_secs_f64();
        if calls > 1e8 {
            return Err(SimError::config(
                SCOPE,
                "call_rate",
                "times `duration` must stay below 100,000,000 calls",
                calls,
            ));
        }
        let buckets = self.duration.as_nanos() / self.bucket.as_nanos().max(1);
        if buckets > u128::from(check::MAX_BUCKETS) {
            return Err(SimError::config(
                SCOPE,
                "bucket",
                "must be at least `duration` / 10,000,000",
                self.bucket,
            ));
        }
        check::strategies(SCOPE, &self.strategies, |s| s.max_attempts)?;
        Ok(())
    }
}

/// One strategy's numbers (example in the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakerStrategyResult {
    /// The strategy's name.
    pub name: String,
    /// Calls started.
    pub calls: u64,
    /// Attempts sent to the server.
    pub attempts: u64,
    /// Attempts that reached the server while it was down.
    pub down_attempts: u64,
    /// Calls refused before their first attempt (by the breakers).
    pub refused: u64,
    /// Of those, calls refused after the server was back up.
    pub refused_while_up: u64,
    /// Attempts that reached the server in its first second back up.
    pub first_second_load: u64,
    /// Attempts per second in the 5 s before the outage (the steady load).
    pub steady_load: f64,
    /// Attempts per second on the down server over the second half of the
    /// outage (by then every breaker that will open has opened).
    pub late_outage_rate: f64,
    /// Calls that succeeded, over all calls.
    pub success_rate: f64,
    /// Seconds from the end of the outage until calls succeed again (see
    /// the module docs); `None` if they never did before the end.
    pub recovery_s: Option<f64>,
    /// Times the clients' breakers opened, in total.
    pub openings: u64,
    /// Attempts sent per bucket.
    pub attempts_per_bucket: Series,
    /// Calls started per bucket.
    pub calls_per_bucket: Series,
    /// Calls started per bucket that succeeded.
    pub successes_per_bucket: Series,
}

impl StrategyResult for BreakerStrategyResult {
    fn name(&self) -> &str {
        &self.name
    }
}

/// The `breaker` scenario's result (see [`run`]).
pub type BreakerResult = ScenarioResult<BreakerConfig, BreakerStrategyResult>;

/// Runs every configured strategy on the same seed (example in the
/// [module docs](self)).
///
/// # Errors
/// [`SimError::Config`] for a bad setting, [`SimError::Core`] when a
/// control's builder refuses its settings.
pub fn run(config: &BreakerConfig) -> Result<BreakerResult, SimError> {
    config.validate()?;
    run_strategies(
        config,
        &config.strategies,
        |s| run_one(config, s),
        |r| nygard(config, r),
    )
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Arrival,
    Send(u32),
    Finish { call: u32, epoch: u32 },
    Response { call: u32, ok: bool },
    Down,
    Up,
}

struct Call {
    client: u32,
    start: Nanos,
    state: CallState,
}

/// A client's policy.
type Client = RetryPolicy<SeededCalls<Backoff>>;

fn run_one(
    config: &BreakerConfig,
    strategy: &BreakerStrategy,
) -> Result<BreakerStrategyResult, SimError> {
    let mut engine: Engine<Ev> =
        Engine::new(config.seed).with_clock_resolution(Duration::from_micros(100));
    let clock = engine.clock().clone();
    let mut breakers = Vec::new();
    let clients: Vec<Client> = (0..config.clients)
        .map(|i| {
            let seed = mix(config.seed, u64::from(i));
            let mut builder = RetryPolicy::with_schedule(SeededCalls::new(config.backoff, seed))
                .max_attempts(strategy.max_attempts);
            let (control, breaker) = strategy.control(&clock)?;
            if let Some(control) = control {
                builder = builder.control(control);
            }
            breakers.extend(breaker);
            Ok(builder.build()?)
        })
        .collect::<Result<_, SimError>>()?;
    let mut server: Server<u32> = Server::new(&config.server)?;
    let mut arrivals = engine.rng().fork();
    let mut service = engine.rng().fork();
    let bucket = nanos(config.bucket);
    let duration = nanos(config.duration);
    let rtt = nanos(config.network_rtt);
    let (down, up) = (nanos(config.outage_start), nanos(config.outage_end()));
    let first_second = up..up.saturating_add(1_000_000_000);
    let steady = down.saturating_sub(5_000_000_000)..down;
    let late = down + (up - down) / 2..up;
    let mut late_attempts = 0u64;
    let mean_gap = 1e9 / config.call_rate;
    let mut r = BreakerStrategyResult {
        name: strategy.name.clone(),
        calls: 0,
        attempts: 0,
        down_attempts: 0,
        refused: 0,
        refused_while_up: 0,
        first_second_load: 0,
        steady_load: 0.0,
        late_outage_rate: 0.0,
        success_rate: 0.0,
        recovery_s: None,
        openings: 0,
        attempts_per_bucket: Series::new(bucket),
        calls_per_bucket: Series::new(bucket),
        successes_per_bucket: Series::new(bucket),
    };
    let mut steady_attempts = 0u64;
    let mut successes = 0u64;
    let mut epoch = 0u32;
    let mut calls: Calls<Call> = Calls::new();

    engine.schedule(down, Ev::Down);
    engine.schedule(up, Ev::Up);
    engine.schedule(0, Ev::Arrival);
    while let Some((now, event)) = engine.pop() {
        if r.attempts > check::MAX_ATTEMPTS {
            return Err(SimError::TooMuchWork {
                scenario: "breaker",
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
                r.calls_per_bucket.add(now);
                let policy = &clients[client as usize];
                let Ok(state) = policy.admit_and_start(&clock, None) else {
                    r.refused += 1;
                    if now >= up {
                        r.refused_while_up += 1;
                    }
                    continue;
                };
                calls.insert(Call {
                    client,
                    start: now,
                    state,
                })
            }
            Ev::Send(id) => id,
            Ev::Finish {
                call,
                epoch: started_in,
            } => {
                let ok = started_in == epoch && server.is_up();
                let next = server.finish(&mut service);
                engine.schedule(now.saturating_add(rtt), Ev::Response { call, ok });
                if let Some((next, time)) = next {
                    engine.schedule(now.saturating_add(time), Ev::Finish { call: next, epoch });
                }
                continue;
            }
            Ev::Response { call: id, ok } => {
                let Some(call) = calls.get_mut(id) else {
                    continue;
                };
                let policy = &clients[call.client as usize];
                let verdict = if ok { Verdict::Success } else { Verdict::Retry };
                match policy.decide(&mut call.state, verdict, &clock) {
                    Decision::Retry(delay) => {
                        engine.schedule(now.saturating_add(nanos(delay)), Ev::Send(id));
                        continue;
                    }
                    Decision::Succeed => {
                        successes += 1;
                        r.successes_per_bucket.add(call.start);
                    }
                    Decision::Stop(_) => {}
                }
                calls.remove(id);
                continue;
            }
            Ev::Down => {
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
                continue;
            }
            Ev::Up => {
                server.set_up(true);
                continue;
            }
        };
        // Call `id` sends an attempt now.
        if let Some(call) = calls.get_mut(id) {
            clients[call.client as usize].attempt_starting(&mut call.state, &clock);
        }
        r.attempts += 1;
        r.attempts_per_bucket.add(now);
        if (down..up).contains(&now) {
            r.down_attempts += 1;
        }
        if first_second.contains(&now) {
            r.first_second_load += 1;
        }
        if steady.contains(&now) {
            steady_attempts += 1;
        }
        if late.contains(&now) {
            late_attempts += 1;
        }
        match server.arrive(id, &mut service) {
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

    let buckets = usize::try_from(duration.div_ceil(bucket)).unwrap_or(usize::MAX);
    r.calls_per_bucket.extend_to(buckets);
    r.attempts_per_bucket.extend_to(buckets);
    r.successes_per_bucket.extend_to(buckets);
    r.success_rate = if r.calls == 0 {
        0.0
    } else {
        successes as f64 / r.calls as f64
    };
    r.steady_load = steady_attempts as f64 / secs(steady.end - steady.start).max(1e-9);
    r.late_outage_rate = late_attempts as f64 / secs(late.end - late.start).max(1e-9);
    r.recovery_s = recovery(&r, up, bucket, buckets, config.recovery_threshold);
    r.openings = breakers.iter().map(|b| b.snapshot().openings).sum();
    Ok(r)
}

/// Seconds from `end` to the start of the first bucket (at or after `end`)
/// from which every bucket up to the last meets `threshold`.
fn recovery(
    r: &BreakerStrategyResult,
    end: Nanos,
    bucket: Nanos,
    buckets: usize,
    threshold: f64,
) -> Option<f64> {
    let first = usize::try_from(end.div_ceil(bucket)).unwrap_or(usize::MAX);
    let rate = |i: usize| {
        let n = r.calls_per_bucket.count_at(i);
        if n == 0 {
            1.0
        } else {
            r.successes_per_bucket.count_at(i) as f64 / n as f64
        }
    };
    let mut from = None;
    for i in (first..buckets).rev() {
        if rate(i) >= threshold {
            from = Some(i);
        } else {
            break;
        }
    }
    from.map(|i| secs((i as u64 * bucket).saturating_sub(end)))
}

/// Nygard, *Release It!*: an open breaker fails calls fast instead of
/// sending them to the failing dependency (only its trial calls go: at most
/// `probes` per client per break), and a trial call after the timeout closes
/// it again. Held against the run when it has the no-breaker and breaker
/// strategies (found by name).
fn nygard(config: &BreakerConfig, results: &[BreakerStrategyResult]) -> Option<Agreement> {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let plain = find(NO_BREAKER)?;
    let guarded = find(BREAKER)?;
    let settings = config
        .strategies
        .iter()
        .find(|s| s.name == BREAKER)?
        .breaker?;
    let break_s = settings.break_duration.as_secs_f64();
    // Trial calls per second once every breaker is open, at most.
    let trials = f64::from(config.clients) * f64::from(settings.probes) / break_s;
    let fast = guarded.late_outage_rate <= trials * 1.2;
    let back = guarded
        .recovery_s
        .is_some_and(|s| s <= break_s + config.bucket.as_secs_f64());
    Some(Agreement {
        source: "M. T. Nygard, Release It! (2nd ed., 2018), ch. 5: Circuit Breaker",
        claim: "once open, a breaker fails calls fast instead of sending them to the failing \
                dependency (only trial calls go), and a trial call after its timeout closes it \
                again"
            .to_owned(),
        criterion: "with a breaker, the attempts per second on the down server in the outage's \
                    second half are at most 1.2x the clients' trial calls, and full recovery comes \
                    within one break (plus one chart bucket) of the server's return"
            .to_owned(),
        agrees: fast && back,
        detail: format!(
            "attempts/s on the down server in the outage's second half: {:.0} without a breaker, \
             {:.1} with one ({} clients' trial calls: at most {trials:.1}/s); \
             full recovery {} s after the server came back (break {break_s:.1} s)",
            plain.late_outage_rate,
            guarded.late_outage_rate,
            config.clients,
            guarded
                .recovery_s
                .map_or_else(|| "never".to_owned(), |s| format!("{s:.2}")),
        ),
    })
}
