//! An endpoint's load: a peak-EWMA round-trip time, raised by the server's
//! own hints, times the calls in flight plus one.

use std::time::{Duration, Instant};

/// The published defaults: a sample counts half after about 7 s (decay
/// 10 s, as tower, Finagle and linkerd use); an endpoint with no sample is
/// taken to answer in 1 s.
pub const DEFAULT_DECAY: Duration = Duration::from_secs(10);

/// The round-trip time assumed for an endpoint before its first sample.
pub const DEFAULT_RTT: Duration = Duration::from_secs(1);

/// The penalty of a failure without a hint, and the least a hint counts
/// for (linkerd's load biaser).
pub const MIN_PENALTY: Duration = Duration::from_secs(5);

/// The most a hint counts for: a server cannot push an endpoint's load
/// higher than this with a `Retry-After` of a year.
pub const MAX_PENALTY: Duration = Duration::from_secs(300);

/// A peak-weighted moving average of an endpoint's round-trip time: a
/// sample above the estimate replaces it at once (a slow endpoint is seen
/// as slow at the first slow answer); one below pulls it down with weight
/// `1 - e^(-elapsed / decay)`, so the estimate forgets a peak over about
/// `decay`. A plain value on injected time.
///
/// ```
/// use std::time::{Duration, Instant};
/// use steadfast::endpoint::PeakEwma;
/// let t0 = Instant::now();
/// let mut rtt = PeakEwma::new(Duration::from_secs(10), Duration::from_millis(30), t0);
/// assert_eq!(rtt.estimate(t0), Duration::from_millis(30)); // the default, before a sample
/// rtt.observe(Duration::from_millis(200), t0);
/// assert_eq!(rtt.estimate(t0), Duration::from_millis(200)); // a peak counts at once
/// rtt.observe(Duration::from_millis(10), t0 + Duration::from_secs(10));
/// let later = rtt.estimate(t0 + Duration::from_secs(10)).as_secs_f64();
/// assert!((later - (0.2 * (-1f64).exp() + 0.01 * (1.0 - (-1f64).exp()))).abs() < 1e-9);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeakEwma {
    decay_secs: f64,
    /// The estimate, in seconds.
    rtt: f64,
    at: Instant,
}

impl PeakEwma {
    /// An estimate that starts at `initial` (an endpoint with no sample
    /// yet), forgetting over `decay`.
    #[must_use]
    pub fn new(decay: Duration, initial: Duration, now: Instant) -> Self {
        Self {
            decay_secs: decay.as_secs_f64().max(f64::MIN_POSITIVE),
            rtt: initial.as_secs_f64(),
            at: now,
        }
    }

    /// A sample: a round trip of `rtt` that ended at `now`.
    pub fn observe(&mut self, rtt: Duration, now: Instant) {
        let sample = rtt.as_secs_f64();
        if sample > self.rtt {
            self.rtt = sample;
        } else {
            let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
            let keep = (-elapsed / self.decay_secs).exp();
            self.rtt = self.rtt * keep + sample * (1.0 - keep);
        }
        self.at = self.at.max(now);
    }

    /// A server's hint that the endpoint wants room (`Retry-After`,
    /// pushback), or `None` for a failure without one: a peak sample of the
    /// hint, at least [`MIN_PENALTY`] and at most [`MAX_PENALTY`], so calls
    /// go elsewhere while the estimate decays back.
    pub fn penalize(&mut self, hint: Option<Duration>, now: Instant) {
        let penalty = hint.unwrap_or(MIN_PENALTY).clamp(MIN_PENALTY, MAX_PENALTY);
        self.observe(penalty, now);
    }

    /// The estimate at `now`: the last one, decayed toward nothing for the
    /// time since (an endpoint not heard from for long is tried again).
    #[must_use]
    pub fn estimate(&self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        Duration::from_secs_f64(self.rtt * (-elapsed / self.decay_secs).exp())
    }

    /// The load of an endpoint with this estimate and `in_flight` calls:
    /// `rtt × (in_flight + 1)`, in seconds.
    #[must_use]
    pub fn load(&self, in_flight: u64, now: Instant) -> f64 {
        self.estimate(now).as_secs_f64() * (in_flight as f64 + 1.0)
    }
}
