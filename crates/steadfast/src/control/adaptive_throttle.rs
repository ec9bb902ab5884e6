//! Client-side adaptive throttling (Google SRE book, "Handling Overload").

use std::fmt;
use std::time::Duration;

use super::slots::{Counter, TimeWindow};
use super::{Outcome, Refusal, RefusingFlag, RetryControl, report_transition};
use crate::clock::{Clock, Stopwatch, SystemClock};
use crate::config_error::ConfigError;
use crate::rng::Rng;
use crate::sync::{AtomicU64, Ordering};

const NAME: &str = "adaptive throttle";

const REQUESTS: Counter = Counter::A;
const ACCEPTS: Counter = Counter::B;

/// Added to the draw counter per draw: the odd 64-bit constant of the
/// golden ratio, so consecutive draws seed far-apart generators.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// Client-side adaptive throttling: rejects requests locally, before they
/// reach a backend that is already rejecting them.
///
/// From *Site Reliability Engineering* (Google, 2016), chapter 21 "Handling
/// Overload", section "Client-side throttling": over a recent window the
/// client counts `requests` (every request the application attempted,
/// including those this throttle rejected) and `accepts` (requests the
/// backend accepted), and rejects each new request locally with probability
///
/// ```text
/// max(0, (requests − K · accepts) / (requests + 1))
/// ```
///
/// With `K = 2` (the book's choice, the default) the backend keeps seeing up
/// to twice the traffic it accepts; lower `K` is more aggressive. The rule
/// applies to first attempts ([`admit`](RetryControl::admit)) as well as to
/// retries and hedges ([`allow_retry`](RetryControl::allow_retry)): each is
/// one request. [`Outcome::Success`] counts as an accept.
///
/// The window (2 minutes by default, as in the book) is 10 slots of a tenth
/// each, on the injected [`Clock`]. Rejections are counted (see
/// [`rejections`](Self::rejections)) so the caller can report them.
///
/// **Randomness without a lock.** Each draw takes the next value of an atomic
/// counter (`fetch_add` of a fixed odd constant) and seeds a fresh [`Rng`]
/// from it for one number. A seeded throttle used by one thread (the
/// simulator) draws the same sequence on every run; under concurrency the
/// draws are still independent, only their assignment to threads varies.
/// Refunds are ignored: a request that was granted here and then refused by
/// another control still counts as a request, exactly as a locally rejected
/// one does in the book's formula.
///
/// ```
/// use steadfast::clock::VirtualClock;
/// use steadfast::control::{AdaptiveThrottle, Outcome, RetryControl};
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// let throttle = AdaptiveThrottle::builder().seed(7).build_with_clock(VirtualClock::new())?;
/// // Healthy: every request accepted, never throttled.
/// for _ in 0..100 {
///     throttle.admit().unwrap();
///     throttle.record(Outcome::Success);
/// }
/// assert_eq!(throttle.rejection_probability(), 0.0);
/// // The backend starts rejecting everything.
/// let mut sent = 0;
/// for _ in 0..1000 {
///     if throttle.admit().is_ok() {
///         sent += 1;
///         throttle.record(Outcome::RetryableFailure);
///     }
/// }
/// // Rejections start once requests exceed 2 x accepts (200), and grow:
/// assert!(sent < 500, "sent {sent} of 1000");
/// assert!(throttle.rejection_probability() > 0.8); // (1100 - 200) / 1101
/// assert_eq!(throttle.rejections(), 1000 - sent);
/// # Ok(()) }
/// ```
pub struct AdaptiveThrottle<C: Clock = SystemClock> {
    time: Stopwatch<C>,
    window: TimeWindow,
    k: f64,
    span: Duration,
    draws: AtomicU64,
    rejections: AtomicU64,
    flag: RefusingFlag,
    /// 1 + the epoch of the last rejection (0: never).
    last_rejection: AtomicU64,
}

/// Builds an [`AdaptiveThrottle`]; see [`AdaptiveThrottle::builder`].
///
/// ```
/// use steadfast::control::AdaptiveThrottle;
/// let err = AdaptiveThrottle::builder().k(0.5).build().unwrap_err();
/// assert_eq!(err.field(), "k");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveThrottleBuilder {
    k: f64,
    window: Duration,
    seed: Option<u64>,
}

/// The state of an [`AdaptiveThrottle`] at one moment, for telemetry.
///
/// ```
/// use steadfast::control::AdaptiveThrottle;
/// let snap = AdaptiveThrottle::builder().build().unwrap().snapshot();
/// assert_eq!((snap.requests, snap.accepts, snap.rejections), (0, 0, 0));
/// assert_eq!(snap.rejection_probability, 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveThrottleSnapshot {
    /// Requests attempted within the window (including rejected ones).
    pub requests: u64,
    /// Requests the backend accepted within the window.
    pub accepts: u64,
    /// The probability that the next request is rejected locally.
    pub rejection_probability: f64,
    /// Requests rejected locally so far (first attempts and retries).
    pub rejections: u64,
    /// Whether the throttle is in its rejecting state: it rejected, and the
    /// probability has not yet been back at 0 in a later tenth of the window.
    pub refusing: bool,
}

/// The book's formula: `max(0, (requests − k·accepts) / (requests + 1))`.
fn probability(requests: u64, accepts: u64, k: f64) -> f64 {
    let requests = requests as f64;
    ((requests - k * accepts as f64) / (requests + 1.0)).max(0.0)
}

impl AdaptiveThrottle {
    /// A builder with the book's settings: `K = 2`, a 2-minute window, and a
    /// random seed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::control::AdaptiveThrottle;
    /// let throttle = AdaptiveThrottle::builder()
    ///     .k(1.5)
    ///     .window(Duration::from_secs(60))
    ///     .seed(42)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(throttle.rejections(), 0);
    /// ```
    #[must_use]
    pub const fn builder() -> AdaptiveThrottleBuilder {
        AdaptiveThrottleBuilder {
            k: 2.0,
            window: Duration::from_secs(120),
            seed: None,
        }
    }
}

impl<C: Clock> AdaptiveThrottle<C> {
    /// Requests rejected locally so far.
    ///
    /// ```
    /// use steadfast::control::AdaptiveThrottle;
    /// assert_eq!(AdaptiveThrottle::builder().build().unwrap().rejections(), 0);
    /// ```
    #[must_use]
    pub fn rejections(&self) -> u64 {
        self.rejections.load(Ordering::Relaxed)
    }

    /// The probability that a request made now is rejected locally.
    ///
    /// ```
    /// use steadfast::control::{AdaptiveThrottle, RetryControl};
    /// let throttle = AdaptiveThrottle::builder().seed(1).build().unwrap();
    /// throttle.admit().unwrap(); // 1 request, 0 accepts: (1 - 0) / 2
    /// assert_eq!(throttle.rejection_probability(), 0.5);
    /// ```
    #[must_use]
    pub fn rejection_probability(&self) -> f64 {
        let (requests, accepts) = self.window.sums(self.epoch());
        probability(requests, accepts, self.k)
    }

    /// The current state, for telemetry.
    ///
    /// ```
    /// use steadfast::control::{AdaptiveThrottle, Outcome, RetryControl};
    /// let throttle = AdaptiveThrottle::builder().build().unwrap();
    /// throttle.admit().unwrap();
    /// throttle.record(Outcome::Success);
    /// let snap = throttle.snapshot();
    /// assert_eq!((snap.requests, snap.accepts), (1, 1));
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> AdaptiveThrottleSnapshot {
        let (requests, accepts) = self.window.sums(self.epoch());
        AdaptiveThrottleSnapshot {
            requests,
            accepts,
            rejection_probability: probability(requests, accepts, self.k),
            rejections: self.rejections(),
            refusing: self.flag.get(),
        }
    }

    #[inline]
    fn epoch(&self) -> u64 {
        self.window.epoch(self.time.elapsed_nanos())
    }

    /// One request: decide, count it, and count the rejection if any.
    #[inline]
    fn request(&self) -> Result<(), Refusal> {
        let epoch = self.epoch();
        let (requests, accepts) = self.window.sums(epoch);
        self.window.add(epoch, REQUESTS);
        let p = probability(requests, accepts, self.k);
        // Healthy (p == 0): no draw at all.
        let rejected = p > 0.0 && {
            let seed = self.draws.fetch_add(GAMMA, Ordering::Relaxed);
            Rng::with_seed(seed).unit_f64() < p
        };
        // Refusing from the first rejection; recovered once the probability
        // is 0 in a later slot than the last rejection.
        let change = if rejected {
            if self.last_rejection.load(Ordering::Relaxed) != epoch + 1 {
                self.last_rejection.store(epoch + 1, Ordering::Relaxed);
            }
            self.flag.note(true, false)
        } else if self.flag.get() {
            let recovered = p == 0.0 && epoch + 1 > self.last_rejection.load(Ordering::Relaxed);
            self.flag.note(false, recovered)
        } else {
            None
        };
        if let Some(now_refusing) = change {
            report_transition(NAME, now_refusing, &self.snapshot());
        }
        if rejected {
            self.rejections.fetch_add(1, Ordering::Relaxed);
            Err(Refusal { by: NAME })
        } else {
            Ok(())
        }
    }
}

impl AdaptiveThrottleBuilder {
    /// `K`: how many times the accepted traffic the backend may still see;
    /// a finite number `>= 1` (below 1 would reject healthy traffic).
    #[must_use]
    pub const fn k(mut self, k: f64) -> Self {
        self.k = k;
        self
    }

    /// The span over which requests and accepts are counted; 10 ms to 24 h.
    #[must_use]
    pub const fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Seeds the random draws, for deterministic runs.
    #[must_use]
    pub const fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Builds the throttle on the system clock.
    ///
    /// # Errors
    ///
    /// As [`build_with_clock`](Self::build_with_clock).
    pub fn build(self) -> Result<AdaptiveThrottle, ConfigError> {
        self.build_with_clock(SystemClock)
    }

    /// Builds the throttle on `clock`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when `k` is NaN, infinite or below 1, or `window`
    /// is outside 10 ms..=24 h.
    pub fn build_with_clock<C: Clock>(self, clock: C) -> Result<AdaptiveThrottle<C>, ConfigError> {
        if !self.k.is_finite() || self.k < 1.0 {
            return Err(ConfigError::new(
                NAME,
                "k",
                "must be a finite number >= 1",
                self.k,
            ));
        }
        if self.window < Duration::from_millis(10) || self.window > Duration::from_secs(86_400) {
            return Err(ConfigError::new(
                NAME,
                "window",
                "must be between 10 ms and 24 h",
                self.window,
            ));
        }
        let seed = Rng::seeded_or_entropy(self.seed).next_u64();
        Ok(AdaptiveThrottle {
            window: TimeWindow::new(self.window),
            time: Stopwatch::new(clock),
            k: self.k,
            span: self.window,
            draws: AtomicU64::new(seed),
            rejections: AtomicU64::new(0),
            flag: RefusingFlag::new(),
            last_rejection: AtomicU64::new(0),
        })
    }
}

impl<C: Clock> RetryControl for AdaptiveThrottle<C> {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Rejects a first attempt with the current probability.
    #[inline]
    fn admit(&self) -> Result<(), Refusal> {
        self.request()
    }

    /// Counts an accept on [`Outcome::Success`].
    #[inline]
    fn record(&self, outcome: Outcome) {
        if outcome == Outcome::Success {
            self.window.add(self.epoch(), ACCEPTS);
        }
    }

    /// Rejects a retry or hedge with the current probability.
    #[inline]
    fn allow_retry(&self) -> Result<(), Refusal> {
        self.request()
    }
}

impl<C: Clock> fmt::Debug for AdaptiveThrottle<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveThrottle")
            .field("k", &self.k)
            .field("window", &self.span)
            .field("state", &self.snapshot())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
#[allow(clippy::float_cmp)] // the compared values are exact by construction
mod tests {
    use super::*;
    use crate::clock::VirtualClock;
    use proptest::prelude::*;

    fn throttle(k: f64, clock: &VirtualClock) -> AdaptiveThrottle<VirtualClock> {
        AdaptiveThrottle::builder()
            .k(k)
            .window(Duration::from_secs(120))
            .seed(3)
            .build_with_clock(clock.clone())
            .expect("valid settings")
    }

    #[test]
    fn formula_at_known_counts() {
        assert_eq!(probability(0, 0, 2.0), 0.0);
        assert_eq!(probability(100, 50, 2.0), 0.0); // exactly K times: not yet
        assert_eq!(probability(100, 40, 2.0), 20.0 / 101.0);
        assert_eq!(probability(100, 0, 2.0), 100.0 / 101.0);
        assert_eq!(probability(99, 0, 2.0), 0.99);
        assert_eq!(probability(300, 100, 1.5), 150.0 / 301.0);
        assert_eq!(probability(10, 100, 2.0), 0.0);
    }

    #[test]
    fn counts_requests_and_accepts_in_the_window() {
        let clock = VirtualClock::new();
        let t = throttle(2.0, &clock);
        for _ in 0..20 {
            t.admit().unwrap();
            t.record(Outcome::Success);
        }
        // 40 more requests, none accepted: p climbs from 0 as they come.
        let sent = (0..40).filter(|_| t.admit().is_ok()).count() as u64;
        assert_eq!(t.rejections(), 40 - sent);
        t.record(Outcome::RetryableFailure); // not an accept
        let snap = t.snapshot();
        assert_eq!((snap.requests, snap.accepts), (60, 20));
        assert_eq!(snap.rejection_probability, 20.0 / 61.0);
        // Everything expires after the window.
        clock.sleep_blocking(Duration::from_secs(120));
        assert_eq!(t.rejection_probability(), 0.0);
    }

    #[test]
    fn rejection_rate_matches_the_probability() {
        let clock = VirtualClock::new();
        let t = throttle(2.0, &clock);
        // Start at p just under 0.5: 1000 requests, 250 accepts ->
        // (1000 - 500) / 1001.
        for _ in 0..1000 {
            t.window.add(0, REQUESTS);
        }
        for _ in 0..250 {
            t.window.add(0, ACCEPTS);
        }
        let p0 = t.rejection_probability();
        let rejected = (0..2000).filter(|_| t.allow_retry().is_err()).count();
        // Every decision adds a request, so p drifts up from p0 to about
        // (3000 - 500) / 3001 = 0.83; the mean over the run is about 0.7.
        assert!(p0 > 0.49 && p0 < 0.5);
        assert!((1200..1600).contains(&rejected), "{rejected}");
        assert_eq!(t.rejections(), rejected as u64);
    }

    #[test]
    fn seeded_runs_are_deterministic() {
        let run = || {
            let clock = VirtualClock::new();
            let t = throttle(2.0, &clock);
            (0..500).map(|_| t.admit().is_ok()).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn validation() {
        let b = AdaptiveThrottle::builder();
        for k in [f64::NAN, f64::INFINITY, 0.99, -2.0] {
            assert_eq!(b.k(k).build().unwrap_err().field(), "k", "{k}");
        }
        for w in [
            Duration::ZERO,
            Duration::from_millis(9),
            Duration::from_secs(86_401),
        ] {
            assert_eq!(b.window(w).build().unwrap_err().field(), "window");
        }
        assert!(b.k(1.0).window(Duration::from_millis(10)).build().is_ok());
    }

    proptest! {
        /// Never rejects while the backend accepts at least 1/K of the
        /// requests; the probability is always in [0, 1).
        #[test]
        fn healthy_traffic_is_never_rejected(
            k in 1.0f64..4.0,
            ops in proptest::collection::vec(any::<bool>(), 0..300),
        ) {
            let clock = VirtualClock::new();
            let t = throttle(k, &clock);
            for fail in ops {
                let p = t.rejection_probability();
                prop_assert!((0.0..1.0).contains(&p));
                let snap = t.snapshot();
                let healthy = snap.requests as f64 <= k * snap.accepts as f64;
                let ok = t.admit().is_ok();
                if healthy {
                    prop_assert!(ok);
                }
                if ok && !fail {
                    t.record(Outcome::Success);
                }
            }
        }
    }
}
