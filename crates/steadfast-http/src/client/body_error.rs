//! [`BodyError`]: why reading a response's body failed.

use std::fmt;

/// Why reading a [`Response`](super::Response)'s body failed: the
/// transport, or the call's deadline, which covers the body as it covers
/// the attempts (a body that trickles in past it is cut off there).
///
/// ```
/// use steadfast_http::BodyError;
/// let err = BodyError::DeadlineExceeded;
/// assert!(err.is_deadline());
/// assert_eq!(err.to_string(), "the call's deadline passed while the body was read");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BodyError {
    /// The transport failed while the body was read.
    Transport(reqwest::Error),
    /// The call's deadline passed before the body was read whole.
    DeadlineExceeded,
}

impl BodyError {
    /// Whether the deadline cut the body off.
    #[must_use]
    pub fn is_deadline(&self) -> bool {
        matches!(self, Self::DeadlineExceeded)
    }
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "reading the body failed: {e}"),
            Self::DeadlineExceeded => {
                f.write_str("the call's deadline passed while the body was read")
            }
        }
    }
}

impl std::error::Error for BodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Transport(e) => Some(e),
            Self::DeadlineExceeded => None,
        }
    }
}

impl From<reqwest::Error> for BodyError {
    fn from(e: reqwest::Error) -> Self {
        Self::Transport(e)
    }
}
