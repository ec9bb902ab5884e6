//! Exponential backoff: `initial * multiplier^n`, capped.

use super::schedule::{ScheduleState, UNKNOWN_NS};

/// The uncapped envelope at `state.step`, in nanoseconds, remembered in
/// `state.mem` so the next step is one multiplication (no `powf` on the hot
/// path). May be `+inf` (the caller caps it); never NaN.
#[inline]
pub(super) fn envelope(initial: f64, multiplier: f64, state: &mut ScheduleState) -> f64 {
    let env = if state.step == 0 {
        initial
    } else if state.mem >= 0.0 {
        state.mem * multiplier
    } else {
        closed_form(initial, multiplier, state.step)
    };
    state.mem = env;
    env
}

/// The envelope at `state.step` of a curve whose multiplier is a whole
/// number (`factor >= 1`, as 2 is), capped at `max`, in exact integer
/// nanoseconds: `min(initial * factor^step, max)`, saturating. Remembered in
/// `state.mem_ns` (capping the memory changes nothing, as `factor >= 1`),
/// so the next step is one multiplication and one comparison.
#[inline(always)]
pub(super) fn envelope_int(initial: u64, factor: u64, max: u64, state: &mut ScheduleState) -> u64 {
    let env = if state.step == 0 {
        initial.min(max)
    } else if state.mem_ns != UNKNOWN_NS {
        state.mem_ns.saturating_mul(factor).min(max)
    } else {
        closed_form_int(initial, factor, state.step).min(max)
    };
    state.mem_ns = env;
    env
}

/// `initial * factor^step`, saturating at `u64::MAX`.
#[cold]
pub(super) fn closed_form_int(initial: u64, factor: u64, step: u32) -> u64 {
    initial.saturating_mul(factor.checked_pow(step).unwrap_or(u64::MAX))
}

/// `initial * multiplier^step` without NaN (`0 * inf` is 0 here).
#[cold]
pub(super) fn closed_form(initial: f64, multiplier: f64, step: u32) -> f64 {
    if initial == 0.0 {
        0.0
    } else {
        initial * multiplier.powf(f64::from(step))
    }
}
