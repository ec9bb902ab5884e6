//! Outlier detection's configuration: gRFC A50's, the default, and a preset
//! with Envoy's own rules where they differ ([`OutlierDetection::envoy`]).
//!
//! What each model counts as a failure is part of the model
//! ([`Answer`](crate::call::Answer)): A50 counts every call that was not OK,
//! Envoy counts server errors (5xx, and gateway errors for its own
//! detector), never a 429 or another 4xx.

use std::time::Duration;

use crate::call::Answer;
use crate::config_error::ConfigError;

/// Success-rate ejection: an endpoint whose success rate is below
/// `mean - stdev × stdev_factor / 1000` of the endpoints with enough
/// requests is ejected. The defaults are A50's and Envoy's.
///
/// ```
/// use steadfast::endpoint::SuccessRate;
/// let rule = SuccessRate::default();
/// assert_eq!((rule.stdev_factor, rule.enforcement_percentage), (1900, 100));
/// assert_eq!((rule.minimum_hosts, rule.request_volume), (5, 100));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuccessRate {
    /// The factor of the standard deviation, in thousandths (1900 is 1.9).
    pub stdev_factor: u32,
    /// The chance, in percent, that a detected outlier is really ejected.
    pub enforcement_percentage: u32,
    /// How many endpoints must have enough requests for the rule to run.
    pub minimum_hosts: u32,
    /// The requests an endpoint needs in one interval to be judged (at least 1).
    pub request_volume: u32,
}

impl Default for SuccessRate {
    fn default() -> Self {
        Self {
            stdev_factor: 1900,
            enforcement_percentage: 100,
            minimum_hosts: 5,
            request_volume: 100,
        }
    }
}

/// Failure-percentage ejection: an endpoint whose share of failures is over
/// `threshold` percent (A50: strictly over; Envoy: at or over) is ejected,
/// whatever the others do. The defaults are A50's; Envoy's preset enforces
/// it 0 % of the time unless told otherwise.
///
/// ```
/// use steadfast::endpoint::FailurePercentage;
/// let rule = FailurePercentage::default();
/// assert_eq!((rule.threshold, rule.enforcement_percentage), (85, 100));
/// assert_eq!((rule.minimum_hosts, rule.request_volume), (5, 50));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailurePercentage {
    /// The failure percentage that marks an outlier (0 to 100).
    pub threshold: u32,
    /// The chance, in percent, that a detected outlier is really ejected.
    pub enforcement_percentage: u32,
    /// How many endpoints the set needs for the rule to run (A50: in the
    /// set; Envoy: with enough requests).
    pub minimum_hosts: u32,
    /// The requests an endpoint needs in one interval to be judged (at least 1).
    pub request_volume: u32,
}

impl Default for FailurePercentage {
    fn default() -> Self {
        Self {
            threshold: 85,
            enforcement_percentage: 100,
            minimum_hosts: 5,
            request_volume: 50,
        }
    }
}

/// Envoy's consecutive-failure ejection: the `threshold`th failure in a row
/// ejects the endpoint at once, not at the next sweep.
///
/// ```
/// use steadfast::endpoint::Consecutive;
/// let rule = Consecutive { threshold: 5, enforcement_percentage: 100 };
/// assert_eq!(rule.threshold, 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Consecutive {
    /// Failures in a row that eject (at least 1).
    pub threshold: u32,
    /// The chance, in percent, that a detected outlier is really ejected.
    pub enforcement_percentage: u32,
}

/// Whose rules decide where A50 and Envoy differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// gRFC A50: every call that was not OK is a failure; failure percentage
    /// over the threshold strictly; ejections stop once the ejected share
    /// is *over* `max_ejection_percent` (so one is always allowed); an
    /// endpoint returns at the first sweep strictly after its ejection time.
    A50,
    /// Envoy's detector: server errors are failures (a 4xx, 429 included,
    /// is a success for it); failure percentage at or over the threshold;
    /// an ejection needs the ejected share *under* `max_ejection_percent`
    /// (none at all when it is 0, unless `always_eject_one_host`); an
    /// endpoint returns at the first sweep at or after its ejection time,
    /// before that sweep's detection runs; ejected endpoints are left out
    /// of the statistics.
    Envoy,
}

/// The configuration of outlier detection: when an endpoint is ejected
/// (taken out of the picking), for how long, and how many may be out at
/// once. Built by [`OutlierDetection::a50`] (the default: gRFC A50 with its
/// defaults) or [`OutlierDetection::envoy`] (Envoy's detector), then
/// [`OutlierDetectionBuilder::build`].
///
/// Ejection time: `base_ejection_time × multiplier`, where the multiplier
/// grows by one at each ejection and falls by one at each sweep the endpoint
/// is in service, capped at `max(base_ejection_time, max_ejection_time)`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::endpoint::OutlierDetection;
/// let a50 = OutlierDetection::a50().build()?;
/// assert_eq!(a50.interval(), Duration::from_secs(10));
/// assert_eq!(a50.base_ejection_time(), Duration::from_secs(30));
/// assert_eq!(a50.max_ejection_percent(), 10);
/// let fast = OutlierDetection::a50().interval(Duration::from_secs(1)).build()?;
/// assert_eq!(fast.interval(), Duration::from_secs(1));
/// assert!(OutlierDetection::a50().max_ejection_percent(101).build().is_err());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlierDetection {
    pub(super) model: Model,
    pub(super) interval: Duration,
    pub(super) base_ejection_time: Duration,
    pub(super) max_ejection_time: Duration,
    pub(super) max_ejection_percent: u32,
    pub(super) success_rate: Option<SuccessRate>,
    pub(super) failure_percentage: Option<FailurePercentage>,
    pub(super) consecutive_5xx: Option<Consecutive>,
    pub(super) consecutive_gateway_failure: Option<Consecutive>,
    pub(super) always_eject_one_host: bool,
    pub(super) seed: Option<u64>,
}

impl OutlierDetection {
    /// gRFC A50 with its defaults: a sweep every 10 s; success-rate and
    /// failure-percentage ejection ([`SuccessRate::default`],
    /// [`FailurePercentage::default`]); 30 s base ejection, 300 s at most;
    /// at most 10 % of the endpoints out, one always allowed.
    pub fn a50() -> OutlierDetectionBuilder {
        OutlierDetectionBuilder(Self {
            model: Model::A50,
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 10,
            success_rate: Some(SuccessRate::default()),
            failure_percentage: Some(FailurePercentage::default()),
            consecutive_5xx: None,
            consecutive_gateway_failure: None,
            always_eject_one_host: false,
            seed: None,
        })
    }

    /// Envoy's detector with Envoy's defaults: A50's timings and
    /// success-rate rule, plus 5 consecutive server errors ejecting at once
    /// (enforced 100 %), 5 consecutive gateway errors (detected, enforced
    /// 0 %), failure percentage enforced 0 %, and the rules of
    /// [`Model::Envoy`].
    pub fn envoy() -> OutlierDetectionBuilder {
        let mut b = Self::a50();
        b.0.model = Model::Envoy;
        b.0.failure_percentage = Some(FailurePercentage {
            enforcement_percentage: 0,
            ..FailurePercentage::default()
        });
        b.0.consecutive_5xx = Some(Consecutive {
            threshold: 5,
            enforcement_percentage: 100,
        });
        b.0.consecutive_gateway_failure = Some(Consecutive {
            threshold: 5,
            enforcement_percentage: 0,
        });
        b
    }

    /// Whose rules it follows.
    #[must_use]
    pub fn model(&self) -> Model {
        self.model
    }

    /// The time between sweeps.
    #[must_use]
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The ejection time of a first ejection.
    #[must_use]
    pub fn base_ejection_time(&self) -> Duration {
        self.base_ejection_time
    }

    /// The cap on an ejection's time (at least the base).
    #[must_use]
    pub fn max_ejection_time(&self) -> Duration {
        self.max_ejection_time.max(self.base_ejection_time)
    }

    /// The share of the endpoints, in percent, that may be ejected at once.
    #[must_use]
    pub fn max_ejection_percent(&self) -> u32 {
        self.max_ejection_percent
    }

    /// The success-rate rule, if it runs.
    #[must_use]
    pub fn success_rate(&self) -> Option<SuccessRate> {
        self.success_rate
    }

    /// The failure-percentage rule, if it runs.
    #[must_use]
    pub fn failure_percentage(&self) -> Option<FailurePercentage> {
        self.failure_percentage
    }

    /// Envoy's consecutive-server-error rule, if it runs.
    #[must_use]
    pub fn consecutive_5xx(&self) -> Option<Consecutive> {
        self.consecutive_5xx
    }

    /// Envoy's consecutive-gateway-error rule, if it runs.
    #[must_use]
    pub fn consecutive_gateway_failure(&self) -> Option<Consecutive> {
        self.consecutive_gateway_failure
    }

    /// Whether any rule runs (when none does, nothing is counted).
    #[must_use]
    pub fn detects(&self) -> bool {
        self.success_rate.is_some()
            || self.failure_percentage.is_some()
            || self.consecutive_5xx.is_some()
            || self.consecutive_gateway_failure.is_some()
    }

    /// Whether `answer` counts as a failure under this model: A50 counts
    /// every answer but [`Answer::Ok`]; Envoy counts server and gateway
    /// errors.
    #[must_use]
    pub fn is_failure(&self, answer: Answer) -> bool {
        match self.model {
            Model::A50 => answer != Answer::Ok,
            Model::Envoy => matches!(answer, Answer::ServerError | Answer::GatewayError),
        }
    }

    /// How long an endpoint ejected with `multiplier` stays out.
    #[must_use]
    pub fn ejection_time(&self, multiplier: u32) -> Duration {
        self.base_ejection_time
            .saturating_mul(multiplier)
            .min(self.max_ejection_time())
    }
}

impl Default for OutlierDetection {
    fn default() -> Self {
        Self::a50().0
    }
}

/// Builds an [`OutlierDetection`]; made by [`OutlierDetection::a50`] or
/// [`OutlierDetection::envoy`].
#[derive(Debug, Clone)]
#[must_use]
pub struct OutlierDetectionBuilder(OutlierDetection);

impl OutlierDetectionBuilder {
    /// The time between sweeps (greater than zero).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.0.interval = interval;
        self
    }

    /// The ejection time of a first ejection.
    pub fn base_ejection_time(mut self, base: Duration) -> Self {
        self.0.base_ejection_time = base;
        self
    }

    /// The cap on an ejection's time (the base, if that is longer).
    pub fn max_ejection_time(mut self, max: Duration) -> Self {
        self.0.max_ejection_time = max;
        self
    }

    /// The share of the endpoints, in percent (0 to 100), that may be
    /// ejected at once.
    pub fn max_ejection_percent(mut self, percent: u32) -> Self {
        self.0.max_ejection_percent = percent;
        self
    }

    /// The success-rate rule, or `None` not to run it.
    pub fn success_rate(mut self, rule: Option<SuccessRate>) -> Self {
        self.0.success_rate = rule;
        self
    }

    /// The failure-percentage rule, or `None` not to run it.
    pub fn failure_percentage(mut self, rule: Option<FailurePercentage>) -> Self {
        self.0.failure_percentage = rule;
        self
    }

    /// Envoy's consecutive-server-error rule, or `None`.
    pub fn consecutive_5xx(mut self, rule: Option<Consecutive>) -> Self {
        self.0.consecutive_5xx = rule;
        self
    }

    /// Envoy's consecutive-gateway-error rule, or `None`.
    pub fn consecutive_gateway_failure(mut self, rule: Option<Consecutive>) -> Self {
        self.0.consecutive_gateway_failure = rule;
        self
    }

    /// Envoy's `always_eject_one_host`: under [`Model::Envoy`], one endpoint
    /// may be ejected whatever `max_ejection_percent` says (A50 always
    /// allows one).
    pub fn always_eject_one_host(mut self, yes: bool) -> Self {
        self.0.always_eject_one_host = yes;
        self
    }

    /// Seeds the draws of the enforcement percentages, for a repeatable run.
    pub fn seed(mut self, seed: u64) -> Self {
        self.0.seed = Some(seed);
        self
    }

    /// The configuration.
    ///
    /// # Errors
    /// A zero interval, a percentage over 100, or a rule that needs at
    /// least one request or one failure given zero.
    pub fn build(self) -> Result<OutlierDetection, ConfigError> {
        const WHAT: &str = "outlier detection";
        let c = self.0;
        if c.interval.is_zero() {
            return Err(ConfigError::new(
                WHAT,
                "interval",
                "must be greater than zero",
                c.interval,
            ));
        }
        percent(WHAT, "max_ejection_percent", c.max_ejection_percent)?;
        if let Some(r) = c.success_rate {
            percent(
                WHAT,
                "success_rate.enforcement_percentage",
                r.enforcement_percentage,
            )?;
            at_least_one(WHAT, "success_rate.request_volume", r.request_volume)?;
        }
        if let Some(r) = c.failure_percentage {
            percent(WHAT, "failure_percentage.threshold", r.threshold)?;
            percent(
                WHAT,
                "failure_percentage.enforcement_percentage",
                r.enforcement_percentage,
            )?;
            at_least_one(WHAT, "failure_percentage.request_volume", r.request_volume)?;
        }
        for (field, rule) in [
            ("consecutive_5xx", c.consecutive_5xx),
            ("consecutive_gateway_failure", c.consecutive_gateway_failure),
        ] {
            if let Some(r) = rule {
                at_least_one(WHAT, field, r.threshold)?;
                percent(WHAT, field, r.enforcement_percentage)?;
            }
        }
        Ok(c)
    }
}

fn percent(what: &'static str, field: &'static str, value: u32) -> Result<(), ConfigError> {
    if value > 100 {
        return Err(ConfigError::new(
            what,
            field,
            "must be a percentage (0 to 100)",
            value,
        ));
    }
    Ok(())
}

fn at_least_one(what: &'static str, field: &'static str, value: u32) -> Result<(), ConfigError> {
    if value == 0 {
        return Err(ConfigError::new(what, field, "must be at least 1", value));
    }
    Ok(())
}
