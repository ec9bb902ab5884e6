//! The random draws of one call: a pure function of the seed and the
//! call's number, so a seeded run is exactly repeatable and concurrent
//! calls share no generator (one `fetch_add` numbers them).

use crate::rng::Rng;

/// The independent draws of one call, one per fault, in a fixed order
/// (gRFC A33: each fault rolls its own number; the delay comes first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Roll {
    /// Whether a latency is injected.
    pub(crate) latency: u64,
    /// How much jitter is added to it.
    pub(crate) jitter: u64,
    /// Whether an error is injected.
    pub(crate) error: u64,
    /// Whether an outcome is substituted.
    pub(crate) outcome: u64,
}

/// SplitMix64's finalizer: spreads consecutive call numbers over the
/// whole seed space before they seed the generator.
const fn spread(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Roll {
    /// The draws of call number `call` of a chaos seeded with `seed`.
    pub(crate) fn of(seed: u64, call: u64) -> Self {
        let mut rng = Rng::with_seed(seed ^ spread(call.wrapping_add(0x9e37_79b9_7f4a_7c15)));
        Self {
            latency: rng.next_u64(),
            jitter: rng.next_u64(),
            error: rng.next_u64(),
            outcome: rng.next_u64(),
        }
    }
}

/// `up_to · draw / 2^64`: a uniform share of `up_to` nanoseconds.
pub(crate) fn share_of(up_to: u64, draw: u64) -> u64 {
    #[allow(clippy::cast_possible_truncation)]
    let share = ((u128::from(up_to) * u128::from(draw)) >> 64) as u64;
    share
}
