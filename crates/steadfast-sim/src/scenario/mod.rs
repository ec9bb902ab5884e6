//! The scenarios, and what they share.

pub mod herd;
pub mod storm;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use steadfast::{Rng, Schedule, ScheduleState};

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
