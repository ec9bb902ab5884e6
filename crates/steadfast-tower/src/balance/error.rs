//! [`BalanceError`]: why a balanced call failed, naming the endpoint.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Why a call through a [`Balance`](super::Balance) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BalanceError {
    /// The endpoint's service failed the call.
    Service {
        /// The endpoint it went to (its key, as the set labels it).
        endpoint: Arc<str>,
        /// The service's error.
        source: tower::BoxError,
    },
    /// No endpoint was ready to take the call (it was made without a ready
    /// `poll_ready`, or every ready one is ejected and the set is not in
    /// panic).
    NoEndpoint,
    /// The discovery failed.
    Discover(tower::BoxError),
}

impl BalanceError {
    /// The endpoint the call went to, if it went to one.
    #[must_use]
    pub fn endpoint(&self) -> Option<&str> {
        match self {
            Self::Service { endpoint, .. } => Some(endpoint),
            Self::NoEndpoint | Self::Discover(_) => None,
        }
    }
}

impl fmt::Display for BalanceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Service { endpoint, source } => write!(f, "endpoint {endpoint}: {source}"),
            Self::NoEndpoint => f.write_str("no endpoint was ready to take the call"),
            Self::Discover(e) => write!(f, "endpoint discovery failed: {e}"),
        }
    }
}

impl Error for BalanceError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Service { source, .. } | Self::Discover(source) => Some(&**source),
            Self::NoEndpoint => None,
        }
    }
}
