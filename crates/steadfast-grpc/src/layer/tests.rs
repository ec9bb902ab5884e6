//! Unit tests of the layer's answers and routes.

use std::time::{Duration, Instant};

use http::Response;
use steadfast::call::Reported;
use steadfast::{Deadline, Report, StopReason};

use crate::Code;

use steadfast::call::{Ending, Finish};

use super::BoxError;
use super::answer::{answer, status_response};

/// A Trailers-Only answer with `code`, as an attempt's final outcome.
fn report(code: Code) -> Report<Response<()>, std::io::Error> {
    let mut ending = Ending::default();
    ending.attempts = 1;
    ending.stop = Some(StopReason::Permanent);
    <Reported as Finish<Response<()>, std::io::Error>>::finish(
        Ok(status_response(code, "Timeout expired")),
        || ending,
    )
}

fn code(answer: &Result<Response<()>, BoxError>) -> Option<Code> {
    answer
        .as_ref()
        .ok()
        .and_then(|r| crate::head_status(r.headers()))
}

/// #28 item 6: a server that enforces the `grpc-timeout` it got answers
/// CANCELLED a hair after the deadline; the caller sees the deadline's
/// status, DEADLINE_EXCEEDED. Before the deadline, CANCELLED stands.
#[test]
fn a_failure_at_or_after_the_deadline_is_deadline_exceeded() {
    let start = Instant::now();
    let due = Some(Deadline::after(start, Duration::from_millis(200)));
    let late = start + Duration::from_millis(201);
    assert_eq!(
        code(&answer(report(Code::Cancelled), due, late)),
        Some(Code::DeadlineExceeded)
    );
    assert_eq!(
        code(&answer(
            report(Code::Unavailable),
            due,
            start + Duration::from_millis(200)
        )),
        Some(Code::DeadlineExceeded)
    );
    let early = start + Duration::from_millis(150);
    assert_eq!(
        code(&answer(report(Code::Cancelled), due, early)),
        Some(Code::Cancelled)
    );
    assert_eq!(
        code(&answer(report(Code::Cancelled), None, late)),
        Some(Code::Cancelled)
    );
}
