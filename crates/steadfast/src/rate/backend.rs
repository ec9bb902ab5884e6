//! [`QuotaBackend`]: a store outside the process that keeps quotas for a
//! whole fleet (Redis, a rate-limit service), asked once per call.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use super::quota::Quota;
use crate::config_error::ConfigError;

/// One call to weigh against a fleet's quotas, as a
/// [`FleetRateLimit`](super::FleetRateLimit) asks its backend.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct QuotaCheck<'a> {
    /// The limit's name (a backend may keep each limit's keys apart by it).
    pub limit: &'a str,
    /// The key the quotas are kept for (an API key, a tenant, `""` for
    /// one quota for everyone).
    pub key: &'a str,
    /// Every quota the call must fit, all at once (a combined limit).
    pub quotas: &'a [Quota],
    /// The call's cost: at least 1, never above a quota's burst (the limit
    /// refuses such a call itself).
    pub cost: u32,
}

impl<'a> QuotaCheck<'a> {
    /// A check of `cost` for `key` against `quotas` of the limit `limit`
    /// (for backends' own tests; a limit builds its checks itself).
    #[must_use]
    pub fn new(limit: &'a str, key: &'a str, quotas: &'a [Quota], cost: u32) -> Self {
        Self {
            limit,
            key,
            quotas,
            cost,
        }
    }
}

/// A backend's answer: the call is admitted (and taken from every quota),
/// or it is not, with the time until the same call would be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Admitted: the call's cost is taken from every quota.
    Admit,
    /// Not admitted; nothing was taken. `retry_after` is the wait until
    /// the same call would be admitted, `None` if it never would.
    Refuse {
        /// The wait, by the backend's clock.
        retry_after: Option<Duration>,
    },
}

/// A backend that could not answer: unreachable, too slow, or answering
/// something that is not an answer.
///
/// ```
/// use steadfast::rate::BackendError;
/// let e = BackendError::new("connection refused");
/// assert_eq!(e.to_string(), "quota backend: connection refused");
/// assert!(!e.is_timeout());
/// ```
#[derive(Debug)]
pub struct BackendError {
    message: String,
    timeout: bool,
    source: Option<Box<dyn Error + Send + Sync>>,
}

impl BackendError {
    /// An error that says `message`.
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            timeout: false,
            source: None,
        }
    }

    /// An error caused by `source` (a client library's error), shown after
    /// `message`.
    #[must_use]
    pub fn with_source(
        message: impl Into<String>,
        source: impl Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            message: message.into(),
            timeout: false,
            source: Some(Box::new(source)),
        }
    }

    /// The backend gave no answer within `after` (the limit stopped waiting).
    #[must_use]
    pub fn timed_out(after: Duration) -> Self {
        Self {
            message: format!("no answer within {after:?}"),
            timeout: true,
            source: None,
        }
    }

    /// Whether the backend did not answer in time.
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        self.timeout
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "quota backend: {}", self.message)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl Error for BackendError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn Error + 'static))
    }
}

/// A store that keeps quotas for many processes at once: each
/// [`check`](Self::check) admits a call and takes its cost from every quota
/// atomically, or refuses it with the exact wait, by the same generic cell
/// rate algorithm as [`RateLimit`](super::RateLimit) (so a fleet on a
/// backend and one process on a local limit admit the same calls).
///
/// A backend does the remote part only; the
/// [`FleetRateLimit`](super::FleetRateLimit) around it bounds the wait for
/// an answer, remembers keys known to be over their quota, and serves from
/// a local limit (or refuses) while the backend is unreachable. steadfast's
/// Redis backend is the `steadfast-redis` crate.
///
/// ```
/// use std::collections::HashMap;
/// use std::sync::Mutex;
/// use std::time::Duration;
/// use steadfast::rate::{BackendError, Decision, QuotaBackend, QuotaCheck};
///
/// /// A backend that admits a fixed number of calls per key, ever.
/// struct Allowance(Mutex<HashMap<String, u32>>);
///
/// impl QuotaBackend for Allowance {
///     async fn check(&self, check: QuotaCheck<'_>) -> Result<Decision, BackendError> {
///         let mut used = self.0.lock().map_err(|_| BackendError::new("poisoned"))?;
///         let used = used.entry(check.key.to_owned()).or_default();
///         if *used + check.cost <= 3 {
///             *used += check.cost;
///             Ok(Decision::Admit)
///         } else {
///             Ok(Decision::Refuse { retry_after: None })
///         }
///     }
/// }
/// ```
pub trait QuotaBackend: Send + Sync + 'static {
    /// Admits `check`'s call against every one of its quotas at once, or
    /// refuses it; never admits it against some and not others.
    ///
    /// # Errors
    /// A [`BackendError`] when the backend cannot answer (the limit then
    /// fails open or closed, as it was built to).
    fn check(
        &self,
        check: QuotaCheck<'_>,
    ) -> impl Future<Output = Result<Decision, BackendError>> + Send;

    /// Whether the backend can keep `quota` (a backend whose arithmetic has
    /// a narrower range says no here, and the limit's `build` fails).
    /// Every quota by default.
    ///
    /// # Errors
    /// A [`ConfigError`] naming what the backend cannot keep.
    fn supports(&self, quota: &Quota) -> Result<(), ConfigError> {
        let _ = quota;
        Ok(())
    }
}
