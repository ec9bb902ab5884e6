//! What an adaptive limit's algorithm is: a plain value that turns one
//! closed sample window into the next limit.

use std::fmt;
use std::time::Duration;

/// One closed sample window, as an [`Algorithm`] sees it: what the attempts
/// that finished in it measured.
///
/// ```
/// use std::time::Duration;
/// use steadfast::limit::Window;
/// let window = Window::new(12, 18).with_rtt(Duration::from_millis(20), Duration::from_millis(9));
/// assert_eq!((window.samples, window.max_in_flight, window.drops), (12, 18, 0));
/// assert_eq!(window.rtt, Some(Duration::from_millis(20)));
/// assert!(window.with_drops(1).dropped());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Window {
    /// Attempts that finished in the window, drops included.
    pub samples: u32,
    /// The most attempts in flight when one of them started.
    pub max_in_flight: u32,
    /// Attempts that ended in a drop signal (a timeout, an overload status).
    pub drops: u32,
    /// The average latency of the attempts that were measured (successes);
    /// `None` when there were none.
    pub rtt: Option<Duration>,
    /// The shortest of those latencies.
    pub min_rtt: Option<Duration>,
}

impl Window {
    /// A window of `samples` attempts, at most `max_in_flight` at once,
    /// with no drop and no latency measured.
    #[must_use]
    pub const fn new(samples: u32, max_in_flight: u32) -> Self {
        Self {
            samples,
            max_in_flight,
            drops: 0,
            rtt: None,
            min_rtt: None,
        }
    }

    /// The same window with an average latency `rtt` and a shortest `min`.
    #[must_use]
    pub const fn with_rtt(mut self, rtt: Duration, min: Duration) -> Self {
        self.rtt = Some(rtt);
        self.min_rtt = Some(min);
        self
    }

    /// The same window with `drops` of its attempts ending in a drop signal.
    #[must_use]
    pub const fn with_drops(mut self, drops: u32) -> Self {
        self.drops = drops;
        self
    }

    /// Whether any attempt in the window ended in a drop signal.
    #[must_use]
    pub const fn dropped(&self) -> bool {
        self.drops > 0
    }
}

/// An adaptive concurrency algorithm: given the window that just closed,
/// the next limit. A plain value, driven by whoever closes windows (a
/// [`ConcurrencyLimit`](super::ConcurrencyLimit), or a test by hand), with
/// no clock and no I/O of its own.
///
/// [`Gradient2`](super::Gradient2) (the default), [`Aimd`](super::Aimd) and
/// [`Vegas`](super::Vegas) are provided; any other can be written:
///
/// ```
/// use steadfast::limit::{Algorithm, Window};
///
/// /// Doubles on a clean window, halves on a drop.
/// #[derive(Debug)]
/// struct Doubling(u32);
///
/// impl Algorithm for Doubling {
///     fn name(&self) -> &'static str { "doubling" }
///     fn limit(&self) -> u32 { self.0 }
///     fn bounds(&self) -> (u32, u32) { (1, 64) }
///     fn update(&mut self, window: &Window) -> u32 {
///         self.0 = if window.dropped() { self.0 / 2 } else { self.0 * 2 }.clamp(1, 64);
///         self.0
///     }
/// }
///
/// let mut algorithm = Doubling(4);
/// assert_eq!(algorithm.update(&Window::new(10, 4)), 8);
/// assert_eq!(algorithm.update(&Window::new(10, 8).with_drops(1)), 4);
/// ```
pub trait Algorithm: fmt::Debug + Send + 'static {
    /// The algorithm's name, for telemetry (for example `"gradient2"`).
    fn name(&self) -> &'static str;

    /// The limit now (before any window: the initial one).
    fn limit(&self) -> u32;

    /// The least and the most the limit may be; [`update`](Self::update)
    /// stays between them.
    fn bounds(&self) -> (u32, u32);

    /// The limit after `window`.
    fn update(&mut self, window: &Window) -> u32;

    /// What the algorithm knows now, for a dashboard or a test
    /// ([`ConcurrencyLimit::algorithm_state`](super::ConcurrencyLimit::algorithm_state)).
    /// Reads only. An algorithm of your own may say nothing
    /// ([`AlgorithmState::Other`], the default).
    fn state(&self) -> AlgorithmState {
        AlgorithmState::Other
    }
}

/// What an adaptive algorithm knows now: the state its next step starts
/// from, each field `None` until measured.
///
/// ```
/// use std::time::Duration;
/// use steadfast::limit::{Algorithm, AlgorithmState, Gradient2, Window};
/// let mut g = Gradient2::builder().build()?;
/// assert_eq!(g.state(), AlgorithmState::Gradient2 { long_rtt: None, short_rtt: None, gradient: None });
/// g.update(&Window::new(30, 30).with_rtt(Duration::from_millis(10), Duration::from_millis(5)));
/// let AlgorithmState::Gradient2 { long_rtt, short_rtt, .. } = g.state() else { unreachable!() };
/// assert_eq!((long_rtt, short_rtt), (Some(Duration::from_millis(10)), Some(Duration::from_millis(10))));
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum AlgorithmState {
    /// [`Gradient2`](super::Gradient2): the long RTT it compares each
    /// window's against, the last window's (short) RTT, and the gradient it
    /// applied (tolerance × long / short, kept in 0.5..=1).
    Gradient2 {
        /// The long-term average RTT.
        long_rtt: Option<Duration>,
        /// The last measured window's average RTT.
        short_rtt: Option<Duration>,
        /// The last gradient applied.
        gradient: Option<f64>,
    },
    /// [`Vegas`](super::Vegas): its no-load RTT (the least it has seen,
    /// relearned at each probe) and the queue it estimated at its last step.
    Vegas {
        /// The RTT with no queue.
        no_load_rtt: Option<Duration>,
        /// `limit × (1 - no_load_rtt / rtt)`, rounded up, at the last step.
        queue: Option<f64>,
    },
    /// [`Aimd`](super::Aimd): what its last window decided.
    Aimd {
        /// The last step.
        last: Option<AimdStep>,
    },
    /// An algorithm that says nothing of itself.
    Other,
}

/// What an [`Aimd`](super::Aimd) window decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AimdStep {
    /// Up by one: the window was busy and clean.
    Increased,
    /// Down by the backoff ratio: a drop, or an RTT over the timeout.
    Decreased,
    /// Unchanged: too few in flight to learn from.
    Held,
}

/// `value` as a limit: truncated (as the published algorithms do) and kept
/// in `[min, max]`. NaN (which no finite input gives) is `min`.
pub(super) fn to_limit(value: f64, min: u32, max: u32) -> u32 {
    if value.is_nan() {
        return min;
    }
    let clamped = value.clamp(f64::from(min), f64::from(max));
    // In [min, max] ⊂ u32 after the clamp: the cast is exact after truncation.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let limit = clamped as u32;
    limit.clamp(min, max)
}

/// Nanoseconds of `d`, as a float.
pub(super) fn nanos_f64(d: Duration) -> f64 {
    d.as_secs_f64() * 1e9
}
