//! How long a hedged call waits before sending its next copy.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::config_error::ConfigError;

/// The hedging delay of a [`HedgePolicy`](crate::policy::HedgePolicy): the time
/// between one copy and the next while no copy has succeeded.
///
/// Made from a `Duration` (fixed; [`Duration::ZERO`] sends every copy at once)
/// or from an `Arc<AdaptiveDelay>` (a running latency quantile).
///
/// ```
/// use std::time::Duration;
/// use steadfast::policy::HedgeDelay;
/// let fixed = HedgeDelay::from(Duration::from_millis(20));
/// assert_eq!(fixed.current(), Duration::from_millis(20));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum HedgeDelay {
    /// The same delay for every call.
    Fixed(Duration),
    /// A running quantile of recent call latencies, shared by every call
    /// (and every policy) holding the same `Arc`.
    Adaptive(Arc<AdaptiveDelay>),
}

impl HedgeDelay {
    /// The delay a call starting now uses (one atomic load for an adaptive
    /// delay).
    ///
    /// ```
    /// use std::time::Duration;
    /// let d = steadfast::policy::HedgeDelay::Fixed(Duration::ZERO);
    /// assert_eq!(d.current(), Duration::ZERO);
    /// ```
    #[inline]
    #[must_use]
    pub fn current(&self) -> Duration {
        match self {
            Self::Fixed(d) => *d,
            Self::Adaptive(a) => a.current(),
        }
    }

    /// The adaptive delay, if this is one.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert!(steadfast::policy::HedgeDelay::from(Duration::ZERO).adaptive().is_none());
    /// ```
    #[must_use]
    pub fn adaptive(&self) -> Option<&Arc<AdaptiveDelay>> {
        match self {
            Self::Adaptive(a) => Some(a),
            Self::Fixed(_) => None,
        }
    }
}

impl From<Duration> for HedgeDelay {
    fn from(d: Duration) -> Self {
        Self::Fixed(d)
    }
}

impl From<Arc<AdaptiveDelay>> for HedgeDelay {
    fn from(a: Arc<AdaptiveDelay>) -> Self {
        Self::Adaptive(a)
    }
}

impl From<AdaptiveDelay> for HedgeDelay {
    fn from(a: AdaptiveDelay) -> Self {
        Self::Adaptive(Arc::new(a))
    }
}

/// The largest latency window an [`AdaptiveDelay`] keeps: 1024 samples.
pub const MAX_WINDOW: usize = 1024;

const EMPTY: u64 = u64::MAX;

/// A hedging delay that follows a quantile of recent call latencies, for
/// example "hedge once a call is slower than 95 % of recent calls".
///
/// Shared behind an `Arc` by every call that uses it, and **lock-free**: the
/// latencies live in a ring of atomics; every `refresh_every` samples the
/// recording call recomputes the quantile (a copy of the window to the stack
/// and a selection, O(window), no allocation) and publishes it in one atomic.
/// Reading the delay at the start of a call is one atomic load. Until
/// `min_samples` latencies have been recorded the delay is the `fallback`.
/// Every value handed out is clamped to `[min, max]`.
///
/// Races between concurrent recorders can only reorder samples within the
/// window, which a quantile does not see.
///
/// The hedging executor records, on each success, the time from the call's
/// start to that success. When the first copy wins that is its latency; when
/// a hedge wins it is a lower bound of the first copy's latency (which is
/// above the delay anyway), so the share of calls slower than the current
/// delay is preserved and the quantile stays where it should. Starting from
/// a fallback below the quantile, the delay climbs to it at the pace of the
/// hedges' own latency (each refresh sees calls that ended at delay + the
/// winning hedge's latency); from above, it drops to it at the next refresh.
///
/// ```
/// use std::time::Duration;
/// use steadfast::policy::AdaptiveDelay;
///
/// let delay = AdaptiveDelay::builder(Duration::from_millis(50))
///     .quantile(0.9)
///     .window(100)
///     .min_samples(10)
///     .refresh_every(10)
///     .build()?;
/// assert_eq!(delay.current(), Duration::from_millis(50)); // fallback: no data yet
/// for ms in 1..=100 {
///     delay.record(Duration::from_millis(ms));
/// }
/// assert_eq!(delay.current(), Duration::from_millis(90)); // the 90th percentile
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub struct AdaptiveDelay {
    quantile: f64,
    min_samples: u64,
    refresh_every: u64,
    fallback: Duration,
    min: Duration,
    max: Duration,
    samples: Box<[AtomicU64]>,
    recorded: AtomicU64,
    current: AtomicU64,
}

impl fmt::Debug for AdaptiveDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveDelay")
            .field("quantile", &self.quantile)
            .field("window", &self.samples.len())
            .field("min_samples", &self.min_samples)
            .field("refresh_every", &self.refresh_every)
            .field("fallback", &self.fallback)
            .field("min", &self.min)
            .field("max", &self.max)
            .field("recorded", &self.recorded())
            .field("current", &self.current())
            .finish()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos())
        .unwrap_or(EMPTY - 1)
        .min(EMPTY - 1)
}

impl AdaptiveDelay {
    /// A builder: `fallback` is the delay used until enough latencies are
    /// known. Defaults: quantile 0.95, a window sized to the quantile (see
    /// [`window`](AdaptiveDelayBuilder::window): 640 latencies at 0.95), min
    /// samples 32, refresh every window/16 samples, no clamp.
    ///
    /// ```
    /// use std::time::Duration;
    /// let d = steadfast::policy::AdaptiveDelay::builder(Duration::from_millis(10)).build()?;
    /// assert_eq!(d.quantile(), 0.95);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn builder(fallback: Duration) -> AdaptiveDelayBuilder {
        AdaptiveDelayBuilder {
            quantile: 0.95,
            window: None,
            min_samples: 32,
            refresh_every: None,
            fallback,
            min: Duration::ZERO,
            max: Duration::MAX,
        }
    }

    /// The delay a call starting now should use: one atomic load.
    ///
    /// ```
    /// use std::time::Duration;
    /// let d = steadfast::policy::AdaptiveDelay::builder(Duration::from_millis(7)).build()?;
    /// assert_eq!(d.current(), Duration::from_millis(7));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn current(&self) -> Duration {
        Duration::from_nanos(self.current.load(Ordering::Relaxed))
    }

    /// Records one latency; every `refresh_every` samples (and when
    /// `min_samples` is first reached) it recomputes the quantile.
    ///
    /// ```
    /// use std::time::Duration;
    /// let d = steadfast::policy::AdaptiveDelay::builder(Duration::from_secs(1))
    ///     .min_samples(1).refresh_every(1).build()?;
    /// d.record(Duration::from_millis(3));
    /// assert_eq!(d.current(), Duration::from_millis(3));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn record(&self, latency: Duration) {
        let i = self.recorded.fetch_add(1, Ordering::Relaxed);
        let window = self.samples.len() as u64;
        // `i % window` < window <= MAX_WINDOW: the conversion cannot fail.
        let slot = usize::try_from(i % window).unwrap_or(0);
        self.samples[slot].store(nanos(latency), Ordering::Relaxed);
        let n = i.saturating_add(1);
        if n >= self.min_samples && (n == self.min_samples || n.is_multiple_of(self.refresh_every))
        {
            self.refresh();
        }
    }

    /// Recomputes the quantile from the window now.
    fn refresh(&self) {
        let mut buf = [0u64; MAX_WINDOW];
        let mut len = 0;
        for s in &*self.samples {
            let v = s.load(Ordering::Relaxed);
            if v != EMPTY {
                buf[len] = v;
                len += 1;
            }
        }
        if len == 0 {
            return;
        }
        let values = &mut buf[..len];
        let k = quantile_index(self.quantile, len);
        let (_, q, _) = values.select_nth_unstable(k);
        let d = Duration::from_nanos(*q).clamp(self.min, self.max);
        self.current.store(nanos(d), Ordering::Relaxed);
    }

    /// Latencies recorded so far (all time, not just the window).
    ///
    /// ```
    /// use std::time::Duration;
    /// let d = steadfast::policy::AdaptiveDelay::builder(Duration::from_secs(1)).build()?;
    /// d.record(Duration::from_millis(3));
    /// assert_eq!(d.recorded(), 1);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    /// The quantile followed, in `(0, 1]`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let d = steadfast::policy::AdaptiveDelay::builder(Duration::from_secs(1)).quantile(0.99).build()?;
    /// assert_eq!(d.quantile(), 0.99);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn quantile(&self) -> f64 {
        self.quantile
    }

    /// The number of recent latencies the quantile is taken over.
    ///
    /// ```
    /// use std::time::Duration;
    /// let d = steadfast::policy::AdaptiveDelay::builder(Duration::from_secs(1)).window(64).min_samples(8).build()?;
    /// assert_eq!(d.window(), 64);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn window(&self) -> usize {
        self.samples.len()
    }
}

/// The window a quantile gets by default: room for 32 latencies above it,
/// within `256..=MAX_WINDOW`. Called on a quantile checked to be in
/// `(0, 1]` (or NaN, which `build` refuses afterwards).
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a finite value clamped to 256..=1024 first"
)]
fn default_window(q: f64) -> usize {
    let above = 1.0 - q;
    if above > 0.0 {
        // Less a hair, so that 1 - 0.9 = 0.0999… does not make 321.
        (32.0 / above - 1e-6).ceil().clamp(256.0, MAX_WINDOW as f64) as usize
    } else {
        MAX_WINDOW
    }
}

/// The nearest-rank index of quantile `q` among `len` sorted values.
fn quantile_index(q: f64, len: usize) -> usize {
    // ceil(q * len) - 1, within [0, len - 1]. `len` <= MAX_WINDOW, exact in f64.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = (q * len as f64).ceil() as usize;
    rank.clamp(1, len) - 1
}

/// Builds an [`AdaptiveDelay`]; made by [`AdaptiveDelay::builder`].
#[derive(Debug, Clone)]
pub struct AdaptiveDelayBuilder {
    quantile: f64,
    window: Option<usize>,
    min_samples: usize,
    refresh_every: Option<usize>,
    fallback: Duration,
    min: Duration,
    max: Duration,
}

impl AdaptiveDelayBuilder {
    /// The quantile of recent latencies to hedge at, in `(0, 1]` (default 0.95).
    #[must_use]
    pub fn quantile(mut self, q: f64) -> Self {
        self.quantile = q;
        self
    }

    /// How many recent latencies to keep, `1..=`[`MAX_WINDOW`].
    ///
    /// The default holds at least 32 latencies above the quantile:
    /// `32 / (1 - quantile)`, within `256..=`[`MAX_WINDOW`] (256 at 0.5,
    /// 640 at 0.95, 1024 from 0.97 up). A window that holds only a few calls
    /// above the quantile lets chance decide where it lies: at the 97th
    /// percentile with 2 % slow calls, 256 latencies hold 5 slow ones on
    /// average and more than 3 % one window in seven, and in such a window
    /// the quantile is a slow call's, so the delay climbs towards the slow
    /// mode until the window turns over.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::policy::AdaptiveDelay;
    /// let d = AdaptiveDelay::builder(Duration::from_millis(5)).quantile(0.97).build()?;
    /// assert_eq!(d.window(), 1024);
    /// let d = AdaptiveDelay::builder(Duration::from_millis(5)).window(100).build()?;
    /// assert_eq!(d.window(), 100);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn window(mut self, samples: usize) -> Self {
        self.window = Some(samples);
        self
    }

    /// Latencies needed before the quantile replaces the fallback,
    /// `1..=window` (default 32).
    #[must_use]
    pub fn min_samples(mut self, samples: usize) -> Self {
        self.min_samples = samples;
        self
    }

    /// Recompute the quantile every this many samples, `1..=window`
    /// (default window / 16, at least 1).
    #[must_use]
    pub fn refresh_every(mut self, samples: usize) -> Self {
        self.refresh_every = Some(samples);
        self
    }

    /// The shortest delay handed out (default zero).
    #[must_use]
    pub fn min(mut self, min: Duration) -> Self {
        self.min = min;
        self
    }

    /// The longest delay handed out (default unbounded).
    #[must_use]
    pub fn max(mut self, max: Duration) -> Self {
        self.max = max;
        self
    }

    /// Checks the settings and builds the delay.
    ///
    /// # Errors
    /// A [`ConfigError`] for a quantile outside `(0, 1]` (or NaN), a window
    /// of 0 or above [`MAX_WINDOW`], `min_samples` or `refresh_every` outside
    /// `1..=window`, or `min > max`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let err = steadfast::policy::AdaptiveDelay::builder(Duration::from_millis(5))
    ///     .quantile(f64::NAN)
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "quantile");
    /// ```
    pub fn build(self) -> Result<AdaptiveDelay, ConfigError> {
        const WHAT: &str = "adaptive hedging delay";
        if !(self.quantile > 0.0 && self.quantile <= 1.0) {
            return Err(ConfigError::new(
                WHAT,
                "quantile",
                "must be a number in (0, 1]",
                self.quantile,
            ));
        }
        let window = self.window.unwrap_or_else(|| default_window(self.quantile));
        if window == 0 || window > MAX_WINDOW {
            return Err(ConfigError::new(
                WHAT,
                "window",
                "must be in 1..=1024",
                window,
            ));
        }
        if self.min_samples == 0 || self.min_samples > window {
            return Err(ConfigError::new(
                WHAT,
                "min_samples",
                "must be in 1..=window",
                self.min_samples,
            ));
        }
        let refresh_every = self.refresh_every.unwrap_or((window / 16).max(1));
        if refresh_every == 0 || refresh_every > window {
            return Err(ConfigError::new(
                WHAT,
                "refresh_every",
                "must be in 1..=window",
                refresh_every,
            ));
        }
        if self.min > self.max {
            return Err(ConfigError::new(
                WHAT,
                "min",
                "must not exceed max",
                (self.min, self.max),
            ));
        }
        let fallback = self.fallback.clamp(self.min, self.max);
        Ok(AdaptiveDelay {
            quantile: self.quantile,
            min_samples: self.min_samples as u64,
            refresh_every: refresh_every as u64,
            fallback,
            min: self.min,
            max: self.max,
            samples: (0..window).map(|_| AtomicU64::new(EMPTY)).collect(),
            recorded: AtomicU64::new(0),
            current: AtomicU64::new(nanos(fallback)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_default_window_holds_32_latencies_above_the_quantile() {
        let window = |q: f64| {
            AdaptiveDelay::builder(ms(1))
                .quantile(q)
                .build()
                .expect("valid")
                .window()
        };
        assert_eq!(window(0.5), 256, "at least 256");
        assert_eq!(window(0.9), 320);
        assert_eq!(window(0.95), 640);
        assert_eq!(window(0.97), MAX_WINDOW, "1067, capped");
        assert_eq!(window(1.0), MAX_WINDOW);
        // Set by hand, it is what it says, and checked.
        let b = || AdaptiveDelay::builder(ms(1)).quantile(0.99);
        assert_eq!(b().window(100).build().expect("valid").window(), 100);
        assert_eq!(b().window(0).build().unwrap_err().field(), "window");
        assert_eq!(
            b().window(MAX_WINDOW + 1).build().unwrap_err().field(),
            "window"
        );
    }

    #[test]
    fn nearest_rank_index() {
        assert_eq!(quantile_index(0.95, 100), 94);
        assert_eq!(quantile_index(0.5, 1), 0);
        assert_eq!(quantile_index(1.0, 10), 9);
        assert_eq!(quantile_index(0.01, 10), 0);
    }

    #[test]
    fn fallback_until_min_samples() {
        let d = AdaptiveDelay::builder(ms(40))
            .min_samples(5)
            .window(10)
            .refresh_every(1)
            .build()
            .unwrap();
        for _ in 0..4 {
            d.record(ms(1));
        }
        assert_eq!(d.current(), ms(40));
        d.record(ms(1));
        assert_eq!(d.current(), ms(1));
    }

    #[test]
    fn the_window_forgets_old_latencies() {
        let d = AdaptiveDelay::builder(ms(40))
            .quantile(0.5)
            .window(10)
            .min_samples(10)
            .refresh_every(10)
            .build()
            .unwrap();
        for _ in 0..10 {
            d.record(ms(100));
        }
        assert_eq!(d.current(), ms(100));
        for _ in 0..10 {
            d.record(ms(2));
        }
        assert_eq!(d.current(), ms(2));
    }

    #[test]
    fn clamped() {
        let d = AdaptiveDelay::builder(ms(1))
            .min(ms(5))
            .max(ms(50))
            .min_samples(1)
            .refresh_every(1)
            .build()
            .unwrap();
        assert_eq!(d.current(), ms(5), "the fallback is clamped too");
        d.record(ms(500));
        assert_eq!(d.current(), ms(50));
    }

    #[test]
    fn bad_settings_are_config_errors() {
        let b = || AdaptiveDelay::builder(ms(1));
        for (q, ok) in [
            (0.0, false),
            (-0.1, false),
            (1.0, true),
            (1.5, false),
            (f64::NAN, false),
            (f64::INFINITY, false),
        ] {
            assert_eq!(b().quantile(q).build().is_ok(), ok, "quantile {q}");
        }
        assert_eq!(b().window(0).build().unwrap_err().field(), "window");
        assert_eq!(
            b().window(MAX_WINDOW + 1).build().unwrap_err().field(),
            "window"
        );
        assert_eq!(
            b().min_samples(0).build().unwrap_err().field(),
            "min_samples"
        );
        assert_eq!(
            b().window(8).min_samples(9).build().unwrap_err().field(),
            "min_samples"
        );
        assert_eq!(
            b().refresh_every(0).build().unwrap_err().field(),
            "refresh_every"
        );
        assert_eq!(
            b().min(ms(2)).max(ms(1)).build().unwrap_err().field(),
            "min"
        );
    }

    #[test]
    fn concurrent_recorders_agree_on_a_constant() {
        let d = Arc::new(
            AdaptiveDelay::builder(ms(1))
                .window(64)
                .min_samples(8)
                .refresh_every(4)
                .build()
                .unwrap(),
        );
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let d = Arc::clone(&d);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        d.record(ms(9));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(d.recorded(), 4000);
        assert_eq!(d.current(), ms(9));
    }
}
