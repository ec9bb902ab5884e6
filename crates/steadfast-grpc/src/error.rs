//! [`Error`]: the one error of setting a channel up.

use std::fmt;

use steadfast::ConfigError;

use crate::config::ServiceConfigError;

/// Why [`channel`](crate::channel) (or [`GrpcLayer::channel`](crate::GrpcLayer::channel)
/// through `?`) could not set a channel up: the service config did not
/// parse or was invalid, one of its policies was refused, or the target is
/// not a server address. Its message says which, and where.
///
/// ```
/// # let channel = tower::service_fn(|_: http::Request<tonic::body::Body>| async {
/// #     Ok::<_, std::io::Error>(http::Response::new(tonic::body::Body::empty()))
/// # });
/// let err = steadfast_grpc::channel(channel, "127.0.0.1:50051", "{not json").unwrap_err();
/// assert!(matches!(err, steadfast_grpc::Error::Config(_)));
/// assert!(err.to_string().starts_with("invalid service config: must be valid JSON"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The service config is not JSON, or breaks a rule of gRFC A6.
    Config(ServiceConfigError),
    /// A policy of the config was refused by the core (a config that
    /// parsed never has one).
    Policy(ConfigError),
    /// The target names no server (see [`target_key`](crate::target_key)).
    Target(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => e.fmt(f),
            Self::Policy(e) => write!(f, "service config refused: {e}"),
            Self::Target(target) => write!(
                f,
                "invalid gRPC target {target:?}: expected host:port, http(s)://host[:port] or dns:///host[:port]"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(e) => Some(e),
            Self::Policy(e) => Some(e),
            Self::Target(_) => None,
        }
    }
}

impl From<ServiceConfigError> for Error {
    fn from(e: ServiceConfigError) -> Self {
        Self::Config(e)
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Self::Policy(e)
    }
}
