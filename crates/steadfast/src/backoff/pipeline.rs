//! The one pipeline every built-in curve goes through: curve envelope, cap,
//! jitter, floor, cap again, total; and [`Backoff`]'s [`Schedule`] impl.

use std::time::Duration;

use super::curve::Curve;
use super::nanos::{mul_high, ns_u64, ns_u64_nonneg};
use super::schedule::{Schedule, ScheduleState};
use super::value::Backoff;
use super::{decorrelated, exponential, fibonacci, linear, shift};
use crate::rng::Rng;

impl Backoff {
    /// The delay a fresh call would get at curve step `n` (0-based), without
    /// state and ignoring `max_attempts` and `max_total_delay`: grpc-go's
    /// stateless `Backoff(retries)`. Curves with memory (the decorrelated
    /// ones) have no closed form: for them this is a draw as if the previous
    /// step were unknown (AWS: the previous sleep taken as `initial`; V2: the
    /// previous term taken at `n - 0.5`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::backoff::Rng;
    /// use steadfast::Backoff;
    /// let b = Backoff::grpc_go().build()?;
    /// let mut rng = Rng::with_seed(1);
    /// assert_eq!(b.delay_at(0, &mut rng), Duration::from_secs(1)); // no jitter on the first
    /// let d = b.delay_at(1, &mut rng);
    /// assert!(d >= Duration::from_millis(1280) && d <= Duration::from_millis(1920));
    /// assert!(b.delay_at(u32::MAX, &mut rng) <= Duration::from_secs(144));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn delay_at(&self, n: u32, rng: &mut Rng) -> Duration {
        let mut state = ScheduleState::at_step(n);
        Duration::from_nanos(self.draw(&mut state, rng))
    }

    /// The next delay in nanoseconds (before `max_total_delay`), updating the
    /// curve memory in `state` (not the counters).
    #[inline(always)]
    fn draw(&self, state: &mut ScheduleState, rng: &mut Rng) -> u64 {
        let step = state.step;
        if let Curve::ExponentialWhole { initial, factor } = self.curve {
            // The default curve: integers only.
            let capped = exponential::envelope_int(initial, factor, self.max_u64, state);
            let envelope = if !self.base_first || step > 0 {
                self.jitter_fx.apply(capped, rng)
            } else {
                // grpc-go: the first delay is the base delay, exactly.
                initial
            };
            return self.floor_and_cap(envelope);
        }
        // The other common curves, tested in order (no jump table).
        let envelope = if let Curve::Exponential {
            initial,
            multiplier,
        } = self.curve
        {
            exponential::envelope(initial, multiplier, state)
        } else if let Curve::Constant { interval } = self.curve {
            interval
        } else {
            // On copies of the state and the generator: the caller's never
            // escape into a call, so they can stay in registers on the
            // common paths.
            let (envelope, next, next_rng) = self.other_envelope(*state, rng.clone());
            *state = next;
            *rng = next_rng;
            match envelope {
                Ok(envelope) => envelope,
                Err(done) => return done,
            }
        };
        let envelope = if !self.base_first || step > 0 {
            // Not `f64::min`: this maps NaN to the cap too, in one instruction.
            let capped = if envelope < self.max_ns {
                envelope
            } else {
                self.max_ns
            };
            // `max_ns` may round above the exact cap.
            let capped = ns_u64_nonneg(capped).min(self.max_u64);
            self.jitter_fx.apply(capped, rng)
        } else {
            // grpc-go: the first delay is the base delay, exactly.
            ns_u64(envelope)
        };
        self.floor_and_cap(envelope)
    }

    /// The floor, then the cap where it holds after jitter; skipped (one
    /// predictable branch) when the build found them no-ops: no floor, and
    /// a jitter that cannot take the capped envelope above the cap.
    #[inline(always)]
    fn floor_and_cap(&self, ns: u64) -> u64 {
        if self.clamp_after_jitter {
            ns.max(self.min_ns).min(self.post_cap)
        } else {
            ns
        }
    }

    /// The envelope of the other curves (`Ok`), or the finished delay of
    /// those whose randomness is their own (`Err`). Out of line, so that the
    /// hot path (exponential and constant) stays small enough to inline;
    /// returns the updated state and generator.
    #[inline(never)]
    fn other_envelope(
        &self,
        mut state: ScheduleState,
        mut rng: Rng,
    ) -> (Result<f64, u64>, ScheduleState, Rng) {
        let envelope = self.other_envelope_in(&mut state, &mut rng);
        (envelope, state, rng)
    }

    #[inline(always)]
    fn other_envelope_in(&self, state: &mut ScheduleState, rng: &mut Rng) -> Result<f64, u64> {
        let step = state.step;
        Ok(match self.curve {
            Curve::Constant { interval } => interval,
            Curve::Linear { base, step: inc } => linear::envelope(base, inc, step),
            Curve::Exponential {
                initial,
                multiplier,
            } => exponential::envelope(initial, multiplier, state),
            Curve::ExponentialWhole { initial, factor } => {
                exponential::envelope_int(initial, factor, self.max_u64, state) as f64
            }
            Curve::Shift { initial, shift } => shift::envelope(initial, shift, step),
            Curve::Fibonacci { initial } => fibonacci::envelope(initial, self.max_ns, state),
            Curve::Decorrelated { base } => {
                let sleep = self.clamp(decorrelated::aws(base, self.max_ns, state, rng));
                // The next draw is relative to this sleep.
                state.mem = sleep as f64;
                return Err(sleep);
            }
            Curve::DecorrelatedV2 { median } => {
                return Err(self.clamp(decorrelated::polly_v2(median, self.max_ns, state, rng)));
            }
        })
    }

    /// Float nanoseconds to whole ones (saturating; NaN gives 0), then the
    /// floor, then the cap where it holds after jitter; exact in integers.
    #[inline(always)]
    fn clamp(&self, ns: f64) -> u64 {
        ns_u64(ns).max(self.min_ns).min(self.post_cap)
    }
}

impl Schedule for Backoff {
    #[inline]
    fn next_delay(&self, state: &mut ScheduleState, rng: &mut Rng) -> Option<Duration> {
        if u64::from(state.retries) >= self.retry_limit {
            return None;
        }
        if let Some((initial, factor)) = self.plain {
            // The default shape, straight through (same result as below).
            let capped = exponential::envelope_int(initial, factor, self.max_u64, state);
            let ns = mul_high(rng.next_u64(), capped);
            state.record_ns(ns);
            return Some(Duration::from_nanos(ns));
        }
        let remaining = match self.total_limit {
            Some(limit) => {
                let left = limit.saturating_sub(state.total_ns);
                if left == 0 {
                    return None;
                }
                left
            }
            None => u64::MAX,
        };
        let ns = self.draw(state, rng).min(remaining);
        state.record_ns(ns);
        Some(Duration::from_nanos(ns))
    }

    fn seed(&self) -> Option<u64> {
        self.seed
    }

    fn max_attempts(&self) -> Option<u32> {
        Backoff::max_attempts(self)
    }
}
