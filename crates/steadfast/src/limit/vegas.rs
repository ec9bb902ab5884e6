//! Vegas: TCP Vegas' queue estimate, applied to concurrency.

use std::time::Duration;

use super::algorithm::{Algorithm, AlgorithmState, Window, nanos_f64, to_limit};
use super::gradient2::check_bounds;
use crate::config_error::ConfigError;
use crate::rng::Rng;

const NAME: &str = "vegas";

/// Netflix concurrency-limits' Vegas, with the published defaults: it keeps
/// the lowest latency seen (`rtt_noload`) and estimates the queue the
/// dependency holds as `ceil(limit · (1 − rtt_noload / rtt))`. With
/// `log = max(1, floor(log10(limit)))`, per window:
///
/// - a drop signal: `limit − log` (also in a window that lowered or reset
///   `rtt_noload`, where the published algorithm ignores the drop);
/// - fewer than half the slots in use: no change;
/// - queue ≤ `log`: `limit + 6·log` (no queueing: grow fast);
/// - queue < `3·log`: `limit + log`;
/// - queue > `6·log`: `limit − log`;
/// - otherwise no change;
///
/// then `limit = (1 − smoothing) · limit + smoothing · new`, within
/// `[min, max]`. A window faster than `rtt_noload` lowers it and changes
/// nothing else; every `probe_multiplier · limit · U(0.5, 1)` windows the
/// next one resets it, so a dependency that got slower for good is
/// relearned.
///
/// | setting | default |
/// |---|---|
/// | initial limit | 20 |
/// | min / max | 1 / 1000 |
/// | smoothing | 1.0 |
/// | probe multiplier | 30 |
///
/// ```
/// use std::time::Duration;
/// use steadfast::limit::{Algorithm, Vegas, Window};
/// let mut vegas = Vegas::builder().seed(7).build()?;
/// let busy = |ms| Window::new(40, 20).with_rtt(Duration::from_millis(ms), Duration::from_millis(ms));
/// assert_eq!(vegas.update(&busy(10)), 20); // first window: learns rtt_noload
/// assert_eq!(vegas.update(&busy(10)), 26); // no queue: +6·log10(20)
/// assert_eq!(vegas.update(&busy(40)), 25); // queue of ceil(26 · 0.75) = 20 > 6: −1
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Vegas {
    limit: f64,
    min: u32,
    max: u32,
    smoothing: f64,
    probe_multiplier: u32,
    rtt_noload: f64,
    probe_count: u64,
    probe_jitter: f64,
    rng: Rng,
    /// The queue estimated at the last step, for `state`.
    last_queue: Option<f64>,
}

impl Default for Vegas {
    /// The published defaults (see the table above), seeded from entropy.
    fn default() -> Self {
        VegasBuilder::new().into_vegas()
    }
}

impl Vegas {
    /// A builder with the published defaults.
    #[must_use]
    pub fn builder() -> VegasBuilder {
        VegasBuilder::new()
    }

    fn reset_probe_jitter(&mut self) {
        self.probe_jitter = self.rng.range_f64(0.5, 1.0);
    }

    fn should_probe(&self) -> bool {
        #[allow(clippy::cast_precision_loss)] // counts far below 2^52
        let count = self.probe_count as f64;
        self.probe_jitter * f64::from(self.probe_multiplier) * self.limit <= count
    }
}

/// `max(1, floor(log10(limit)))`, as the published functions compute it.
fn log10_root(limit: f64) -> f64 {
    if limit < 10.0 {
        1.0
    } else {
        limit.log10().floor().max(1.0)
    }
}

impl Algorithm for Vegas {
    fn name(&self) -> &'static str {
        NAME
    }

    fn limit(&self) -> u32 {
        to_limit(self.limit, self.min, self.max)
    }

    fn state(&self) -> AlgorithmState {
        AlgorithmState::Vegas {
            no_load_rtt: (self.rtt_noload > 0.0)
                .then(|| Duration::from_secs_f64(self.rtt_noload / 1e9)),
            queue: self.last_queue,
        }
    }

    fn bounds(&self) -> (u32, u32) {
        (self.min, self.max)
    }

    fn update(&mut self, window: &Window) -> u32 {
        let (min, max) = (f64::from(self.min), f64::from(self.max));
        let Some(rtt) = window.rtt.filter(|r| !r.is_zero()).map(nanos_f64) else {
            // Nothing measured: only a drop has something to say.
            if window.dropped() {
                let limit = self.limit.trunc();
                self.limit = (limit - log10_root(limit)).clamp(min, max);
            }
            return self.limit();
        };
        self.probe_count += 1;
        let learned = if self.should_probe() {
            self.reset_probe_jitter();
            self.probe_count = 0;
            self.rtt_noload = rtt;
            true
        } else if self.rtt_noload == 0.0 || rtt < self.rtt_noload {
            self.rtt_noload = rtt;
            true
        } else {
            false
        };
        // A window that (re)learned rtt_noload changes nothing else, as
        // published, unless it saw a drop: a drop always shrinks.
        if learned && !window.dropped() {
            return self.limit();
        }
        let limit = self.limit;
        let log = log10_root(limit.trunc());
        let queue = (limit * (1.0 - self.rtt_noload / rtt)).ceil();
        self.last_queue = Some(queue);
        let new = if window.dropped() {
            limit - log
        } else if f64::from(window.max_in_flight) * 2.0 < limit {
            return self.limit();
        } else if queue <= log {
            limit + 6.0 * log
        } else if queue < 3.0 * log {
            limit + log
        } else if queue > 6.0 * log {
            limit - log
        } else {
            return self.limit();
        };
        let new = new.clamp(min, max);
        self.limit = ((1.0 - self.smoothing) * limit + self.smoothing * new).clamp(min, max);
        self.limit()
    }
}

/// Builds a [`Vegas`]; every setting starts at the published default.
#[derive(Debug, Clone)]
pub struct VegasBuilder {
    initial: u32,
    min: u32,
    max: u32,
    smoothing: f64,
    probe_multiplier: u32,
    seed: Option<u64>,
}

impl VegasBuilder {
    fn new() -> Self {
        Self {
            initial: 20,
            min: 1,
            max: 1000,
            smoothing: 1.0,
            probe_multiplier: 30,
            seed: None,
        }
    }

    fn into_vegas(self) -> Vegas {
        let mut vegas = Vegas {
            limit: f64::from(self.initial),
            min: self.min,
            max: self.max,
            smoothing: self.smoothing,
            probe_multiplier: self.probe_multiplier,
            rtt_noload: 0.0,
            probe_count: 0,
            probe_jitter: 1.0,
            rng: Rng::seeded_or_entropy(self.seed),
            last_queue: None,
        };
        vegas.reset_probe_jitter();
        vegas
    }

    /// The limit before the first window (default 20).
    #[must_use]
    pub fn initial_limit(mut self, limit: u32) -> Self {
        self.initial = limit;
        self
    }

    /// The least the limit may become (default 1).
    #[must_use]
    pub fn min_limit(mut self, limit: u32) -> Self {
        self.min = limit;
        self
    }

    /// The most the limit may become (default 1000; Netflix's `maxConcurrency`).
    #[must_use]
    pub fn max_limit(mut self, limit: u32) -> Self {
        self.max = limit;
        self
    }

    /// How much of each new estimate is taken, in (0, 1] (default 1.0).
    #[must_use]
    pub fn smoothing(mut self, smoothing: f64) -> Self {
        self.smoothing = smoothing;
        self
    }

    /// Windows between resets of `rtt_noload`, per slot of the limit,
    /// at least 1 (default 30).
    #[must_use]
    pub fn probe_multiplier(mut self, multiplier: u32) -> Self {
        self.probe_multiplier = multiplier;
        self
    }

    /// Seeds the probe's jitter, for repeatable runs (default: entropy).
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The algorithm.
    ///
    /// # Errors
    /// A [`ConfigError`] for bounds that cannot hold, a smoothing outside
    /// (0, 1] or a probe multiplier of 0.
    pub fn build(self) -> Result<Vegas, ConfigError> {
        check_bounds(NAME, self.initial, self.min, self.max)?;
        if !(self.smoothing > 0.0 && self.smoothing <= 1.0) {
            return Err(ConfigError::new(
                NAME,
                "smoothing",
                "must be in (0, 1]",
                self.smoothing,
            ));
        }
        if self.probe_multiplier == 0 {
            return Err(ConfigError::new(
                NAME,
                "probe_multiplier",
                "must be at least 1",
                0,
            ));
        }
        Ok(self.into_vegas())
    }
}
