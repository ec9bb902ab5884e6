//! The one error every builder in steadfast returns for a bad setting.

use std::fmt;

/// A configuration value broke a rule. Built by every `build()` in the crate;
/// it names the component, the field and the rule, and shows the value given.
///
/// ```
/// use steadfast::ConfigError;
/// let err = ConfigError::new("exponential backoff", "multiplier", "must be a finite number >= 1", f64::NAN);
/// assert_eq!(
///     err.to_string(),
///     "invalid exponential backoff: `multiplier` must be a finite number >= 1 (got NaN)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    component: &'static str,
    field: &'static str,
    rule: &'static str,
    got: String,
}

impl ConfigError {
    /// A new error: `component`'s `field` breaks `rule`; `got` is the value given.
    #[must_use]
    pub fn new(
        component: &'static str,
        field: &'static str,
        rule: &'static str,
        got: impl fmt::Debug,
    ) -> Self {
        Self {
            component,
            field,
            rule,
            got: format!("{got:?}"),
        }
    }

    /// The component whose configuration is wrong (for example `"token bucket"`).
    #[must_use]
    pub fn component(&self) -> &'static str {
        self.component
    }

    /// The name of the offending field.
    #[must_use]
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The rule the field broke.
    #[must_use]
    pub fn rule(&self) -> &'static str {
        self.rule
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {}: `{}` {} (got {})",
            self.component, self.field, self.rule, self.got
        )
    }
}

impl std::error::Error for ConfigError {}
