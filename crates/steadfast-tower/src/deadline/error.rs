use std::error::Error;
use std::fmt;

use steadfast::deadline::DeadlineExceeded;

/// The error of a call under a deadline: the deadline passed first, or the
/// inner service failed.
///
/// ```
/// use steadfast::deadline::DeadlineExceeded;
/// use steadfast_tower::deadline::DeadlineError;
///
/// let err = DeadlineError::<std::io::Error>::Exceeded(DeadlineExceeded::new());
/// assert!(err.is_exceeded());
/// assert_eq!(err.to_string(), "deadline exceeded");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadlineError<E> {
    /// The deadline passed before the inner service answered; its future
    /// was dropped.
    Exceeded(DeadlineExceeded),
    /// The inner service failed.
    Inner(E),
}

impl<E> DeadlineError<E> {
    /// Whether the deadline passed.
    #[must_use]
    pub fn is_exceeded(&self) -> bool {
        matches!(self, Self::Exceeded(_))
    }

    /// The inner service's error, if that is what this is.
    pub fn into_inner(self) -> Option<E> {
        match self {
            Self::Inner(e) => Some(e),
            Self::Exceeded(_) => None,
        }
    }
}

impl<E: fmt::Display> fmt::Display for DeadlineError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exceeded(e) => e.fmt(f),
            Self::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: Error + 'static> Error for DeadlineError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Exceeded(e) => Some(e),
            Self::Inner(e) => Some(e),
        }
    }
}
