//! The client's fallback ([`ClientBuilder::fallback`](crate::ClientBuilder::fallback)):
//! what a call hands back once it has failed, as the outermost step.
//!
//! It is the core's [`steadfast::fallback`] with the client's types: the
//! fallback sees a [`Failure`] (the core's
//! [`Failure`](steadfast::fallback::Failure)`<reqwest::Response, `[`Error`]`>`)
//! and answers with an [`Answer`]. Any core fallback fits:
//! [`from_fn`](steadfast::fallback::from_fn) computes the answer from the
//! failure, [`backup`](steadfast::fallback::backup) asks another server
//! (asynchronously), and [`static_response`] answers with the same response
//! every time (a cached page, a default body): a `reqwest::Response` is not
//! `Clone`, so the core's `value` cannot hold one.
//!
//! What the failure holds:
//!
//! - a call that gave up on a **response** (an exhausted `503`, a `501` the
//!   classifier calls final, a `503` whose `Retry-After` ends past the
//!   deadline) hands that response over as
//!   [`Failure::response`](steadfast::fallback::Failure::response), with
//!   the [`reason`](steadfast::fallback::Failure::reason) the call stopped;
//! - a call that ended **without** one (a transport error, the deadline, a
//!   refusal by a limit or control) hands over its [`Error`] as the
//!   [`last_error`](steadfast::RetryError::last_error) of
//!   [`Failure::error`](steadfast::fallback::Failure::error); the
//!   `RetryError` around it repeats the client error's reason, attempts and
//!   time.
//!
//! To decline, return [`Failure::into_result`](steadfast::fallback::Failure::into_result):
//! the call then ends exactly as it would have without a fallback (the same
//! [`Error`], holding the same last response). Handing back the failure's
//! own response is declining too, however it is done. An error of the
//! fallback's own (a backup that failed as well) is returned as it is: a
//! client [`Error`] converts into an [`Answer`]'s error with `?` or
//! [`From`]; a `RetryError` made without a last error becomes a client
//! [`Error`] with its reason and no last response.
//!
//! When the fallback answers, the [`Response`](crate::Response)'s
//! [`ending`](crate::Response::ending) is the failed call's (its attempts,
//! the `stop` reason, the waits) with
//! [`fell_back`](steadfast::call::Ending::fell_back) set, and reading its
//! body is not bounded by the failed call's deadline
//! ([`deadline`](crate::Response::deadline) is `None`): the call may have
//! stopped because that deadline passed.
//!
//! It never runs for a call that was cancelled (dropping the `send` future
//! drops the call and its fallback), nor for a request that could not be
//! built (no call was made), nor for a success.

use std::fmt;
use std::future::{Future, Ready, ready};
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use steadfast::RetryError;
use steadfast::call::Ending;
use steadfast::fallback::{AsyncFallback, Fallback, fires, record_fired};

use crate::error::Error;

/// A failed call, as a client's fallback sees it: the core's
/// [`Failure`](steadfast::fallback::Failure) of a `reqwest::Response` and
/// the client's [`Error`] (see the [module docs](self) for which of the two
/// it holds).
pub type Failure = steadfast::fallback::Failure<reqwest::Response, Error>;

/// What a client's fallback answers: a response, or the error the call
/// returns instead.
pub type Answer = Result<reqwest::Response, RetryError<Error>>;

/// A fallback that answers every failed call with a copy of one response:
/// made by [`static_response`].
#[derive(Debug, Clone)]
pub struct StaticResponse {
    head: http::response::Parts,
    body: Bytes,
}

/// A fallback that answers every failed call with a copy of `response` (its
/// status, headers and body; the body is shared, not copied).
///
/// ```
/// use steadfast::fallback::Fallback;
/// use steadfast_http::fallback::{Failure, static_response};
///
/// let cached = static_response(http::Response::new("the page, as it was an hour ago"));
/// # let failure = Failure::from_result(Ok(reqwest::Response::from(http::Response::new(""))));
/// let answer = cached.fall_back(failure).unwrap();
/// assert_eq!(answer.status(), 200);
/// ```
#[must_use]
pub fn static_response<B: Into<Bytes>>(response: http::Response<B>) -> StaticResponse {
    let (head, body) = response.into_parts();
    StaticResponse {
        head,
        body: body.into(),
    }
}

impl StaticResponse {
    /// A new copy of the response.
    fn make(&self) -> reqwest::Response {
        reqwest::Response::from(http::Response::from_parts(
            self.head.clone(),
            self.body.clone(),
        ))
    }
}

impl Fallback<reqwest::Response, Error> for StaticResponse {
    fn fall_back(&self, _: Failure) -> Answer {
        Ok(self.make())
    }
}

impl AsyncFallback<reqwest::Response, Error> for StaticResponse {
    type Future = Ready<Answer>;

    fn fall_back_async(&self, _: Failure) -> Self::Future {
        ready(Ok(self.make()))
    }
}

impl From<Error> for RetryError<Error> {
    /// The client's error as a fallback's: the same reason, attempts, time
    /// and refusal, with the error itself as the last error (so a
    /// fallback's `?` on a backup call's result returns that error).
    fn from(error: Error) -> Self {
        let (reason, attempts, elapsed) = (error.reason(), error.attempts(), error.elapsed());
        let (refused, timed_out) = (error.refusal(), error.timed_out());
        let err = RetryError::new(reason, Some(error), attempts, elapsed).with_timed_out(timed_out);
        match refused {
            Some(refused) => err.with_refusal(refused),
            None => err,
        }
    }
}

/// A boxed answer: made only when a fallback fires.
type BoxAnswer = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// A fallback of any type, behind one pointer.
trait Erased: Send + Sync {
    fn answer(&self, failure: Failure) -> BoxAnswer;
}

impl<F> Erased for F
where
    F: AsyncFallback<reqwest::Response, Error> + Send + Sync,
    F::Future: Send + 'static,
{
    fn answer(&self, failure: Failure) -> BoxAnswer {
        Box::pin(self.fall_back_async(failure))
    }
}

/// What a call that succeeded (or was answered) gives the client: the
/// response, how the call went, and the deadline that bounds its body.
pub(crate) type Outcome = Result<(reqwest::Response, Ending, Option<steadfast::Deadline>), Error>;

/// Marks the failed response handed to a fallback, so that handing it back
/// is known for a decline.
#[derive(Debug, Clone, Copy)]
struct Declined;

/// A client's fallback, and the name its event carries.
#[derive(Clone)]
pub(crate) struct ClientFallback {
    fallback: Arc<dyn Erased>,
    name: &'static str,
}

impl fmt::Debug for ClientFallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientFallback")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ClientFallback {
    pub(crate) fn new<F>(fallback: F) -> Self
    where
        F: AsyncFallback<reqwest::Response, Error> + Send + Sync + 'static,
        F::Future: Send + 'static,
    {
        Self {
            fallback: Arc::new(fallback),
            name: "http",
        }
    }

    /// Names the calls in the event a fallback records.
    pub(crate) fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The call's outcome after the fallback: `outcome` itself unless the
    /// call failed for a reason that [`fires`] the fallback, else the
    /// fallback's answer (the event recorded).
    pub(crate) async fn after(&self, outcome: Outcome) -> Outcome {
        let mut error = match outcome {
            Ok(done) => return Ok(done),
            Err(error) if !fires(Some(error.reason())) => return Err(error),
            Err(error) => error,
        };
        let mut ending = error.ending();
        ending.stop = Some(error.reason());
        record_fired(Some(self.name), &ending);
        let method = error.method().cloned();
        let (failure, gave_up_on) = match error.take_response() {
            Some(mut response) => {
                response.extensions_mut().insert(Declined);
                (Failure::new(Ok(response), ending), Some(error))
            }
            None => (Failure::new(Err(error.into()), ending), None),
        };
        match self.fallback.answer(failure).await {
            Ok(mut response) => {
                match (response.extensions_mut().remove::<Declined>(), gave_up_on) {
                    // Its own failed response back: declined.
                    (Some(Declined), Some(rest)) => Err(rest.with_response(response)),
                    _ => {
                        ending.fell_back = true;
                        Ok((response, ending, None))
                    }
                }
            }
            Err(error) => Err(Error::from_answer(method, error, ending)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicU32, Ordering};

    use steadfast::StopReason;
    use steadfast::fallback::from_fn;

    use super::*;

    fn failed(reason: StopReason) -> Error {
        let mut ending = Ending::default();
        ending.attempts = 2;
        ending.stop = Some(reason);
        Error::from_call(
            http::Method::GET,
            RetryError::<crate::attempt::Failure<reqwest::Error>>::new(
                reason,
                None,
                2,
                std::time::Duration::ZERO,
            ),
            ending,
        )
    }

    fn counting() -> (ClientFallback, Arc<AtomicU32>) {
        let asked = Arc::new(AtomicU32::new(0));
        let a = Arc::clone(&asked);
        let fallback = ClientFallback::new(from_fn(move |_: Failure| {
            a.fetch_add(1, Ordering::SeqCst);
            Ok(reqwest::Response::from(http::Response::new("fallback")))
        }));
        (fallback, asked)
    }

    #[tokio::test]
    async fn a_cancelled_call_is_never_answered() {
        let (fallback, asked) = counting();
        let err = fallback
            .after(Err(failed(StopReason::Cancelled)))
            .await
            .unwrap_err();
        assert_eq!(asked.load(Ordering::SeqCst), 0);
        assert_eq!((err.reason(), err.attempts()), (StopReason::Cancelled, 2));
        assert!(!err.ending().fell_back);
    }

    #[tokio::test]
    async fn every_other_reason_is_answered() {
        let (fallback, asked) = counting();
        for reason in [
            StopReason::Exhausted,
            StopReason::Deadline,
            StopReason::Throttled,
            StopReason::LimitReached,
            StopReason::Permanent,
            StopReason::NotReplayable,
        ] {
            let (response, ending, deadline) = fallback.after(Err(failed(reason))).await.unwrap();
            assert_eq!(response.status(), 200);
            assert_eq!((ending.stop, ending.attempts), (Some(reason), 2));
            assert!(ending.fell_back);
            assert!(deadline.is_none());
        }
        assert_eq!(asked.load(Ordering::SeqCst), 6);
    }

    #[tokio::test]
    async fn an_error_made_without_a_last_error_becomes_a_client_error() {
        let fallback = ClientFallback::new(from_fn(|_: Failure| {
            Err(RetryError::new(
                StopReason::Permanent,
                None,
                0,
                std::time::Duration::ZERO,
            ))
        }));
        let err = fallback
            .after(Err(failed(StopReason::Exhausted)))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), StopReason::Permanent);
        assert_eq!(err.ending().stop, Some(StopReason::Permanent));
        assert_eq!(err.attempts(), 2, "the attempts the call made");
        assert!(err.status().is_none());
        assert!(
            err.to_string().starts_with("GET failed after 2 attempts"),
            "{err}"
        );
    }
}
