//! Fibonacci backoff: `initial * F(n+1)` (1, 1, 2, 3, 5, 8, …), capped.

use super::schedule::ScheduleState;

/// The uncapped term at `state.step`; the two last terms live in
/// `state.mem` (current) and `state.mem2` (previous).
#[inline]
pub(super) fn envelope(initial: f64, cap: f64, state: &mut ScheduleState) -> f64 {
    let (cur, prev) = if state.step == 0 {
        // a(-1) = 0, so a(1) = a(0) + a(-1) = initial.
        (initial, 0.0)
    } else if state.mem >= 0.0 && state.mem2 >= 0.0 {
        (state.mem + state.mem2, state.mem)
    } else {
        closed_form(initial, cap, state.step)
    };
    state.mem = cur;
    state.mem2 = prev;
    cur
}

/// The terms at `step` by iteration, stopping once the term reaches `cap`
/// (beyond it every delay is the cap): at most about 95 rounds, since
/// `initial >= 1 ns` and `cap <= u64::MAX ns`.
#[cold]
fn closed_form(initial: f64, cap: f64, step: u32) -> (f64, f64) {
    if initial <= 0.0 {
        return (0.0, 0.0);
    }
    let (mut cur, mut prev) = (initial, 0.0);
    for _ in 0..step {
        if cur >= cap {
            break;
        }
        (cur, prev) = (cur + prev, cur);
    }
    (cur, prev)
}
