//! `tail`: hedged requests against a heavy-tailed latency.
//!
//! Calls arrive as a Poisson process at `call_rate` per second. Each is
//! driven by a real [`HedgePolicy`]: its first copy goes at once and, while
//! no copy has succeeded, another after the hedging delay, up to
//! `max_attempts` copies. Every copy is an independent request to the
//! [`Server`] (see [`crate::server`]), whose service time comes from
//! `server.latency`: by default 98 % of requests take about 1 ms and 2 %
//! about 200 ms, the kind of tail a GC pause or a busy replica makes. The
//! first copy to succeed wins; the others are cancelled by the client, but
//! (as with plain hedged requests, not "tied" ones) the server still does
//! their work, so the extra load is paid in full.
//!
//! The simulator decides nothing itself: when to send each copy comes from
//! `HedgePolicy::send_due`, what an outcome means from
//! `HedgePolicy::on_outcome`, and the adaptive delay is the core's
//! [`AdaptiveDelay`], fed by the policy.
//!
//! The numbers: p50, p99 and p99.9 of call latency, and extra requests (copies
//! beyond the first, as a share of calls).
//!
//! ```
//! use steadfast_sim::tail::{self, TailConfig};
//!
//! let config = TailConfig { calls: 5_000, ..TailConfig::default() };
//! let result = tail::run(&config)?;
//! let none = result.strategy(tail::NO_HEDGING).unwrap();
//! let fixed = result.strategy(tail::FIXED_DELAY).unwrap();
//! assert!(fixed.p999_ms < none.p999_ms);
//! # Ok::<(), steadfast_sim::SimError>(())
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use steadfast::policy::{AdaptiveDelay, HedgeAction, HedgeDecision, HedgeState};
use steadfast::{HedgePolicy, Verdict};

use super::{ScenarioResult, StrategyResult, run_strategies};
use crate::engine::{Engine, Nanos, nanos};
use crate::error::check;
use crate::metrics::LatencyHistogram;
use crate::server::{Arrival, Server, ServerConfig};
use crate::{Agreement, Latency, SimError};

const SCOPE: &str = "tail config";

/// How calls hedge.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TailHedge {
    /// One copy per call.
    None,
    /// A fixed hedging delay.
    Fixed {
        /// The delay between copies.
        #[serde(serialize_with = "crate::serde_util::secs")]
        delay: Duration,
        /// Copies per call, counting the first.
        max_attempts: u32,
    },
    /// The core's [`AdaptiveDelay`]: a running quantile of call latencies.
    Adaptive {
        /// The quantile the delay follows (for example 0.95).
        quantile: f64,
        /// The delay used until enough latencies are known.
        #[serde(serialize_with = "crate::serde_util::secs")]
        fallback: Duration,
        /// Copies per call, counting the first.
        max_attempts: u32,
    },
}

/// A hedging strategy: a name and how it hedges.
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::tail::{TailHedge, TailStrategy};
/// let s = TailStrategy { name: "hedge at 5 ms".into(), hedge: TailHedge::Fixed { delay: Duration::from_millis(5), max_attempts: 2 } };
/// assert_eq!(s.name, "hedge at 5 ms");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TailStrategy {
    /// The name shown in reports.
    pub name: String,
    /// How it hedges.
    pub hedge: TailHedge,
}

impl TailStrategy {
    /// The three strategies compared by default: no hedging; a fixed delay
    /// of 10 ms (the delay of Dean & Barroso's example); an adaptive delay
    /// at the 95th percentile of recent latencies (fallback 10 ms). Both
    /// hedging strategies send at most 2 copies.
    ///
    /// ```
    /// let names: Vec<String> = steadfast_sim::tail::TailStrategy::standard().into_iter().map(|s| s.name).collect();
    /// assert_eq!(names, ["no hedging", "hedge at 10 ms", "adaptive (p95)"]);
    /// ```
    #[must_use]
    pub fn standard() -> Vec<Self> {
        vec![
            Self {
                name: NO_HEDGING.to_owned(),
                hedge: TailHedge::None,
            },
            Self {
                name: FIXED_DELAY.to_owned(),
                hedge: TailHedge::Fixed {
                    delay: Duration::from_millis(10),
                    max_attempts: 2,
                },
            },
            Self {
                name: ADAPTIVE_DELAY.to_owned(),
                hedge: TailHedge::Adaptive {
                    quantile: 0.95,
                    fallback: Duration::from_millis(10),
                    max_attempts: 2,
                },
            },
        ]
    }
}

/// The name of the no-hedging strategy in [`TailStrategy::standard`].
pub const NO_HEDGING: &str = "no hedging";
/// The name of the fixed-delay strategy in [`TailStrategy::standard`].
pub const FIXED_DELAY: &str = "hedge at 10 ms";
/// The name of the adaptive-delay strategy in [`TailStrategy::standard`].
pub const ADAPTIVE_DELAY: &str = "adaptive (p95)";

/// The `tail` scenario's settings; every field is public, so a caller (the
/// CLI) sets the ones it was given over [`Default`].
///
/// ```
/// use steadfast_sim::tail::TailConfig;
/// let config = TailConfig { server: steadfast_sim::server::ServerConfig { latency: "lognormal:2ms:1.2".parse()?, ..TailConfig::default().server }, ..TailConfig::default() };
/// assert!(config.validate().is_ok());
/// # Ok::<(), steadfast_sim::SimError>(())
/// ```
#[derive(Debug, Clone, Serialize)]
pub struct TailConfig {
    /// Calls made (default 100,000).
    pub calls: u32,
    /// Calls per second (default 1,000).
    pub call_rate: f64,
    /// The server (default: 1,000 slots, a queue of 1,000, latency
    /// `0.98*exp:1ms + 0.02*exp:200ms`; ample capacity, so the tail comes
    /// from the latency, not from queueing).
    pub server: ServerConfig,
    /// The strategies to compare (default [`TailStrategy::standard`]).
    pub strategies: Vec<TailStrategy>,
    /// The seed (default 1).
    pub seed: u64,
}

impl Default for TailConfig {
    fn default() -> Self {
        Self {
            calls: 100_000,
            call_rate: 1000.0,
            server: ServerConfig {
                concurrency: 1000,
                queue_limit: 1000,
                latency: Latency::Mixture(vec![
                    (
                        0.98,
                        Latency::Exponential {
                            mean: Duration::from_millis(1),
                        },
                    ),
                    (
                        0.02,
                        Latency::Exponential {
                            mean: Duration::from_millis(200),
                        },
                    ),
                ]),
            },
            strategies: TailStrategy::standard(),
            seed: 1,
        }
    }
}

impl TailConfig {
    /// Checks every setting; the first broken rule is the error. (The
    /// hedging settings are checked by the core's builders when the run
    /// starts, and come back as [`SimError::Core`].)
    ///
    /// ```
    /// let config = steadfast_sim::tail::TailConfig { calls: 0, ..Default::default() };
    /// assert!(config.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), SimError> {
        check::at_least(SCOPE, "calls", self.calls.into(), 1, "must be at least 1")?;
        check::at_most(
            SCOPE,
            "calls",
            self.calls.into(),
            check::MAX_CALLS,
            "must be at most 20,000,000",
        )?;
        check::finite_positive(SCOPE, "call_rate", self.call_rate)?;
        self.server.validate()?;
        if self.strategies.is_empty() {
            return Err(SimError::config(
                SCOPE,
                "strategies",
                "must name at least one",
                0,
            ));
        }
        Ok(())
    }
}

/// One strategy's numbers (latencies of the calls that succeeded).
///
/// ```
/// # let result = steadfast_sim::tail::run(&steadfast_sim::tail::TailConfig { calls: 1_000, ..Default::default() })?;
/// let s = &result.strategies[0];
/// assert!(s.p50_ms <= s.p99_ms && s.p99_ms <= s.p999_ms);
/// # Ok::<(), steadfast_sim::SimError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TailStrategyResult {
    /// The strategy's name.
    pub name: String,
    /// Calls made.
    pub calls: u64,
    /// Calls that succeeded.
    pub succeeded: u64,
    /// Requests sent to the server, every copy counted.
    pub requests: u64,
    /// `requests / calls - 1`: the extra load hedging costs.
    pub extra_requests: f64,
    /// Median call latency, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, in milliseconds.
    pub p99_ms: f64,
    /// 99.9th percentile, in milliseconds.
    pub p999_ms: f64,
    /// Mean call latency, in milliseconds.
    pub mean_ms: f64,
    /// Call latency from 0.3 to 4 "nines" in steps of 0.1 (about p50, then
    /// p90, p99, p99.9, p99.99 at 1, 2, 3, 4), for the plot: `(nines, ms)`.
    pub quantile_curve: Vec<(f64, f64)>,
}

/// The `tail` scenario's result (see [`run`]): its settings, one
/// [`TailStrategyResult`] per strategy, and how the numbers compare with "The Tail at Scale".
pub type TailResult = ScenarioResult<TailConfig, TailStrategyResult>;

impl StrategyResult for TailStrategyResult {
    fn name(&self) -> &str {
        &self.name
    }
}

/// Runs every configured strategy on the same seed (example in the
/// [module docs](self)).
///
/// # Errors
/// [`SimError::Config`] for a bad setting, [`SimError::Core`] when the
/// hedging builders refuse their settings.
pub fn run(config: &TailConfig) -> Result<TailResult, SimError> {
    config.validate()?;
    run_strategies(
        config,
        &config.strategies,
        |s| run_one(config, s),
        tail_at_scale,
    )
}

fn policy(hedge: TailHedge) -> Result<HedgePolicy, SimError> {
    Ok(match hedge {
        TailHedge::None => HedgePolicy::builder(Duration::ZERO)
            .max_attempts(1)
            .build()?,
        TailHedge::Fixed {
            delay,
            max_attempts,
        } => HedgePolicy::builder(delay)
            .max_attempts(max_attempts)
            .build()?,
        TailHedge::Adaptive {
            quantile,
            fallback,
            max_attempts,
        } => {
            let adaptive = AdaptiveDelay::builder(fallback)
                .quantile(quantile)
                .build()?;
            HedgePolicy::builder(Arc::new(adaptive))
                .max_attempts(max_attempts)
                .build()?
        }
    })
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    /// The next call arrives.
    Arrival,
    /// A call's next copy may be due (or its deadline passed).
    Wake { call: u32, epoch: u32 },
    /// The server finished one copy.
    Finish(Copy),
}

/// One copy of one call, as the server sees it.
#[derive(Debug, Clone, Copy)]
struct Copy {
    call: u32,
    epoch: u32,
    number: u32,
}

struct Slot {
    epoch: u32,
    live: Option<Live>,
}

struct Live {
    state: HedgeState,
    start: Nanos,
}

fn run_one(config: &TailConfig, strategy: &TailStrategy) -> Result<TailStrategyResult, SimError> {
    let policy = policy(strategy.hedge)?;
    let mut engine: Engine<Ev> = Engine::new(config.seed);
    let clock = engine.clock().clone();
    let mut server: Server<Copy> = Server::new(&config.server)?;
    let mut arrivals = engine.rng().fork();
    let mut service = engine.rng().fork();
    let mean_gap = 1e9 / config.call_rate;
    let mut slots: Vec<Slot> = Vec::new();
    let mut free: Vec<u32> = Vec::new();
    let (mut made, mut requests) = (0u64, 0u64);
    let mut latencies = LatencyHistogram::new();

    engine.schedule(0, Ev::Arrival);
    while let Some((now, event)) = engine.pop() {
        let (call, epoch) = match event {
            Ev::Arrival => {
                made += 1;
                if made < u64::from(config.calls) {
                    let gap = -mean_gap * (1.0 - arrivals.unit_f64()).ln();
                    engine.schedule(now.saturating_add(gap as u64), Ev::Arrival);
                }
                let live = Live {
                    state: policy.start(&clock, None),
                    start: now,
                };
                let id = match free.pop() {
                    Some(id) => {
                        slots[id as usize].live = Some(live);
                        id
                    }
                    None => {
                        slots.push(Slot {
                            epoch: 0,
                            live: Some(live),
                        });
                        u32::try_from(slots.len() - 1).unwrap_or(u32::MAX)
                    }
                };
                (id, slots[id as usize].epoch)
            }
            Ev::Wake { call, epoch } => (call, epoch),
            Ev::Finish(copy) => {
                if let Some((next, time)) = server.finish(&mut service) {
                    engine.schedule(now.saturating_add(time), Ev::Finish(next));
                }
                let Some(slot) = slots.get_mut(copy.call as usize) else {
                    continue;
                };
                if slot.epoch != copy.epoch {
                    continue; // a cancelled copy of a finished call
                }
                let Some(live) = slot.live.as_mut() else {
                    continue;
                };
                match policy.on_outcome(&mut live.state, copy.number, Verdict::Success, &clock) {
                    HedgeDecision::Succeed => {
                        latencies.record(now - live.start);
                        finish(slot, &mut free, copy.call);
                        continue;
                    }
                    HedgeDecision::Stop(_) => {
                        finish(slot, &mut free, copy.call);
                        continue;
                    }
                    HedgeDecision::Continue => (copy.call, copy.epoch),
                }
            }
        };
        // Drive the call: send every copy that is due, then wait.
        let Some(slot) = slots.get_mut(call as usize) else {
            continue;
        };
        if slot.epoch != epoch {
            continue;
        }
        let Some(live) = slot.live.as_mut() else {
            continue;
        };
        loop {
            match policy.send_due(&mut live.state, &clock) {
                HedgeAction::Send(attempt) => {
                    requests += 1;
                    let copy = Copy {
                        call,
                        epoch,
                        number: attempt.number,
                    };
                    match server.arrive(copy, &mut service) {
                        Arrival::Started(copy, time) => {
                            engine.schedule(now.saturating_add(time), Ev::Finish(copy));
                        }
                        Arrival::Queued => {}
                        Arrival::Rejected(copy) => {
                            // A full server: the copy fails at once, and the
                            // policy decides what follows.
                            if let HedgeDecision::Stop(_) = policy.on_outcome(
                                &mut live.state,
                                copy.number,
                                Verdict::Retry,
                                &clock,
                            ) {
                                finish(slot, &mut free, call);
                                break;
                            }
                        }
                    }
                }
                HedgeAction::WaitUntil(at) => {
                    let at = nanos(at.saturating_duration_since(engine.instant_at(0)));
                    engine.schedule(at, Ev::Wake { call, epoch });
                    break;
                }
                HedgeAction::WaitForOutcome => break,
                HedgeAction::Stop(_) => {
                    finish(slot, &mut free, call);
                    break;
                }
            }
        }
    }

    let ms = |q: f64| latencies.quantile(q).map_or(f64::NAN, |n| n as f64 / 1e6);
    let quantile_curve = (3..=40)
        .map(|i| {
            let nines = f64::from(i) / 10.0;
            (nines, ms(1.0 - 10f64.powf(-nines)))
        })
        .collect();
    let mean_ms = latencies.mean().map_or(f64::NAN, |n| n / 1e6);
    Ok(TailStrategyResult {
        name: strategy.name.clone(),
        calls: made,
        succeeded: latencies.len(),
        requests,
        extra_requests: if made == 0 {
            0.0
        } else {
            requests as f64 / made as f64 - 1.0
        },
        p50_ms: ms(0.5),
        p99_ms: ms(0.99),
        p999_ms: ms(0.999),
        mean_ms,
        quantile_curve,
    })
}

fn finish(slot: &mut Slot, free: &mut Vec<u32>, id: u32) {
    slot.live = None;
    slot.epoch = slot.epoch.wrapping_add(1);
    free.push(id);
}

/// Dean & Barroso (2013): a hedged request after a short delay cut the
/// 99.9th percentile from 1,800 ms to 74 ms for 2 % more requests. Held
/// against the run when it has the no-hedging and fixed-delay strategies.
fn tail_at_scale(results: &[TailStrategyResult]) -> Option<Agreement> {
    let find = |name: &str| results.iter().find(|r| r.name == name);
    let none = find(NO_HEDGING)?;
    let fixed = find(FIXED_DELAY)?;
    // Every ratio handles zero: a zero tail cannot be cut, and a cut to
    // zero is as low as it gets.
    let (cut, cut_text) = if fixed.p999_ms > 0.0 {
        let cut = none.p999_ms / fixed.p999_ms;
        (cut, format!("{cut:.1}x lower"))
    } else if none.p999_ms > 0.0 {
        (f64::INFINITY, "down to zero".to_owned())
    } else {
        (1.0, "both zero".to_owned())
    };
    let agrees = cut >= 4.0 && fixed.extra_requests <= 0.05;
    Some(Agreement {
        source: "Dean & Barroso, \"The Tail at Scale\" (CACM, 2013)",
        claim: "hedging after a short delay cuts the 99.9th percentile many times over (1,800 ms to 74 ms) for a few percent more requests (2 %)".to_owned(),
        criterion: "hedging at a fixed delay makes the p99.9 at least 4x lower for at most 5 % \
                    more requests"
            .to_owned(),
        agrees,
        detail: format!(
            "p99.9 {:.1} ms without hedging, {:.1} ms hedging at a fixed delay ({cut_text}), for {:.1} % more requests",
            none.p999_ms,
            fixed.p999_ms,
            fixed.extra_requests * 100.0
        ),
    })
}
