//! Decorrelated jitter: AWS's (Brooker, 2015) and Polly's V2.

use super::builder::{BackoffBuilder, Kind};
use super::{Backoff, ScheduleState};
use crate::Rng;

impl Backoff {
    /// AWS "decorrelated jitter": `sleep = min(max, U(initial, 3 * prev))`,
    /// where `prev` is the previous sleep and is `initial` before the first.
    /// Each delay depends on the one before, so the curve is a random walk
    /// whose envelope still grows about threefold per step until the cap.
    ///
    /// Source: Marc Brooker, "Exponential Backoff And Jitter", AWS
    /// Architecture Blog, 2015 (`sleep = min(cap, random_between(base, sleep * 3))`).
    /// Defaults: initial (base) 100 ms, max 10 s. The randomness is the
    /// formula itself: setting a [`Jitter`](crate::Jitter) is an error. The
    /// cap holds; `min_delay` is a floor.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::decorrelated().seed(1).build()?;
    /// let d: Vec<Duration> = b.delays().take(50).collect();
    /// assert!(d.iter().all(|x| *x >= Duration::from_millis(100) && *x <= Duration::from_secs(10)));
    /// assert!(d[0] <= Duration::from_millis(300));
    /// assert!(d.windows(2).all(|w| w[1] <= w[0] * 3));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn decorrelated() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Decorrelated)
    }

    /// Polly's "decorrelated jitter backoff V2": smooth, exponentially
    /// growing, with no spikes, and a median first delay of `initial`.
    ///
    /// The formula, for step `n` (0-based) and a median first delay `m`:
    ///
    /// ```text
    /// t      = n + U(0, 1)
    /// next   = 2^t * tanh(sqrt(P * t))          P = 4.0 (smooths the first delay)
    /// delay  = (next - prev) * S * m            S = 1 / 1.4 (medians near m, 2m, 4m, …)
    /// prev   = next                             (prev = 0 before the first)
    /// ```
    ///
    /// capped at `max_delay` (Polly applies its `MaxDelay` the same way).
    /// Source: `DecorrelatedJitterBackoffV2` in App-vNext/Polly
    /// (`src/Polly.Core/Retry/RetryHelper.cs`, originally
    /// Polly.Contrib.WaitAndRetry `Backoff.DecorrelatedJitterV2.cs`; formula
    /// by George Polevoy, scaling by Dylan Reisenberger, Polly issue 530).
    /// Because `2^t * tanh(sqrt(4t))` increases with `t`, every delay is
    /// non-negative; where it overflows `f64` (step ≥ 1024), the delay is
    /// the cap. Defaults: median first delay 100 ms, max 10 s; no extra jitter.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::decorrelated_v2().initial(Duration::from_secs(1)).max_delay(Duration::from_secs(60)).seed(3).build()?;
    /// let d: Vec<Duration> = b.delays().take(8).collect();
    /// assert!(d.iter().all(|x| *x <= Duration::from_secs(60)));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn decorrelated_v2() -> BackoffBuilder {
        BackoffBuilder::new(Kind::DecorrelatedV2)
    }
}

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
const RP_SCALING: f64 = 1.0 / 1.4;

/// The V2 term `2^t * tanh(sqrt(P * t))`.
fn v2_term(t: f64) -> f64 {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Jitter, Schedule};

    #[test]
    fn jitter_is_rejected() {
        for b in [Backoff::decorrelated(), Backoff::decorrelated_v2()] {
            let err = b.jitter(Jitter::Full).build().unwrap_err();
            assert_eq!(err.field(), "jitter");
        }
    }

    #[test]
    fn aws_matches_the_formula_draw_by_draw() {
        // sleep = min(cap, U(base, prev * 3)), prev = base before the first.
        let (base, cap) = (50e6, 2e9);
        let b = Backoff::decorrelated()
            .initial(Duration::from_millis(50))
            .max_delay(Duration::from_secs(2))
            .build()
            .unwrap();
        let mut rng = Rng::with_seed(17);
        let mut draws = rng.clone();
        let mut state = ScheduleState::new();
        let mut prev: f64 = base;
        for _ in 0..40 {
            let u = draws.unit_f64();
            let want = (base + (prev * 3.0 - base) * u).min(cap) as u64;
            let got = b.next_delay(&mut state, &mut rng).unwrap();
            assert_eq!(got, Duration::from_nanos(want));
            prev = want as f64;
        }
    }

    #[test]
    fn polly_v2_matches_the_formula_draw_by_draw() {
        // t = n + U; next = 2^t * tanh(sqrt(4 t)); delay = (next - prev) / 1.4 * m.
        let m = 200e6;
        let b = Backoff::decorrelated_v2()
            .initial(Duration::from_millis(200))
            .max_delay(Duration::from_secs(3600))
            .build()
            .unwrap();
        let mut rng = Rng::with_seed(23);
        let mut draws = rng.clone();
        let mut state = ScheduleState::new();
        let mut prev = 0.0;
        for n in 0..20 {
            let t = f64::from(n) + draws.unit_f64();
            let next = 2f64.powf(t) * (4.0 * t).sqrt().tanh();
            let want = ((next - prev) / 1.4 * m).min(3600e9);
            prev = next;
            let got = b.next_delay(&mut state, &mut rng).unwrap().as_nanos() as f64;
            assert!(
                (got - want).abs() <= want * 1e-12 + 1.0,
                "n={n}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn aws_first_delay_is_uniform_between_base_and_three_base() {
        // Mean of U(100, 300) ms is 200 ms; fixed seeds, 20 000 draws.
        let b = Backoff::decorrelated().build().unwrap();
        let mut sum = 0.0;
        for seed in 0..20_000 {
            let mut s = ScheduleState::new();
            let d = b.next_delay(&mut s, &mut Rng::with_seed(seed)).unwrap();
            assert!(d >= Duration::from_millis(100) && d <= Duration::from_millis(300));
            sum += d.as_secs_f64();
        }
        let mean = sum / 20_000.0;
        assert!((mean - 0.2).abs() < 0.004, "{mean}");
    }

    #[test]
    fn v2_median_first_delay_is_near_initial() {
        // Polly's scaling puts the median of the first delay near the
        // configured value (about 0.95 of it); a wrong constant moves it far.
        let b = Backoff::decorrelated_v2()
            .initial(Duration::from_secs(1))
            .max_delay(Duration::from_secs(3600))
            .build()
            .unwrap();
        let mut firsts: Vec<f64> = (0..10_001)
            .map(|seed| {
                let mut s = ScheduleState::new();
                b.next_delay(&mut s, &mut Rng::with_seed(seed))
                    .unwrap()
                    .as_secs_f64()
            })
            .collect();
        firsts.sort_by(f64::total_cmp);
        let median = firsts[5_000];
        assert!((0.8..1.1).contains(&median), "{median}");
        // Upper bound for the first delay: 2 * tanh(2) / 1.4.
        let bound = 2.0 * 2f64.tanh() / 1.4;
        assert!(firsts[10_000] <= bound + 1e-9, "{}", firsts[10_000]);
    }

    #[test]
    fn v2_cumulative_sum_telescopes() {
        // The sum of the first k delays is S * m * term(t_k): between
        // term(k-1) and term(k) scaled (here without a cap).
        let m = 1e6; // 1 ms
        let b = Backoff::decorrelated_v2()
            .initial(Duration::from_millis(1))
            .max_delay(Duration::MAX)
            .seed(9)
            .build()
            .unwrap();
        let total: f64 = b.delays().take(10).map(|d| d.as_nanos() as f64).sum();
        let lo = v2_term(9.0) * RP_SCALING * m;
        let hi = v2_term(10.0) * RP_SCALING * m;
        assert!(
            total >= lo - 20.0 && total <= hi + 20.0,
            "{lo} {total} {hi}"
        );
    }

    #[test]
    fn v2_and_aws_survive_huge_steps() {
        let mut rng = Rng::with_seed(1);
        for b in [Backoff::decorrelated(), Backoff::decorrelated_v2()] {
            let b = b.build().unwrap();
            for step in [1000, 1023, 1024, 1025, u32::MAX - 1] {
                let mut s = ScheduleState::at_step(step);
                for _ in 0..3 {
                    let d = b.next_delay(&mut s, &mut rng).unwrap();
                    assert!(d <= Duration::from_secs(10));
                }
            }
        }
    }
}
