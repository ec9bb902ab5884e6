//! Gradient2: Netflix's default adaptive concurrency algorithm.

use std::time::Duration;

use super::algorithm::{Algorithm, AlgorithmState, Window, nanos_f64, to_limit};
use crate::config_error::ConfigError;

const NAME: &str = "gradient2";

/// Netflix concurrency-limits' Gradient2, with the published defaults, and
/// one rule added: a window with a drop signal shrinks the limit (by
/// [`drop_factor`](Gradient2Builder::drop_factor), ×0.9 by default), where
/// the original ignores drops.
///
/// Per window: the short RTT is the window's average latency; the long RTT
/// an exponential average over `long_window` windows (a plain average for
/// the first 10), pulled down by 5 % whenever it is more than twice the
/// short one (load has passed, the old latency no longer describes the
/// dependency). While fewer than half the slots were in use the limit does
/// not move. Otherwise
///
/// ```text
/// gradient  = clamp(rtt_tolerance · long / short, 0.5, 1.0)
/// new       = limit · gradient + queue_size
/// limit     = clamp(limit · (1 − smoothing) + new · smoothing, min, max)
/// ```
///
/// | setting | default |
/// |---|---|
/// | initial limit | 20 |
/// | min / max | 20 / 200 |
/// | smoothing | 0.2 |
/// | RTT tolerance | 1.5 |
/// | long window | 600 windows |
/// | queue size | 4 |
/// | drop factor | 0.9 |
///
/// ```
/// use std::time::Duration;
/// use steadfast::limit::{Algorithm, Gradient2, Window};
///
/// // No smoothing, to show each step whole.
/// let mut g = Gradient2::builder().initial_limit(40).min_limit(1).smoothing(1.0).build()?;
/// let busy = |rtt_ms| Window::new(50, 40).with_rtt(Duration::from_millis(rtt_ms), Duration::from_millis(rtt_ms));
/// // The first window sets the long RTT: no queueing seen, the limit probes up by the queue size.
/// assert_eq!(g.update(&busy(10)), 44);
/// // Latency ten times the first (the long RTT, averaged, is now 55 ms):
/// // gradient 1.5 · 55 / 100 = 0.825, and 44 · 0.825 + 4 = 40.3.
/// assert_eq!(g.update(&busy(100)), 40);
/// // A drop signal: ×0.9.
/// assert_eq!(g.update(&busy(100).with_drops(3)), 36);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Gradient2 {
    limit: f64,
    min: u32,
    max: u32,
    smoothing: f64,
    tolerance: f64,
    queue_size: u32,
    drop_factor: f64,
    long_rtt: ExpAverage,
    /// The last window's RTT and the gradient applied, for `state`.
    last: Option<(f64, Option<f64>)>,
}

impl Default for Gradient2 {
    /// The published defaults (see the table above).
    fn default() -> Self {
        Self::from_builder(&Gradient2Builder::new())
    }
}

impl Gradient2 {
    /// A builder with the published defaults.
    #[must_use]
    pub fn builder() -> Gradient2Builder {
        Gradient2Builder::new()
    }

    fn from_builder(b: &Gradient2Builder) -> Self {
        Self {
            limit: f64::from(b.initial),
            min: b.min,
            max: b.max,
            smoothing: b.smoothing,
            tolerance: b.tolerance,
            queue_size: b.queue_size,
            drop_factor: b.drop_factor,
            long_rtt: ExpAverage::new(b.long_window, 10),
            last: None,
        }
    }

    /// The long RTT the gradient compares against, once measured.
    #[must_use]
    pub fn long_rtt(&self) -> Option<Duration> {
        (self.long_rtt.count > 0).then(|| Duration::from_secs_f64(self.long_rtt.value / 1e9))
    }
}

impl Algorithm for Gradient2 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn limit(&self) -> u32 {
        to_limit(self.limit, self.min, self.max)
    }

    fn bounds(&self) -> (u32, u32) {
        (self.min, self.max)
    }

    fn state(&self) -> AlgorithmState {
        AlgorithmState::Gradient2 {
            long_rtt: self.long_rtt(),
            short_rtt: self
                .last
                .map(|(short, _)| Duration::from_secs_f64(short / 1e9)),
            gradient: self.last.and_then(|(_, g)| g),
        }
    }

    fn update(&mut self, window: &Window) -> u32 {
        if window.dropped() {
            self.limit =
                (self.limit * self.drop_factor).clamp(f64::from(self.min), f64::from(self.max));
            return self.limit();
        }
        let Some(rtt) = window.rtt.filter(|r| !r.is_zero()) else {
            return self.limit();
        };
        let short = nanos_f64(rtt);
        let long = self.long_rtt.add(short);
        if long / short > 2.0 {
            self.long_rtt.value *= 0.95;
        }
        self.last = Some((short, None));
        if f64::from(window.max_in_flight) < self.limit / 2.0 {
            return self.limit();
        }
        let gradient = (self.tolerance * long / short).clamp(0.5, 1.0);
        self.last = Some((short, Some(gradient)));
        let new = self.limit * gradient + f64::from(self.queue_size);
        let new = self.limit * (1.0 - self.smoothing) + new * self.smoothing;
        self.limit = new.clamp(f64::from(self.min), f64::from(self.max));
        self.limit()
    }
}

/// An exponential moving average over `window` samples, a plain average
/// over the first `warmup`.
#[derive(Debug, Clone)]
struct ExpAverage {
    value: f64,
    sum: f64,
    count: u32,
    warmup: u32,
    factor: f64,
}

impl ExpAverage {
    fn new(window: u32, warmup: u32) -> Self {
        Self {
            value: 0.0,
            sum: 0.0,
            count: 0,
            warmup,
            factor: 2.0 / (f64::from(window) + 1.0),
        }
    }

    fn add(&mut self, sample: f64) -> f64 {
        if self.count < self.warmup {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / f64::from(self.count);
        } else {
            self.value = self.value * (1.0 - self.factor) + sample * self.factor;
        }
        self.value
    }
}

/// Builds a [`Gradient2`]; every setting starts at the published default.
///
/// ```
/// use steadfast::limit::{Algorithm, Gradient2};
/// let g = Gradient2::builder().min_limit(4).max_limit(64).initial_limit(8).build()?;
/// assert_eq!((g.limit(), g.bounds()), (8, (4, 64)));
/// assert!(Gradient2::builder().rtt_tolerance(0.9).build().is_err());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Gradient2Builder {
    initial: u32,
    min: u32,
    max: u32,
    smoothing: f64,
    tolerance: f64,
    long_window: u32,
    queue_size: u32,
    drop_factor: f64,
}

impl Gradient2Builder {
    fn new() -> Self {
        Self {
            initial: 20,
            min: 20,
            max: 200,
            smoothing: 0.2,
            tolerance: 1.5,
            long_window: 600,
            queue_size: 4,
            drop_factor: 0.9,
        }
    }

    /// The limit before the first window (default 20).
    #[must_use]
    pub fn initial_limit(mut self, limit: u32) -> Self {
        self.initial = limit;
        self
    }

    /// The least the limit may become (default 20).
    #[must_use]
    pub fn min_limit(mut self, limit: u32) -> Self {
        self.min = limit;
        self
    }

    /// The most the limit may become (default 200; Netflix's `maxConcurrency`).
    #[must_use]
    pub fn max_limit(mut self, limit: u32) -> Self {
        self.max = limit;
        self
    }

    /// How much of each new estimate is taken, in (0, 1] (default 0.2).
    #[must_use]
    pub fn smoothing(mut self, smoothing: f64) -> Self {
        self.smoothing = smoothing;
        self
    }

    /// How much longer than the long RTT the short one may be before the
    /// limit shrinks, at least 1 (default 1.5).
    #[must_use]
    pub fn rtt_tolerance(mut self, tolerance: f64) -> Self {
        self.tolerance = tolerance;
        self
    }

    /// Windows the long RTT averages over, at least 1 (default 600).
    #[must_use]
    pub fn long_window(mut self, windows: u32) -> Self {
        self.long_window = windows;
        self
    }

    /// Slots added on top of the gradient's estimate, so the limit can
    /// probe upwards (default 4).
    #[must_use]
    pub fn queue_size(mut self, slots: u32) -> Self {
        self.queue_size = slots;
        self
    }

    /// What a window with a drop signal multiplies the limit by, in
    /// [0.5, 1) (default 0.9).
    #[must_use]
    pub fn drop_factor(mut self, factor: f64) -> Self {
        self.drop_factor = factor;
        self
    }

    /// The algorithm.
    ///
    /// # Errors
    /// A [`ConfigError`] for bounds that cannot hold (`min` of 0, `min >
    /// max`, an initial limit outside them), a smoothing outside (0, 1], an
    /// RTT tolerance below 1, a long window of 0 or a drop factor outside
    /// [0.5, 1).
    pub fn build(self) -> Result<Gradient2, ConfigError> {
        check_bounds(NAME, self.initial, self.min, self.max)?;
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(ConfigError::new(
                NAME,
                "smoothing",
                "must be in (0, 1]",
                self.smoothing,
            ));
        }
        if !(self.tolerance >= 1.0 && self.tolerance.is_finite()) {
            return Err(ConfigError::new(
                NAME,
                "rtt_tolerance",
                "must be a finite number >= 1",
                self.tolerance,
            ));
        }
        if self.long_window == 0 {
            return Err(ConfigError::new(
                NAME,
                "long_window",
                "must be at least 1",
                0,
            ));
        }
        check_factor(NAME, "drop_factor", self.drop_factor)?;
        Ok(Gradient2::from_builder(&self))
    }
}

/// The bounds every algorithm checks: `1 <= min <= initial <= max`.
pub(super) fn check_bounds(
    what: &'static str,
    initial: u32,
    min: u32,
    max: u32,
) -> Result<(), ConfigError> {
    if min == 0 {
        return Err(ConfigError::new(
            what,
            "min_limit",
            "must be at least 1",
            min,
        ));
    }
    if min > max {
        return Err(ConfigError::new(
            what,
            "min_limit",
            "must not exceed max_limit",
            (min, max),
        ));
    }
    if !(min..=max).contains(&initial) {
        return Err(ConfigError::new(
            what,
            "initial_limit",
            "must be within [min_limit, max_limit]",
            (initial, min, max),
        ));
    }
    Ok(())
}

/// A multiplicative decrease in [0.5, 1).
pub(super) fn check_factor(
    what: &'static str,
    field: &'static str,
    factor: f64,
) -> Result<(), ConfigError> {
    if (0.5..1.0).contains(&factor) {
        Ok(())
    } else {
        Err(ConfigError::new(what, field, "must be in [0.5, 1)", factor))
    }
}
