//! [`Curve`]: the curve of a built-in schedule with its parameters, as the
//! delay pipeline reads them (in nanoseconds).

use std::fmt;
use std::time::Duration;

use super::nanos::duration_from_nanos;

/// The largest multiplier the integer exponential curve takes (larger whole
/// multipliers, such as `1e300`, take the float one: the same results).
pub(super) const MAX_WHOLE_FACTOR: f64 = 4_294_967_296.0;

/// The curve of a [`Backoff`](super::value::Backoff), with its parameters in nanoseconds.
/// `ExponentialWhole` is an exponential curve whose multiplier is a whole
/// number (2, 3, …, up to [`MAX_WHOLE_FACTOR`]): exact integer nanoseconds,
/// no float per delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Curve {
    ExponentialWhole { initial: u64, factor: u64 },
    Constant { interval: f64 },
    Linear { base: f64, step: f64 },
    Exponential { initial: f64, multiplier: f64 },
    Shift { initial: u64, shift: u32 },
    Fibonacci { initial: f64 },
    Decorrelated { base: f64 },
    DecorrelatedV2 { median: f64 },
}

impl Curve {
    /// The first parameter: the interval of a constant curve, the initial
    /// delay or base of the others, the median first delay of decorrelated V2.
    pub(super) fn initial(self) -> Duration {
        match self {
            Self::Shift { initial, .. } | Self::ExponentialWhole { initial, .. } => {
                Duration::from_nanos(initial)
            }
            Self::Constant { interval: v }
            | Self::Linear { base: v, .. }
            | Self::Exponential { initial: v, .. }
            | Self::Fibonacci { initial: v }
            | Self::Decorrelated { base: v }
            | Self::DecorrelatedV2 { median: v } => duration_from_nanos(v),
        }
    }

    /// Adds the parameters, as durations and factors, to the `Debug` output
    /// of the schedule.
    pub(super) fn debug_fields(self, s: &mut fmt::DebugStruct<'_, '_>) {
        match self {
            Self::Constant { interval } => {
                s.field("interval", &duration_from_nanos(interval));
            }
            Self::Linear { base, step } => {
                s.field("initial", &duration_from_nanos(base));
                s.field("step", &duration_from_nanos(step));
            }
            Self::Exponential {
                initial,
                multiplier,
            } => {
                s.field("initial", &duration_from_nanos(initial));
                s.field("multiplier", &multiplier);
            }
            Self::ExponentialWhole { initial, factor } => {
                s.field("initial", &Duration::from_nanos(initial));
                s.field("multiplier", &(factor as f64));
            }
            Self::Shift { initial, shift } => {
                s.field("initial", &Duration::from_nanos(initial));
                s.field("shift", &shift);
            }
            Self::Fibonacci { initial } | Self::Decorrelated { base: initial } => {
                s.field("initial", &duration_from_nanos(initial));
            }
            Self::DecorrelatedV2 { median } => {
                s.field("median_first", &duration_from_nanos(median));
            }
        }
    }
}
