use std::fmt;

/// Why a service config was rejected: the field (a JSON path such as
/// `methodConfig[1].retryPolicy.maxAttempts`), the rule it broke, and what
/// it held. A config with any error is rejected as a whole.
///
/// ```
/// use steadfast_grpc::config::ServiceConfig;
/// let err = ServiceConfig::from_json(r#"{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}"#).unwrap_err();
/// assert_eq!(err.field(), "retryThrottling.maxTokens");
/// assert_eq!(err.to_string(), "invalid service config: retryThrottling.maxTokens must be a whole number in 1..=1000, got 0");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfigError {
    field: String,
    rule: &'static str,
    value: String,
}

impl ServiceConfigError {
    pub(crate) fn new(
        field: impl Into<String>,
        rule: &'static str,
        value: impl fmt::Display,
    ) -> Self {
        let mut value = value.to_string();
        // A hostile config can hold anything: quote a little of it, not all.
        if value.len() > 64 {
            let cut = (0..=64)
                .rev()
                .find(|&i| value.is_char_boundary(i))
                .unwrap_or(0);
            value.truncate(cut);
            value.push('…');
        }
        Self {
            field: field.into(),
            rule,
            value,
        }
    }

    /// The offending field, as a JSON path.
    #[must_use]
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The rule it broke.
    #[must_use]
    pub fn rule(&self) -> &'static str {
        self.rule
    }

    /// What it held (shortened past 64 bytes).
    #[must_use]
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for ServiceConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid service config: ")?;
        if !self.field.is_empty() {
            write!(f, "{} ", self.field)?;
        }
        write!(f, "{}, got {}", self.rule, self.value)
    }
}

impl std::error::Error for ServiceConfigError {}
