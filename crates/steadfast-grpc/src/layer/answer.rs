//! How a failed call is answered as gRPC: the status and message of a stop, the deadline's
//! `DEADLINE_EXCEEDED`, a Trailers-Only response.

use std::error::Error;
use std::time::Instant;

use http::Response;
use steadfast::{Deadline, Report, RetryError, StopReason};

use crate::Code;

use super::BoxError;

/// A retried or hedged call's answer: its response, unless the call stopped
/// because the next attempt would start past the deadline, which gRPC
/// reports as `DEADLINE_EXCEEDED` (whatever status the last attempt had).
/// A failure that arrives at or after the call's deadline (`due`, at
/// `now`) is the deadline's doing, whatever it says: a server that enforces
/// the `grpc-timeout` it received answers CANCELLED ("Timeout expired", as
/// tonic does) a hair after the deadline, and the caller must still see
/// `DEADLINE_EXCEEDED`.
pub(super) fn answer<T: Default, E: Error + Send + Sync + 'static>(
    report: Report<Response<T>, E>,
    due: Option<Deadline>,
    now: Instant,
) -> Result<Response<T>, BoxError> {
    let late = due.is_some_and(|d| d.is_expired(now));
    match (report.result, report.stop) {
        (Ok(response), Some(StopReason::Deadline)) => Ok(out_of_time(&response, report.attempts)),
        (Ok(response), Some(_)) if late && failed(&response) => {
            Ok(past_deadline(&response, report.attempts))
        }
        (Ok(response), _) => Ok(response),
        (Err(e), _) if late && e.reason() != StopReason::LimitReached => Ok(status_response(
            Code::DeadlineExceeded,
            &format!("deadline exceeded: {e}"),
        )),
        (Err(e), _) => call_error(e),
    }
}

/// Whether a response head says the call failed (a Trailers-Only status
/// other than OK).
pub(super) fn failed<T>(response: &Response<T>) -> bool {
    crate::head_status(response.headers()).is_some_and(|code| code != Code::Ok)
}

/// `DEADLINE_EXCEEDED` for a call whose last attempt failed at or after its
/// deadline (its status names the attempt's own answer).
#[cold]
pub(super) fn past_deadline<T: Default>(last: &Response<T>, attempts: u32) -> Response<T> {
    let code = crate::head_status(last.headers()).unwrap_or(Code::Unknown);
    let message = format!(
        "deadline exceeded: attempt {attempts} ended {code} at or after the call's deadline"
    );
    status_response(Code::DeadlineExceeded, &message)
}

/// `DEADLINE_EXCEEDED` for a call that gave up on `last` (a Trailers-Only
/// failure) because its deadline would pass before the next attempt.
#[cold]
pub(super) fn out_of_time<T: Default>(last: &Response<T>, attempts: u32) -> Response<T> {
    let code = crate::head_status(last.headers()).unwrap_or(Code::Unknown);
    let message = format!(
        "deadline exceeded: no time for another attempt after {attempts} (the last ended {code})"
    );
    status_response(Code::DeadlineExceeded, &message)
}

/// A call that ran out of time is `DEADLINE_EXCEEDED`, as gRPC reports it;
/// a call the concurrency limit refused before its first attempt is
/// `RESOURCE_EXHAUSTED`, its message the refusal; any other failure is the
/// error itself.
pub(super) fn call_error<T: Default, E: Error + Send + Sync + 'static>(
    e: RetryError<E>,
) -> Result<Response<T>, BoxError> {
    match (e.reason(), e.limit_refused()) {
        (StopReason::Deadline, _) => Ok(status_response(Code::DeadlineExceeded, &e.to_string())),
        (StopReason::LimitReached, Some(refused)) if e.attempts() == 0 => {
            tracing::debug!(
                limit = refused.by,
                in_flight = refused.in_flight,
                max = refused.limit,
                "steadfast: gRPC call refused by its concurrency limit"
            );
            Ok(status_response(
                Code::ResourceExhausted,
                &refused.to_string(),
            ))
        }
        (StopReason::Throttled, _) if e.attempts() == 0 && e.refused_by().is_some() => {
            tracing::debug!(
                limit = e.refused_by(),
                "steadfast: gRPC call refused by its rate limit"
            );
            let refused = steadfast::rate::RateRefused {
                by: e
                    .refused_by()
                    .unwrap_or(steadfast::rate::DEFAULT_RATE_LIMIT_NAME),
                retry_after: e.retry_after(),
            };
            Ok(status_response(
                Code::ResourceExhausted,
                &refused.to_string(),
            ))
        }
        _ => Err(Box::new(e)),
    }
}

/// A Trailers-Only response with `code` and `message`.
pub(super) fn status_response<T: Default>(code: Code, message: &str) -> Response<T> {
    crate::trailers_only::trailers_only(u32::from(code.number()), message, None)
}
