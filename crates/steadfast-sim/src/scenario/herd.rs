//! `herd`: a thundering herd of reconnecting clients.
//!
//! At time zero `clients` clients lose their connection at the same instant,
//! because the server went down. Each tries to reconnect at once, and after
//! every refused attempt waits the delay its backoff [`Schedule`] gives
//! before trying again. The server refuses every connection while it is down
//! (for `outage`); once it is back it accepts at most `accepts_per_window`
//! connections in each fixed `window` (100 ms by default) and refuses the
//! rest, like a server whose accept queue and handshake capacity are limited.
//! A refusal is heard after `connect_latency` (a round trip); a client is
//! done once accepted.
//!
//! Each strategy runs on the same seed, so they meet the same server. The
//! numbers: peak attempts in any sliding `window` (starting on a step of
//! 1/100 window, see [`SlidingPeak`](crate::metrics::SlidingPeak)) while the server is back
//! (the load the recovering server sees; the first wave at time zero is
//! `clients` for every strategy and is reported apart), total attempts
//! (Brooker's "work"), and the time until every client is connected.
//!
//! Every delay comes from the strategy's `Schedule::next_delay`; the
//! simulator decides nothing about timing itself.
//!
//! ```
//! use std::time::Duration;
//! use steadfast_sim::herd::{self, HerdConfig};
//!
//! let config = HerdConfig {
//!     clients: 100,
//!     outage: Duration::from_secs(2),
//!     ..HerdConfig::default()
//! };
//! let result = herd::run(&config)?;
//! assert_eq!(result.strategies.len(), config.strategies.len());
//! for s in &result.strategies {
//!     assert_eq!(s.connected, 100);
//! }
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};
use steadfast::backoff::{Backoff, GrpcConnectionBackoff, Jitter, Rng, Schedule, ScheduleState};

use super::{ScenarioResult, StrategyResult, run_strategies};
use crate::engine::{Engine, nanos, secs};
use crate::error::check;
use crate::metrics::{Series, SlidingPeak};
use crate::{Agreement, Latency, SimError};

const SCOPE: &str = "herd config";

/// A reconnection strategy: a name and the backoff schedule it draws from.
///
/// The built-in ones are made by [`HerdStrategy::standard`]; any
/// [`Schedule`] can be compared with [`HerdStrategy::new`].
///
/// ```
/// use std::time::Duration;
/// use steadfast::Backoff;
/// use steadfast_sim::herd::{self, HerdConfig, HerdStrategy};
///
/// let fixed = HerdStrategy::new("every 2 s", Backoff::constant(Duration::from_secs(2)).build()?);
/// let config = HerdConfig { clients: 20, outage: Duration::from_secs(1), strategies: vec![fixed], ..HerdConfig::default() };
/// let result = herd::run(&config)?;
/// assert_eq!(result.strategies[0].name, "every 2 s");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct HerdStrategy {
    /// The name shown in reports.
    pub name: String,
    /// The schedule every client of this strategy follows.
    pub schedule: Arc<dyn Schedule>,
}

impl HerdStrategy {
    /// A strategy named `name` following `schedule` (see the example on
    /// [`HerdStrategy`]).
    pub fn new(name: impl Into<String>, schedule: impl Schedule + 'static) -> Self {
        Self {
            name: name.into(),
            schedule: Arc::new(schedule),
        }
    }
}

impl HerdStrategy {
    /// The six strategies compared by default. The five exponential ones
    /// share `base` (the first delay's envelope), multiplier 2 and `cap`, and
    /// differ only in jitter, with Brooker's formulas: none; proportional
    /// ±20 % (gRPC's); full `U(0, v)`; equal `v/2 + U(0, v/2)`; decorrelated
    /// `min(cap, U(base, 3 * prev))`. The sixth is gRPC connection backoff
    /// with the spec's own parameters (1 s, ×1.6, ±20 %, max 120 s).
    ///
    /// # Errors
    /// [`SimError::Core`] when the backoff builder refuses `base` or `cap`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_sim::herd::HerdStrategy;
    /// let all = HerdStrategy::standard(Duration::from_secs(1), Duration::from_secs(60))?;
    /// let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    /// assert_eq!(names, ["no jitter", "±20 % jitter", "full jitter", "equal jitter", "decorrelated jitter", "gRPC connection backoff"]);
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    pub fn standard(base: Duration, cap: Duration) -> Result<Vec<Self>, SimError> {
        let exponential = |jitter: Jitter| {
            Backoff::exponential()
                .initial(base)
                .multiplier(2.0)
                .max_delay(cap)
                .jitter(jitter)
                .build()
        };
        Ok(vec![
            Self::new(NO_JITTER, exponential(Jitter::None)?),
            Self::new(PROPORTIONAL_JITTER, exponential(Jitter::Proportional(0.2))?),
            Self::new(FULL_JITTER, exponential(Jitter::Full)?),
            Self::new(EQUAL_JITTER, exponential(Jitter::Equal)?),
            Self::new(
                DECORRELATED_JITTER,
                Backoff::decorrelated()
                    .initial(base)
                    .max_delay(cap)
                    .build()?,
            ),
            Self::new(GRPC_CONNECTION, GrpcConnectionBackoff::default()),
        ])
    }
}

impl fmt::Debug for HerdStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HerdStrategy")
            .field("name", &self.name)
            .field("schedule", &self.schedule)
            .finish()
    }
}

impl Serialize for HerdStrategy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name)
    }
}

/// The `herd` scenario's settings; every field is public, so a caller (the
/// CLI) sets the ones it was given over [`Default`].
///
/// ```
/// use steadfast_sim::herd::HerdConfig;
/// let config = HerdConfig { clients: 5_000, seed: 9, ..HerdConfig::default() };
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct HerdConfig {
    /// Clients that lose their connection at time zero (default 1,000).
    pub clients: u32,
    /// How long the server refuses every connection, from time zero (default 10 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub outage: Duration,
    /// Connections accepted per window once the server is back (default 50,
    /// i.e. 500 per second).
    pub accepts_per_window: u32,
    /// The accept window, also the width of the sliding window for the peak
    /// (default 100 ms).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub window: Duration,
    /// Time for a connection attempt to hear back (default a constant 1 ms).
    pub connect_latency: Latency,
    /// The first delay of the exponential strategies (default 1 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub base: Duration,
    /// The cap on a delay of the exponential strategies (default 60 s).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub cap: Duration,
    /// The simulation stops here even if clients are still trying (default 1 h).
    #[serde(serialize_with = "crate::serde_util::secs")]
    pub horizon: Duration,
    /// The strategies to compare (default [`HerdStrategy::standard`] with
    /// `base` 1 s and `cap` 60 s).
    pub strategies: Vec<HerdStrategy>,
    /// The seed (default 1).
    pub seed: u64,
}

/// One strategy's numbers.
///
/// ```
/// # use std::time::Duration;
/// # use steadfast_sim::herd::{self, HerdConfig};
/// let config = HerdConfig { clients: 10, outage: Duration::from_secs(1), ..HerdConfig::default() };
/// let result = herd::run(&config)?;
/// let first = &result.strategies[0];
/// assert!(first.total_attempts >= 10 && first.attempts_while_down >= 10);
/// # Ok::<(), steadfast_sim::SimError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HerdStrategyResult {
    /// The strategy's name.
    pub name: String,
    /// Connection attempts made, over the whole run.
    pub total_attempts: u64,
    /// Attempts made while the server was down.
    pub attempts_while_down: u64,
    /// Peak attempts in any sliding window once the server was back
    /// (windows start on steps of 1/100 window; see [`SlidingPeak`](crate::metrics::SlidingPeak)).
    pub peak_per_window: u64,
    /// Peak attempts in any sliding window over the whole run (includes the
    /// first wave at time zero).
    pub peak_per_window_overall: u64,
    /// Seconds from the loss until the last client was connected; `None`
    /// when some were still not connected at the horizon.
    pub all_connected_after_s: Option<f64>,
    /// Clients connected by the horizon.
    pub connected: u32,
    /// Clients whose schedule ran out (returned no further delay).
    pub gave_up: u32,
    /// Attempts per window, window by window from time zero (for plots).
    pub attempts_per_window: Series,
    /// Connections accepted per window, window by window from time zero.
    pub connected_per_window: Series,
}

/// The `herd` scenario's result (see [`run`]): its settings, one
/// [`HerdStrategyResult`] per strategy, and how the numbers compare with Brooker (2015).
pub type HerdResult = ScenarioResult<HerdConfig, HerdStrategyResult>;

impl StrategyResult for HerdStrategyResult {
    fn name(&self) -> &str {
        &self.name
    }
}

impl Default for HerdConfig {
    fn default() -> Self {
        let base = Duration::from_secs(1);
        let cap = Duration::from_secs(60);
        Self {
            clients: 1000,
            outage: Duration::from_secs(10),
            accepts_per_window: 50,
            window: Duration::from_millis(100),
            connect_latency: Latency::Constant(Duration::from_millis(1)),
            base,
            cap,
            horizon: Duration::from_secs(3600),
            // These settings are valid, so the builders accept them; were one
            // ever refused, `validate` reports the empty list.
            strategies: HerdStrategy::standard(base, cap).unwrap_or_default(),
            seed: 1,
        }
    }
}

impl HerdConfig {
    /// The default configuration with the [`HerdStrategy::standard`]
    /// strategies rebuilt for other `base` and `cap` values (what the CLI
    /// uses when it maps `--base` / `--cap`).
    ///
    /// # Errors
    /// [`SimError::Core`] when the backoff builder refuses them.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = steadfast_sim::herd::HerdConfig::with_backoff(Duration::from_millis(100), Duration::from_secs(10))?;
    /// assert_eq!(config.base, Duration::from_millis(100));
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    pub fn with_backoff(base: Duration, cap: Duration) -> Result<Self, SimError> {
        Ok(Self {
            base,
            cap,
            strategies: HerdStrategy::standard(base, cap)?,
            ..Self::default()
        })
    }

    /// Checks every setting; the first broken rule is the error.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_sim::herd::HerdConfig;
    /// let config = HerdConfig { window: Duration::ZERO, ..HerdConfig::default() };
    /// assert!(config.validate().unwrap_err().to_string().contains("`window`"));
    /// ```
    pub fn validate(&self) -> Result<(), SimError> {
        check::clients(SCOPE, self.clients)?;
        check::at_least(
            SCOPE,
            "accepts_per_window",
            self.accepts_per_window.into(),
            1,
            "must be at least 1",
        )?;
        check::positive_duration(SCOPE, "window", self.window)?;
        check::positive_duration(SCOPE, "base", self.base)?;
        check::positive_duration(SCOPE, "horizon", self.horizon)?;
        if self.cap < self.base {
            return Err(SimError::config(
                SCOPE,
                "cap",
                "must be at least `base`",
                self.cap,
            ));
        }
        check::buckets(SCOPE, "horizon", self.horizon, self.window)?;
        if self.outage >= self.horizon {
            return Err(SimError::config(
                SCOPE,
                "outage",
                "must end before the horizon",
                self.outage,
            ));
        }
        if self.strategies.is_empty() {
            return Err(SimError::config(
                SCOPE,
                "strategies",
                "must name at least one",
                0,
            ));
        }
        self.connect_latency.validate()
    }
}

/// Runs every configured strategy on the same seed (example in the
/// [module docs](self)).
///
/// # Errors
/// [`SimError::Config`] for a bad setting (checked before anything runs).
pub fn run(config: &HerdConfig) -> Result<HerdResult, SimError> {
    config.validate()?;
    run_strategies(
        config,
        &config.strategies,
        |s| run_one(config, s, check::MAX_ATTEMPTS),
        |r| brooker(r, config.clients),
    )
}

#[derive(Debug, Clone, Copy)]
struct Attempt {
    client: u32,
}

struct Client {
    state: ScheduleState,
    rng: Rng,
}

fn run_one(
    config: &HerdConfig,
    strategy: &HerdStrategy,
    limit: u64,
) -> Result<HerdStrategyResult, SimError> {
    let mut engine: Engine<Attempt> = Engine::new(config.seed);
    let mut clients: Vec<Client> = (0..config.clients)
        .map(|_| Client {
            state: ScheduleState::new(),
            rng: engine.rng().fork(),
        })
        .collect();
    for client in 0..config.clients {
        engine.schedule(0, Attempt { client });
    }
    let window = nanos(config.window);
    let outage_end = nanos(config.outage);
    let horizon = nanos(config.horizon);
    let (mut attempts, mut while_down) = (0u64, 0u64);
    let mut peak_back = SlidingPeak::new(window);
    let mut peak_all = SlidingPeak::new(window);
    let mut series = Series::new(window);
    let mut connected_series = Series::new(window);
    let (mut current_window, mut accepted_in_window) = (u64::MAX, 0u32);
    let (mut connected, mut gave_up, mut last_connect) = (0u32, 0u32, 0u64);

    while let Some((now, Attempt { client })) = engine.pop() {
        if now > horizon {
            break;
        }
        if attempts >= limit {
            return Err(SimError::TooMuchWork {
                scenario: "herd",
                limit,
            });
        }
        attempts += 1;
        peak_all.add(now);
        if now < outage_end {
            while_down += 1;
        } else {
            peak_back.add(now);
        }
        series.add(now);
        let Some(c) = clients.get_mut(client as usize) else {
            continue;
        };
        let answer_at = now.saturating_add(config.connect_latency.sample_nanos(&mut c.rng));
        let accepted = now >= outage_end && {
            let w = now / window;
            if w != current_window {
                current_window = w;
                accepted_in_window = 0;
            }
            accepted_in_window < config.accepts_per_window
        };
        if accepted {
            accepted_in_window += 1;
            connected += 1;
            connected_series.add(answer_at);
            last_connect = last_connect.max(answer_at);
            continue;
        }
        match strategy.schedule.next_delay(&mut c.state, &mut c.rng) {
            Some(delay) => {
                engine.schedule(answer_at.saturating_add(nanos(delay)), Attempt { client });
            }
            None => gave_up += 1,
        }
    }

    Ok(HerdStrategyResult {
        name: strategy.name.clone(),
        total_attempts: attempts,
        attempts_while_down: while_down,
        peak_per_window: peak_back.peak(),
        peak_per_window_overall: peak_all.peak(),
        all_connected_after_s: (connected == config.clients).then(|| secs(last_connect)),
        connected,
        gave_up,
        attempts_per_window: series,
        connected_per_window: connected_series,
    })
}

/// Brooker (2015): jitter cuts the work of contending clients by more than
/// half, and no jitter is the clear loser. Held against the run when it has
/// a "no jitter" and a "full jitter" strategy (found by name).
fn brooker(results: &[HerdStrategyResult], clients: u32) -> Option<Agreement> {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let none = find(NO_JITTER)?;
    let full = find(FULL_JITTER)?;
    let others: Vec<&HerdStrategyResult> = results.iter().filter(|r| r.name != NO_JITTER).collect();
    let time = |r: &HerdStrategyResult| r.all_connected_after_s.unwrap_or(f64::INFINITY);
    let work_ratio = full.total_attempts as f64 / none.total_attempts.max(1) as f64;
    let loser_peak = others
        .iter()
        .all(|r| r.peak_per_window < none.peak_per_window);
    let loser_time = others.iter().all(|r| time(r) < time(none));
    let agrees = work_ratio < 0.5 && loser_peak && loser_time;
    let highest_other = others.iter().max_by_key(|r| r.peak_per_window);
    let peak = match highest_other {
        Some(o) if loser_peak => format!(
            "no jitter's peak once the server was back, {} per window, is the highest \
             (next: {} with {})",
            none.peak_per_window, o.name, o.peak_per_window
        ),
        Some(o) => format!(
            "no jitter's peak once the server was back, {} per window, is not the highest \
             ({} reached {})",
            none.peak_per_window, o.name, o.peak_per_window
        ),
        None => format!(
            "no jitter's peak once the server was back: {} per window",
            none.peak_per_window
        ),
    };
    let done = |r: &HerdStrategyResult| match r.all_connected_after_s {
        Some(t) => format!("connected every client after {t:.1} s"),
        None => format!(
            "had connected only {} of {clients} clients when the run stopped at the horizon",
            r.connected
        ),
    };
    let slowest_other = others.iter().max_by(|a, b| time(a).total_cmp(&time(b)));
    let speed = match slowest_other {
        Some(o) if loser_time => format!(
            "without jitter the herd {}, later than every jittered strategy (the slowest of \
             them, {}, {})",
            done(none),
            o.name,
            done(o)
        ),
        Some(o) => format!(
            "without jitter the herd {}, which is not the slowest ({} {})",
            done(none),
            o.name,
            done(o)
        ),
        None => format!("without jitter the herd {}", done(none)),
    };
    Some(Agreement {
        source: "Brooker, \"Exponential Backoff And Jitter\" (AWS Architecture Blog, 2015)",
        claim: "jitter cuts the work of contending clients by more than half; no jitter is the clear loser".to_owned(),
        criterion: "full jitter makes less than half the attempts of no jitter, and no jitter has \
                    both the highest peak once the server is back and the latest time by which \
                    every client is connected"
            .to_owned(),
        agrees,
        detail: format!(
            "full jitter made {} attempts against {} without jitter ({:.0} % of the work); \
             {peak}; {speed}",
            full.total_attempts,
            none.total_attempts,
            work_ratio * 100.0,
        ),
    })
}

/// The name of the no-jitter strategy in [`HerdStrategy::standard`].
pub const NO_JITTER: &str = "no jitter";
/// The name of the ±20 % jitter strategy in [`HerdStrategy::standard`].
pub const PROPORTIONAL_JITTER: &str = "±20 % jitter";
/// The name of the full-jitter strategy in [`HerdStrategy::standard`].
pub const FULL_JITTER: &str = "full jitter";
/// The name of the equal-jitter strategy in [`HerdStrategy::standard`].
pub const EQUAL_JITTER: &str = "equal jitter";
/// The name of the decorrelated-jitter strategy in [`HerdStrategy::standard`].
pub const DECORRELATED_JITTER: &str = "decorrelated jitter";
/// The name of the gRPC connection backoff strategy in [`HerdStrategy::standard`].
pub const GRPC_CONNECTION: &str = "gRPC connection backoff";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_never_ends_is_stopped_with_an_error() {
        let zero = Backoff::constant(Duration::ZERO).build().unwrap();
        let config = HerdConfig {
            clients: 10,
            strategies: vec![HerdStrategy::new("busy loop", zero)],
            ..HerdConfig::default()
        };
        let err = run_one(&config, &config.strategies[0], 10_000).unwrap_err();
        assert!(matches!(
            err,
            SimError::TooMuchWork {
                scenario: "herd",
                limit: 10_000
            }
        ));
        assert!(err.to_string().contains("10000 simulated attempts"));
    }
}
