//! The scenarios, and what they share.

pub mod breaker;
pub mod herd;
pub mod metastable;
pub mod overload;
pub mod quota;
pub mod replicas;
pub mod storm;
pub mod tail;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use steadfast::backoff::{Rng, Schedule, ScheduleState};

use crate::{Agreement, SimError};

/// What a scenario returns: the settings it ran with, one result per
/// strategy in the configured order, and how the numbers compare with the
/// published source the scenario reproduces. Equal results compare equal
/// (the configuration is left out of the comparison).
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult<C, S> {
    /// The settings it ran with.
    pub config: C,
    /// One entry per strategy, in the configured order.
    pub strategies: Vec<S>,
    /// How the numbers compare with the published source.
    pub agreement: Option<Agreement>,
}

impl<C, S: PartialEq> PartialEq for ScenarioResult<C, S> {
    fn eq(&self, other: &Self) -> bool {
        self.strategies == other.strategies && self.agreement == other.agreement
    }
}

/// One strategy's numbers in a [`ScenarioResult`].
pub trait StrategyResult {
    /// The strategy's name, as configured.
    fn name(&self) -> &str;
}

impl<C, S: StrategyResult> ScenarioResult<C, S> {
    /// The result of the strategy named `name`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_sim::tail::{self, TailConfig};
    /// let result = tail::run(&TailConfig { calls: 200, ..TailConfig::default() })?;
    /// assert!(result.strategy("no hedging").is_some());
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    #[must_use]
    pub fn strategy(&self, name: &str) -> Option<&S> {
        self.strategies.iter().find(|s| s.name() == name)
    }
}

/// Runs every strategy of `config` with `run_one`, in order, then compares
/// the numbers with the source (`agreement`).
pub(crate) fn run_strategies<C: Clone, T, S>(
    config: &C,
    strategies: &[T],
    run_one: impl FnMut(&T) -> Result<S, SimError>,
    agreement: impl FnOnce(&[S]) -> Option<Agreement>,
) -> Result<ScenarioResult<C, S>, SimError> {
    let strategies = strategies
        .iter()
        .map(run_one)
        .collect::<Result<Vec<_>, _>>()?;
    let agreement = agreement(&strategies);
    Ok(ScenarioResult {
        config: config.clone(),
        strategies,
        agreement,
    })
}

/// Gives every call of a policy its own random sequence, fixed by the
/// simulation's seed, and otherwise leaves the schedule alone.
///
/// The retry engine seeds a call's random source from `Schedule::seed()`
/// (the same seed for every call) or from entropy (different on every run).
/// Neither suits a simulation of many calls: one makes every call jitter
/// alike, the other breaks "same seed, same numbers". So on a call's first
/// delay (`state.retries == 0`) this wrapper replaces the call's source with
/// one seeded from its own seed and a call counter; the inner schedule then
/// draws every delay of that call from it, exactly as it would in production.
#[derive(Debug)]
pub(crate) struct SeededCalls<S> {
    inner: S,
    seed: u64,
    calls: AtomicU64,
}

impl<S> SeededCalls<S> {
    pub(crate) fn new(inner: S, seed: u64) -> Self {
        Self {
            inner,
            seed,
            calls: AtomicU64::new(0),
        }
    }
}

impl<S: Clone> Clone for SeededCalls<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            seed: self.seed,
            calls: AtomicU64::new(self.calls.load(Ordering::Relaxed)),
        }
    }
}

impl<S: Schedule> Schedule for SeededCalls<S> {
    #[inline]
    fn next_delay(&self, state: &mut ScheduleState, rng: &mut Rng) -> Option<Duration> {
        if state.retries == 0 {
            let n = self.calls.fetch_add(1, Ordering::Relaxed);
            *rng = Rng::with_seed(mix(self.seed, n));
        }
        self.inner.next_delay(state, rng)
    }

    fn seed(&self) -> Option<u64> {
        Some(self.seed)
    }
}

/// SplitMix64 of `seed + n * golden`: far-apart seeds for consecutive `n`.
pub(crate) fn mix(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The gap to the next arrival of a Poisson process whose gaps average
/// `mean_gap` nanoseconds: one draw from `rng`.
pub(crate) fn exp_gap(rng: &mut Rng, mean_gap: f64) -> u64 {
    (-mean_gap * (1.0 - rng.unit_f64()).ln()) as u64
}

/// The calls in progress, by a small id an event can carry: a slot table
/// whose freed ids are used again.
#[derive(Debug)]
pub(crate) struct Calls<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Calls<T> {
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Keeps `call`, and its id.
    pub(crate) fn insert(&mut self, call: T) -> u32 {
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(call);
                id
            }
            None => {
                self.slots.push(Some(call));
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        }
    }

    /// Call `id`, if it is in progress.
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        self.slots.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// Call `id` is over: its id is free again.
    pub(crate) fn remove(&mut self, id: u32) {
        if let Some(slot) = self.slots.get_mut(id as usize)
            && slot.take().is_some()
        {
            self.free.push(id);
        }
    }
}
