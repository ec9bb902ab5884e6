//! The breaker's settings and their checks.

use std::time::Duration;

use super::state::MAX_PROBES;
use super::threshold::Threshold;
use super::window::{Cut, SLOTS, Window};
use super::{CircuitBreaker, DEFAULT_NAME};
use crate::backoff::Backoff;
use crate::clock::{Clock, Stopwatch, SystemClock};
use crate::config_error::ConfigError;
use crate::sync::{AtomicU64, CachePadded, StripedCounter};

/// The sampling window of a [`CircuitBreaker`]: the outcomes its failure
/// ratio is computed over.
///
/// ```
/// use std::time::Duration;
/// use steadfast::control::{CircuitBreaker, WindowKind};
/// let by_time = CircuitBreaker::builder().window(WindowKind::Time(Duration::from_secs(60))).build()?;
/// let by_count = CircuitBreaker::builder().window(WindowKind::Count(200)).build()?;
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WindowKind {
    /// The outcomes of the last stretch of time (100 ms to 1 day), in 10
    /// slots: outcomes leave it a tenth of the span at a time.
    Time(Duration),
    /// The outcomes of the last `n` calls (a multiple of 10, from 10 to
    /// 10,000,000), in 10 blocks of `n / 10`: outcomes leave it a block at
    /// a time, so it holds between `0.9·n + 1` and `n` of the latest calls.
    Count(u32),
}

/// Builds a [`CircuitBreaker`]; see [`CircuitBreaker::builder`] for the
/// defaults.
///
/// ```
/// use steadfast::control::CircuitBreaker;
/// let err = CircuitBreaker::builder().failure_ratio(0.0).build().unwrap_err();
/// assert_eq!(err.field(), "failure_ratio");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CircuitBreakerBuilder {
    pub(super) name: &'static str,
    pub(super) failure_ratio: f64,
    pub(super) window: WindowKind,
    pub(super) min_calls: u32,
    /// Whether `min_calls` was set, as opposed to the default (which a
    /// smaller count window lowers to its size).
    pub(super) min_calls_set: bool,
    pub(super) break_duration: Duration,
    pub(super) break_backoff: Option<Backoff>,
    pub(super) probes: u32,
    pub(super) probe_timeout: Option<Duration>,
    pub(super) slow_call: Option<Duration>,
}

const MIN_WINDOW: Duration = Duration::from_millis(100);
const MAX_SPAN: Duration = Duration::from_secs(86_400);
const MAX_COUNT: u32 = 10_000_000;

impl CircuitBreakerBuilder {
    pub(super) const fn new() -> Self {
        Self {
            name: DEFAULT_NAME,
            failure_ratio: 0.5,
            window: WindowKind::Time(Duration::from_secs(30)),
            min_calls: 100,
            min_calls_set: false,
            break_duration: Duration::from_secs(5),
            break_backoff: None,
            probes: 1,
            probe_timeout: None,
            slow_call: None,
        }
    }

    /// The name the breaker gives in refusals and events (default
    /// `"circuit breaker"`): name each breaker after what it protects.
    #[must_use]
    pub const fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The failure ratio (failures / calls in the window) at which the
    /// breaker opens; above 0, at most 1 (default 0.5). The rule is exact:
    /// it opens when failures / calls >= the ratio as written (`0.1` is
    /// 1/10, `2.0 / 3.0` is 2/3: the fraction with the smallest denominator
    /// whose `f64` is the ratio given), at every boundary, in both kinds of
    /// window.
    ///
    /// ```
    /// use steadfast::control::{CircuitBreaker, BreakerState, Outcome, WindowKind};
    /// use steadfast::RetryControl;
    /// let breaker = CircuitBreaker::builder()
    ///     .failure_ratio(2.0 / 3.0)
    ///     .window(WindowKind::Count(30))
    ///     .min_calls(30)
    ///     .build()?;
    /// for n in 0..30 {
    ///     // 20 failures of 30: exactly 2/3.
    ///     breaker.record(if n % 3 == 0 { Outcome::Success } else { Outcome::RetryableFailure });
    /// }
    /// assert_eq!(breaker.state(), BreakerState::Open);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub const fn failure_ratio(mut self, ratio: f64) -> Self {
        self.failure_ratio = ratio;
        self
    }

    /// The sampling window (default the last 30 s).
    #[must_use]
    pub const fn window(mut self, window: WindowKind) -> Self {
        self.window = window;
        self
    }

    /// The fewest calls the window must hold before the breaker may open,
    /// whatever the ratio; at least 1 (default 100). A count window holds
    /// at most its own size: set here larger than that, [`build`](Self::build)
    /// refuses it (it could never open), naming both numbers; left at the
    /// default, it is lowered to the window's size, as resilience4j does.
    ///
    /// ```
    /// use steadfast::control::{CircuitBreaker, WindowKind};
    /// let err = CircuitBreaker::builder().window(WindowKind::Count(20)).min_calls(100).build().unwrap_err();
    /// assert_eq!(err.field(), "min_calls");
    /// assert!(err.to_string().contains("20"), "{err}");
    /// // The default minimum fits itself to a small count window.
    /// assert!(CircuitBreaker::builder().window(WindowKind::Count(20)).build().is_ok());
    /// ```
    #[must_use]
    pub const fn min_calls(mut self, calls: u32) -> Self {
        self.min_calls = calls;
        self.min_calls_set = true;
        self
    }

    /// How long the breaker stays open before it lets probes through;
    /// 1 ms to 1 day (default 5 s).
    #[must_use]
    pub const fn break_duration(mut self, duration: Duration) -> Self {
        self.break_duration = duration;
        self
    }

    /// Makes breaks grow while probes keep failing: the `n`-th consecutive
    /// opening (counting from 0, reset when the breaker closes) lasts
    /// `backoff`'s delay at step `n` ([`Backoff::delay_at`], jitter
    /// included), capped by the backoff's `max_delay`. Replaces
    /// `break_duration` for every opening; default none.
    #[must_use]
    pub const fn break_backoff(mut self, backoff: Backoff) -> Self {
        self.break_backoff = Some(backoff);
        self
    }

    /// Probe calls let through in each half-open round; 1 to 4095 (default 1).
    #[must_use]
    pub const fn probes(mut self, probes: u32) -> Self {
        self.probes = probes;
        self
    }

    /// How long a half-open round waits for its probes' first outcome before
    /// it starts a new round with fresh probes (a probe whose caller went
    /// away never reports); default the break duration.
    #[must_use]
    pub const fn probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = Some(timeout);
        self
    }

    /// Counts an attempt that took at least `threshold` as a failure, even
    /// when it succeeded (resilience4j's slow calls); default none. Retry
    /// policies then time their attempts (one clock read before and one
    /// after each, in the blocking and the async executor); the hedger
    /// reports its copies' outcomes without durations.
    #[must_use]
    pub const fn slow_call(mut self, threshold: Duration) -> Self {
        self.slow_call = Some(threshold);
        self
    }

    /// Builds the breaker on the system clock.
    ///
    /// # Errors
    /// As [`build_with_clock`](Self::build_with_clock).
    pub fn build(self) -> Result<CircuitBreaker, ConfigError> {
        self.build_with_clock(SystemClock)
    }

    /// Builds the breaker on `clock`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the field when `failure_ratio` is not in
    /// `(0, 1]`; a time window is outside 100 ms..=1 day or a count window
    /// is not a multiple of 10 in 10..=10,000,000; `min_calls` is 0;
    /// `break_duration` or `probe_timeout` is outside 1 ms..=1 day; `probes`
    /// is outside 1..=4095; `slow_call` is zero.
    pub fn build_with_clock<C: Clock>(self, clock: C) -> Result<CircuitBreaker<C>, ConfigError> {
        let err = |field, rule, got: &dyn std::fmt::Debug| {
            Err(ConfigError::new(self.name, field, rule, got))
        };
        if !(self.failure_ratio > 0.0 && self.failure_ratio <= 1.0) {
            return err(
                "failure_ratio",
                "must be above 0 and at most 1",
                &self.failure_ratio,
            );
        }
        let cut = match self.window {
            WindowKind::Time(span) => {
                if !(MIN_WINDOW..=MAX_SPAN).contains(&span) {
                    return err("window", "must span 100 ms to 1 day", &span);
                }
                None
            }
            WindowKind::Count(n) => {
                if !(10..=MAX_COUNT).contains(&n) || n % 10 != 0 {
                    return err(
                        "window",
                        "must count a multiple of 10 calls, from 10 to 10000000",
                        &n,
                    );
                }
                Some(Cut::Count {
                    calls: u64::from(n) / SLOTS,
                })
            }
        };
        if self.min_calls == 0 {
            return err("min_calls", "must be at least 1", &self.min_calls);
        }
        let mut settings = self;
        if let WindowKind::Count(n) = settings.window
            && settings.min_calls > n
        {
            if settings.min_calls_set {
                return err(
                    "min_calls",
                    "must not exceed the count window's size, or the breaker could never open",
                    &format_args!("{} (the window holds {n})", settings.min_calls),
                );
            }
            settings.min_calls = n;
        }
        let times = (Duration::from_millis(1))..=MAX_SPAN;
        if !times.contains(&self.break_duration) {
            return err(
                "break_duration",
                "must be 1 ms to 1 day",
                &self.break_duration,
            );
        }
        if let Some(t) = self.probe_timeout
            && !times.contains(&t)
        {
            return err("probe_timeout", "must be 1 ms to 1 day", &t);
        }
        if !(1..=MAX_PROBES).contains(&self.probes) {
            return err("probes", "must be 1 to 4095", &self.probes);
        }
        if self.slow_call == Some(Duration::ZERO) {
            return err("slow_call", "must be above zero", &Duration::ZERO);
        }
        let window = match (cut, settings.window) {
            (Some(cut), _) => Window::new(cut),
            (None, WindowKind::Time(span)) => Window::timed(span),
            (None, WindowKind::Count(_)) => Window::new(Cut::Count { calls: 1 }),
        };
        Ok(CircuitBreaker {
            metrics: crate::telemetry::BreakerMetrics::new(settings.name),
            threshold: Threshold::new(settings.failure_ratio),
            settings,
            time: Stopwatch::new(clock),
            state: CachePadded(AtomicU64::new(super::state::Word::CLOSED.0)),
            deadline: AtomicU64::new(0),
            window,
            refusals: StripedCounter::new(),
            openings: AtomicU64::new(0),
        })
    }
}
