//! gRPC service configs (gRFC A6): retry, hedging and throttling, per method.
//!
//! [`ServiceConfig::from_json`] reads the JSON that grpc-go, grpc-java and
//! the other gRPC clients read, with A6's validation: `maxAttempts` must be
//! an integer greater than 1 and is clamped to the client's cap (5 by
//! default, [`ParseOptions::max_attempts_cap`]); backoffs are proto3 JSON
//! durations greater than zero; `backoffMultiplier` is greater than zero;
//! `retryableStatusCodes` is not empty (codes as integers or names in any
//! case); a method config has a retry policy or a hedging policy, not both;
//! `maxTokens` is in `(0, 1000]` and `tokenRatio` greater than zero (three
//! decimals are used). An invalid config is rejected whole, with an error
//! that names the field and the rule.
//!
//! A6's own example:
//!
//! ```
//! use std::time::Duration;
//! use steadfast_grpc::Code;
//! use steadfast_grpc::config::{MethodPolicy, ServiceConfig};
//!
//! let config = ServiceConfig::from_json(r#"{
//!   "loadBalancingPolicy": "round_robin",
//!   "methodConfig": [
//!     {
//!       "name": [{ "service": "grpc.testing.TestService" }],
//!       "timeout": "1.5s",
//!       "retryPolicy": {
//!         "maxAttempts": 4,
//!         "initialBackoff": "0.1s",
//!         "maxBackoff": "1s",
//!         "backoffMultiplier": 2,
//!         "retryableStatusCodes": ["UNAVAILABLE"]
//!       }
//!     },
//!     {
//!       "name": [{ "service": "grpc.testing.TestService", "method": "Hedged" }],
//!       "hedgingPolicy": {
//!         "maxAttempts": 3,
//!         "hedgingDelay": "0.5s",
//!         "nonFatalStatusCodes": ["UNAVAILABLE", "INTERNAL", "ABORTED"]
//!       }
//!     }
//!   ],
//!   "retryThrottling": { "maxTokens": 10, "tokenRatio": 0.1 }
//! }"#)?;
//!
//! // The most specific name wins: this method has its own config...
//! let hedged = config.method_config("/grpc.testing.TestService/Hedged").unwrap();
//! assert!(matches!(hedged.policy(), Some(MethodPolicy::Hedging(h)) if h.max_attempts() == 3));
//! // ...the others of the service share the service's.
//! let call = config.method_config("/grpc.testing.TestService/UnaryCall").unwrap();
//! assert_eq!(call.timeout(), Some(Duration::from_millis(1500)));
//! let Some(MethodPolicy::Retry(retry)) = call.policy() else { unreachable!() };
//! assert_eq!(retry.retryable_codes(), &[Code::Unavailable]);
//! // An A6 retry policy as the core's policy, and the throttle as its token bucket.
//! let policy = retry.to_policy()?;
//! assert_eq!(policy.max_attempts(), 4);
//! assert_eq!(config.retry_throttling().unwrap().token_bucket()?.milli_tokens(), 10_000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod balancing;
mod duration;
mod error;
mod method;
mod parse;
mod throttling;

pub use duration::parse_duration;
pub use error::ServiceConfigError;
pub use method::{HedgingPolicyConfig, MethodConfig, MethodName, MethodPolicy, RetryPolicyConfig};
pub use throttling::RetryThrottling;

/// The client's cap on `maxAttempts` when none is given: 5, as in every
/// gRPC implementation.
pub const DEFAULT_MAX_ATTEMPTS_CAP: u32 = 5;

/// How a config is read.
///
/// ```
/// use steadfast_grpc::config::{ParseOptions, ServiceConfig};
/// let json = r#"{"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 9,
///     "initialBackoff": "1s", "maxBackoff": "2s", "backoffMultiplier": 2, "retryableStatusCodes": [14]}}]}"#;
/// let capped = ServiceConfig::from_json_with(json, ParseOptions::default().max_attempts_cap(7))?;
/// let policy = capped.method_config("/any.Service/Method").unwrap().policy().unwrap();
/// assert_eq!(policy.max_attempts(), 7);
/// # Ok::<(), steadfast_grpc::config::ServiceConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    pub(crate) cap: u32,
}

impl Default for ParseOptions {
    fn default() -> Self {
        Self {
            cap: DEFAULT_MAX_ATTEMPTS_CAP,
        }
    }
}

impl ParseOptions {
    /// Clamps every `maxAttempts` to `cap` (at least 2: A6 requires more
    /// than one attempt; at most 32, the core hedger's limit).
    #[must_use]
    pub fn max_attempts_cap(mut self, cap: u32) -> Self {
        self.cap = cap.clamp(2, steadfast::call::MAX_HEDGE_ATTEMPTS);
        self
    }
}

/// A parsed, validated service config.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceConfig {
    pub(crate) methods: Vec<MethodConfig>,
    pub(crate) throttling: Option<RetryThrottling>,
    pub(crate) outlier: Option<steadfast::endpoint::OutlierDetection>,
}

impl ServiceConfig {
    /// Reads a service config in gRPC's JSON form, with the default cap of
    /// 5 attempts.
    ///
    /// # Errors
    /// A [`ServiceConfigError`] naming the first invalid field.
    pub fn from_json(json: &str) -> Result<Self, ServiceConfigError> {
        Self::from_json_with(json, ParseOptions::default())
    }

    /// Reads a service config with `options`.
    ///
    /// # Errors
    /// A [`ServiceConfigError`] naming the first invalid field.
    pub fn from_json_with(json: &str, options: ParseOptions) -> Result<Self, ServiceConfigError> {
        parse::service_config(json, options)
    }

    /// Reads a service config from JSON bytes (a file's contents, say),
    /// with the default cap of 5 attempts.
    ///
    /// # Errors
    /// A [`ServiceConfigError`] naming the first invalid field, or saying
    /// the bytes are not JSON (invalid UTF-8 included).
    pub fn from_slice(json: &[u8]) -> Result<Self, ServiceConfigError> {
        parse::service_config_bytes(json, ParseOptions::default())
    }

    /// Reads a service config already parsed as a [`serde_json::Value`]
    /// (built with `serde_json::json!`, or a part of a larger document),
    /// with the default cap of 5 attempts.
    ///
    /// ```
    /// use steadfast_grpc::config::ServiceConfig;
    /// let value = serde_json::json!({"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}});
    /// let config = ServiceConfig::from_value(&value)?;
    /// assert!(config.retry_throttling().is_some());
    /// # Ok::<(), steadfast_grpc::config::ServiceConfigError>(())
    /// ```
    ///
    /// # Errors
    /// A [`ServiceConfigError`] naming the first invalid field.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, ServiceConfigError> {
        parse::from_value(value, ParseOptions::default())
    }

    /// [`from_value`](ServiceConfig::from_value) with `options`.
    ///
    /// # Errors
    /// A [`ServiceConfigError`] naming the first invalid field.
    pub fn from_value_with(
        value: &serde_json::Value,
        options: ParseOptions,
    ) -> Result<Self, ServiceConfigError> {
        parse::from_value(value, options)
    }

    /// Every method config, in the order given.
    #[must_use]
    pub fn method_configs(&self) -> &[MethodConfig] {
        &self.methods
    }

    /// The `retryThrottling` settings, if any.
    #[must_use]
    pub fn retry_throttling(&self) -> Option<&RetryThrottling> {
        self.throttling.as_ref()
    }

    /// gRFC A50's outlier detection, when the config's `loadBalancingConfig`
    /// asks for it (`outlier_detection_experimental`, the first policy of
    /// the list this client runs; its settings with A50's defaults, an
    /// ejection rule left out not run). A channel over several endpoints
    /// ([`channel_over`](crate::channel_over)) ejects by it; with none, it
    /// picks by load alone, as gRPC clients do without the policy.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast_grpc::config::ServiceConfig;
    /// let config = ServiceConfig::from_json(r#"{"loadBalancingConfig": [{"outlier_detection_experimental": {
    ///     "interval": "5s",
    ///     "failurePercentageEjection": {"threshold": 60, "requestVolume": 20},
    ///     "childPolicy": [{"round_robin": {}}]}}]}"#)?;
    /// let detection = config.outlier_detection().expect("asked for");
    /// assert_eq!(detection.interval(), Duration::from_secs(5));
    /// assert_eq!(detection.failure_percentage().map(|r| r.threshold), Some(60));
    /// assert_eq!(detection.success_rate(), None); // not asked for: not run
    /// # Ok::<(), steadfast_grpc::config::ServiceConfigError>(())
    /// ```
    #[must_use]
    pub fn outlier_detection(&self) -> Option<&steadfast::endpoint::OutlierDetection> {
        self.outlier.as_ref()
    }

    /// The config of the method at `path` (`/package.Service/Method`, as on
    /// the wire): an exact `service` + `method` name wins, then one with the
    /// service alone, then the default (a name with neither).
    #[must_use]
    pub fn method_config(&self, path: &str) -> Option<&MethodConfig> {
        let (service, method) = split_path(path)?;
        let mut service_wide = None;
        let mut default = None;
        for config in &self.methods {
            for name in config.names() {
                match (name.service(), name.method()) {
                    (Some(s), Some(m)) if s == service && m == method => return Some(config),
                    (Some(s), None) if s == service => service_wide = service_wide.or(Some(config)),
                    (None, None) => default = default.or(Some(config)),
                    _ => {}
                }
            }
        }
        service_wide.or(default)
    }
}

/// `/package.Service/Method` as (service, method).
fn split_path(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    (!service.is_empty() && !method.is_empty() && !method.contains('/'))
        .then_some((service, method))
}
