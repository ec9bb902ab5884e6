//! [`Judge`]: what an attempt's outcome says of the endpoint that answered
//! it, the one piece of protocol knowledge an endpoint set needs.

use std::time::Duration;

use super::detector::Answer;

/// Says what an outcome tells of the endpoint that gave it: its
/// [`Answer`] for outlier detection, and the server's hint (`Retry-After`,
/// pushback) that raises its load. An integration implements it for its
/// protocol (status codes, gRPC codes); [`ByResult`] knows only `Ok` and
/// `Err`.
pub trait Judge<T, E> {
    /// The answer, and the server's hint if it sent one.
    fn judge(&self, outcome: &Result<T, E>) -> (Answer, Option<Duration>);
}

/// A success is [`Answer::Ok`], any error an [`Answer::ServerError`]
/// without a hint: for a service whose errors are all the endpoint's.
///
/// ```
/// use steadfast::endpoint::{Answer, ByResult, Judge};
/// assert_eq!(ByResult.judge(&Ok::<u8, ()>(1)), (Answer::Ok, None));
/// assert_eq!(ByResult.judge(&Err::<u8, ()>(())), (Answer::ServerError, None));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ByResult;

impl<T, E> Judge<T, E> for ByResult {
    #[inline]
    fn judge(&self, outcome: &Result<T, E>) -> (Answer, Option<Duration>) {
        match outcome {
            Ok(_) => (Answer::Ok, None),
            Err(_) => (Answer::ServerError, None),
        }
    }
}

impl<T, E, F> Judge<T, E> for F
where
    F: Fn(&Result<T, E>) -> (Answer, Option<Duration>),
{
    #[inline]
    fn judge(&self, outcome: &Result<T, E>) -> (Answer, Option<Duration>) {
        self(outcome)
    }
}
