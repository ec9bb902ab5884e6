//! Decorrelated jitter: AWS's (Brooker, 2015) and Polly's V2.

use super::schedule::ScheduleState;
use crate::rng::Rng;

/// AWS decorrelated jitter, capped; `state.mem` is the previous sleep
/// (the caller stores the new one).
#[inline(never)]
pub(super) fn aws(base: f64, cap: f64, state: &ScheduleState, rng: &mut Rng) -> f64 {
    let prev = if state.step > 0 && state.mem >= 0.0 {
        state.mem
    } else {
        base
    };
    rng.range_f64(base, prev * 3.0).min(cap)
}

/// Polly's pFactor.
const P_FACTOR: f64 = 4.0;
/// Polly's rpScalingFactor.
pub(super) const RP_SCALING: f64 = 1.0 / 1.4;

/// The V2 term `2^t * tanh(sqrt(P * t))`.
pub(super) fn v2_term(t: f64) -> f64 {
    t.exp2() * (P_FACTOR * t).sqrt().tanh()
}

/// Polly's decorrelated jitter V2, capped; `state.mem` is the previous term.
#[inline(never)]
pub(super) fn polly_v2(median: f64, cap: f64, state: &mut ScheduleState, rng: &mut Rng) -> f64 {
    let n = f64::from(state.step);
    let prev = if state.step == 0 {
        0.0
    } else if state.mem >= 0.0 {
        state.mem
    } else {
        v2_term(n - 0.5)
    };
    let next = v2_term(n + rng.unit_f64());
    state.mem = next;
    if median == 0.0 {
        return 0.0;
    }
    // inf - inf is NaN; `min` maps NaN to the cap, `max` keeps it >= 0.
    ((next - prev) * RP_SCALING * median).min(cap).max(0.0)
}
