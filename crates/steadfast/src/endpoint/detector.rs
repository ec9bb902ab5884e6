//! The outlier detector: the sweep that ejects endpoints and returns them,
//! a plain value on injected time. The endpoint set calls it; so can a
//! simulator or a test, with the tallies it chooses.

use std::time::Instant;

use super::outlier::{Model, OutlierDetection};
use crate::call::Answer;
use crate::rng::Rng;

/// Which rule detected an outlier (A91's `detection_method`, and Envoy's
/// two consecutive rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// The success-rate rule.
    SuccessRate,
    /// The failure-percentage rule.
    FailurePercentage,
    /// Envoy's consecutive server errors.
    Consecutive5xx,
    /// Envoy's consecutive gateway errors.
    ConsecutiveGatewayFailure,
}

impl Method {
    /// The name in metrics and events.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SuccessRate => "success_rate",
            Self::FailurePercentage => "failure_percentage",
            Self::Consecutive5xx => "consecutive_5xx",
            Self::ConsecutiveGatewayFailure => "consecutive_gateway_failure",
        }
    }
}

/// Why a detected outlier was not ejected (A91's `unenforced_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unenforced {
    /// The enforcement percentage's draw said no.
    EnforcementPercentage,
    /// Enough endpoints are ejected already (`max_ejection_percent`).
    MaxEjectionOverflow,
}

impl Unenforced {
    /// The name in metrics and events.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::EnforcementPercentage => "enforcement_percentage",
            Self::MaxEjectionOverflow => "max_ejection_overflow",
        }
    }
}

/// What a sweep (or an inline consecutive-failure ejection) did to one
/// endpoint, by its index in the slice the detector was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Ejected by `method`, now for the `multiplier`th time running.
    Ejected {
        /// The endpoint's index.
        host: usize,
        /// The rule that found it.
        method: Method,
        /// Its ejection multiplier after this ejection.
        multiplier: u32,
    },
    /// Found an outlier by `method`, and not ejected.
    Unenforced {
        /// The endpoint's index.
        host: usize,
        /// The rule that found it.
        method: Method,
        /// Why it stays.
        reason: Unenforced,
    },
    /// Back in service: its ejection time is over.
    Returned {
        /// The endpoint's index.
        host: usize,
    },
}

/// One endpoint as the detector sees it: the tally of the interval that
/// just ended, and its ejection.
///
/// ```
/// use steadfast::endpoint::Host;
/// let mut host = Host::new();
/// host.set_tally(90, 10);
/// assert_eq!(host.tally(), (90, 10));
/// assert!(!host.is_ejected());
/// assert_eq!(host.multiplier(), 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Host {
    successes: u64,
    failures: u64,
    ejected_at: Option<Instant>,
    multiplier: u32,
}

impl Host {
    /// An endpoint never ejected, with an empty tally.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the tally the next sweep judges: the successes and failures
    /// since the previous sweep (A50's inactive bucket).
    pub fn set_tally(&mut self, successes: u64, failures: u64) {
        self.successes = successes;
        self.failures = failures;
    }

    /// The tally: successes and failures.
    #[must_use]
    pub fn tally(&self) -> (u64, u64) {
        (self.successes, self.failures)
    }

    /// Whether it is ejected.
    #[must_use]
    pub fn is_ejected(&self) -> bool {
        self.ejected_at.is_some()
    }

    /// When it was last ejected, while it is.
    #[must_use]
    pub fn ejected_at(&self) -> Option<Instant> {
        self.ejected_at
    }

    /// The ejection multiplier: up one per ejection, down one per sweep in
    /// service.
    #[must_use]
    pub fn multiplier(&self) -> u32 {
        self.multiplier
    }

    fn volume(&self) -> u64 {
        self.successes.saturating_add(self.failures)
    }
}

/// The detector: a configuration and the random source of its enforcement
/// draws. It holds no endpoint; each sweep is given them.
///
/// Envoy's published example: success rates of 50, 100, 100, 100 and 100 %
/// have mean 90 and standard deviation 20, so the threshold at factor 1.9 is
/// 52, and the first endpoint is ejected.
///
/// ```
/// use std::time::Instant;
/// use steadfast::endpoint::{Detector, Event, Host, Method, OutlierDetection};
/// let mut detector = Detector::new(OutlierDetection::a50().failure_percentage(None).build()?);
/// let mut hosts = vec![Host::new(); 5];
/// hosts[0].set_tally(50, 50);
/// for host in &mut hosts[1..] {
///     host.set_tally(100, 0);
/// }
/// let mut events = Vec::new();
/// detector.sweep(Instant::now(), &mut hosts, |e| events.push(e));
/// assert_eq!(events, [Event::Ejected { host: 0, method: Method::SuccessRate, multiplier: 1 }]);
/// assert!(hosts[0].is_ejected());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Detector {
    config: OutlierDetection,
    rng: Rng,
}

impl Detector {
    /// A detector running `config`.
    #[must_use]
    pub fn new(config: OutlierDetection) -> Self {
        let rng = Rng::seeded_or_entropy(config.seed);
        Self { config, rng }
    }

    /// Its configuration.
    #[must_use]
    pub fn config(&self) -> &OutlierDetection {
        &self.config
    }

    /// Whether `answer` counts as a failure under the configured model
    /// ([`OutlierDetection::is_failure`]).
    #[must_use]
    pub fn is_failure(&self, answer: Answer) -> bool {
        self.config.is_failure(answer)
    }

    /// One sweep at `now` over `hosts`, whose tallies hold the interval that
    /// just ended: ejects the outliers the configured rules find, within
    /// `max_ejection_percent`, and returns the endpoints whose ejection time
    /// is over; each change goes to `emit`. A50's order: success rate,
    /// failure percentage, then returns and multipliers; Envoy's: returns
    /// and multipliers first.
    pub fn sweep(&mut self, now: Instant, hosts: &mut [Host], mut emit: impl FnMut(Event)) {
        if self.config.model == Model::Envoy {
            self.returns(now, hosts, &mut emit);
        }
        if self.config.success_rate.is_some() {
            self.success_rate(now, hosts, &mut emit);
        }
        if self.config.failure_percentage.is_some() {
            self.failure_percentage(now, hosts, &mut emit);
        }
        if self.config.model == Model::A50 {
            self.returns(now, hosts, &mut emit);
        }
    }

    /// A consecutive-failure rule (`method`) reached its threshold on
    /// `hosts[host]` at `now`: Envoy ejects it at once, unless it is out
    /// already, within `max_ejection_percent` and the rule's enforcement.
    /// Nothing happens for a rule that is not configured. The caller resets
    /// its count of failures in a row.
    pub fn consecutive(
        &mut self,
        now: Instant,
        hosts: &mut [Host],
        host: usize,
        method: Method,
        mut emit: impl FnMut(Event),
    ) {
        let rule = match method {
            Method::Consecutive5xx => self.config.consecutive_5xx,
            Method::ConsecutiveGatewayFailure => self.config.consecutive_gateway_failure,
            Method::SuccessRate | Method::FailurePercentage => None,
        };
        let Some(rule) = rule else { return };
        if hosts.get(host).is_none_or(Host::is_ejected) {
            return;
        }
        self.try_eject(
            now,
            hosts,
            host,
            method,
            rule.enforcement_percentage,
            &mut emit,
        );
    }

    /// Success rate (A50 step 3 / Envoy's `processSuccessRateEjections`),
    /// over the endpoints in service with the volume.
    fn success_rate(&mut self, now: Instant, hosts: &mut [Host], emit: &mut impl FnMut(Event)) {
        let Some(rule) = self.config.success_rate else {
            return;
        };
        let envoy = self.config.model == Model::Envoy;
        if envoy && hosts.len() < rule.minimum_hosts as usize {
            return;
        }
        let volume = u64::from(rule.request_volume);
        let judged = |h: &Host| h.volume() >= volume && !h.is_ejected();
        let rates = || {
            hosts
                .iter()
                .filter(|h| judged(h))
                .map(|h| h.successes as f64 / h.volume() as f64)
        };
        let n = rates().count();
        if n == 0 || n < rule.minimum_hosts as usize {
            return;
        }
        let mean = rates().sum::<f64>() / n as f64;
        let variance = rates().map(|r| (r - mean) * (r - mean)).sum::<f64>() / n as f64;
        let threshold = mean - variance.sqrt() * (f64::from(rule.stdev_factor) / 1000.0);
        for i in 0..hosts.len() {
            let host = &hosts[i];
            if !judged(host) {
                continue;
            }
            let rate = host.successes as f64 / host.volume() as f64;
            if rate < threshold {
                self.try_eject(
                    now,
                    hosts,
                    i,
                    Method::SuccessRate,
                    rule.enforcement_percentage,
                    emit,
                );
            }
        }
    }

    /// Failure percentage (A50 step 4 / Envoy's failure-percentage rule).
    fn failure_percentage(
        &mut self,
        now: Instant,
        hosts: &mut [Host],
        emit: &mut impl FnMut(Event),
    ) {
        let Some(rule) = self.config.failure_percentage else {
            return;
        };
        let envoy = self.config.model == Model::Envoy;
        let volume = u64::from(rule.request_volume);
        let judged = |h: &Host| h.volume() >= volume && !h.is_ejected();
        // A50 counts the endpoints in the set; Envoy those with enough requests.
        let counted = if envoy {
            hosts.iter().filter(|h| judged(h)).count()
        } else {
            hosts.len()
        };
        if counted < rule.minimum_hosts as usize {
            return;
        }
        let threshold = u128::from(rule.threshold);
        for i in 0..hosts.len() {
            let host = &hosts[i];
            if !judged(host) {
                continue;
            }
            // In integers: failures / volume against threshold / 100.
            let failures = u128::from(host.failures) * 100;
            let bar = threshold * u128::from(host.volume());
            let outlier = if envoy {
                failures >= bar
            } else {
                failures > bar
            };
            if outlier {
                self.try_eject(
                    now,
                    hosts,
                    i,
                    Method::FailurePercentage,
                    rule.enforcement_percentage,
                    emit,
                );
            }
        }
    }

    /// An outlier found: ejected if the cap allows it and the enforcement
    /// draw says so. Neither rule judges an endpoint that is out already
    /// (Envoy's detector skips them; A50's algorithm would eject one again
    /// had it the volume, which only calls sent to it in panic give it:
    /// its ejection runs its course instead, and one endpoint is never
    /// reported twice in a sweep).
    fn try_eject(
        &mut self,
        now: Instant,
        hosts: &mut [Host],
        i: usize,
        method: Method,
        enforcement: u32,
        emit: &mut impl FnMut(Event),
    ) {
        if !self.cap_allows(hosts) {
            emit(Event::Unenforced {
                host: i,
                method,
                reason: Unenforced::MaxEjectionOverflow,
            });
            return;
        }
        let enforced = match enforcement {
            100.. => true,
            0 => false,
            p => self.rng.next_u64() % 100 < u64::from(p),
        };
        if !enforced {
            emit(Event::Unenforced {
                host: i,
                method,
                reason: Unenforced::EnforcementPercentage,
            });
            return;
        }
        let host = &mut hosts[i];
        host.ejected_at = Some(now);
        host.multiplier = host.multiplier.saturating_add(1);
        emit(Event::Ejected {
            host: i,
            method,
            multiplier: host.multiplier,
        });
    }

    /// Whether one more endpoint may be ejected. A50: not once the ejected
    /// share is over `max_ejection_percent` (so one always may be). Envoy:
    /// only while it is under it, or none is out and
    /// `always_eject_one_host` is set.
    fn cap_allows(&self, hosts: &[Host]) -> bool {
        let ejected = hosts.iter().filter(|h| h.is_ejected()).count() as u128;
        let share = ejected * 100;
        let cap = u128::from(self.config.max_ejection_percent) * hosts.len() as u128;
        match self.config.model {
            Model::A50 => share <= cap,
            Model::Envoy => share < cap || (ejected == 0 && self.config.always_eject_one_host),
        }
    }

    /// Returns the endpoints whose ejection is over (A50: strictly after
    /// the ejection time; Envoy: at it), and lowers the multiplier of each
    /// endpoint in service.
    fn returns(&mut self, now: Instant, hosts: &mut [Host], emit: &mut impl FnMut(Event)) {
        let envoy = self.config.model == Model::Envoy;
        for (i, host) in hosts.iter_mut().enumerate() {
            match host.ejected_at {
                None => host.multiplier = host.multiplier.saturating_sub(1),
                Some(at) => {
                    let out = now.saturating_duration_since(at);
                    let time = self.config.ejection_time(host.multiplier);
                    let over = if envoy { out >= time } else { out > time };
                    if over {
                        host.ejected_at = None;
                        emit(Event::Returned { host: i });
                    }
                }
            }
        }
    }
}
