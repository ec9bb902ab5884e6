//! Replay of `reqwest::Request`s for the engine's layers.

use std::future::Pending;
use std::time::Duration;

use steadfast_tower::replay::{NotReplayable, Prepared, Preparing, Replay};

use crate::attempt::{Call, Sending};

/// Replays a `reqwest::Request` with [`try_clone`](reqwest::Request::try_clone):
/// a buffered body (bytes, text, JSON, a form) is shared by every attempt
/// (`Bytes`, never copied); a streaming body cannot be cloned, so such a
/// request is sent once and never retried, and a failure says why
/// ([`StopReason::NotReplayable`](steadfast::StopReason::NotReplayable)).
///
/// Use it with `steadfast-tower`'s layers over any
/// `tower::Service<reqwest::Request>`, such as a `reqwest::Client`:
///
/// ```
/// use steadfast::RetryPolicy;
/// use steadfast_http::ReqwestReplay;
/// use steadfast_tower::RetryLayer;
/// use tower::ServiceBuilder;
///
/// let client = ServiceBuilder::new()
///     .layer(RetryLayer::new(RetryPolicy::builder().max_attempts(3).build()?).replay(ReqwestReplay))
///     .service(reqwest::Client::new());
/// # let _ = client;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReqwestReplay;

impl Replay<reqwest::Request> for ReqwestReplay {
    type Request = reqwest::Request;
    type Source = reqwest::Request;
    type Prepare = Pending<Prepared<reqwest::Request, reqwest::Request>>;

    fn prepare(
        &self,
        request: reqwest::Request,
    ) -> Preparing<Self::Prepare, Self::Source, Self::Request> {
        Preparing::Done(prepare(request))
    }

    fn replay(&self, source: &reqwest::Request, _: &steadfast::Attempt) -> reqwest::Request {
        copy(source)
    }
}

impl Replay<Call> for ReqwestReplay {
    type Request = Sending;
    type Source = Call;
    type Prepare = Pending<Prepared<Call, Sending>>;

    fn prepare(&self, call: Call) -> Preparing<Self::Prepare, Self::Source, Self::Request> {
        let Call { request, deadline } = call;
        Preparing::Done(match prepare(request) {
            Prepared::Replayable(request) => Prepared::Replayable(Call { request, deadline }),
            // Sent once, so as attempt 1.
            Prepared::Once(request, why) => Prepared::Once(
                Sending {
                    request,
                    number: 1,
                    waited: Duration::ZERO,
                    deadline,
                    endpoint: None,
                },
                why,
            ),
        })
    }

    fn replay(&self, source: &Call, attempt: &steadfast::Attempt) -> Sending {
        Sending {
            request: copy(&source.request),
            number: attempt.number,
            waited: attempt.waited,
            deadline: source.deadline,
            endpoint: attempt.endpoint,
        }
    }

    fn once(&self, mut sending: Sending, attempt: &steadfast::Attempt) -> Sending {
        sending.endpoint = attempt.endpoint;
        sending
    }
}

pub(crate) fn is_replayable(request: &reqwest::Request) -> bool {
    request.body().is_none_or(|b| b.as_bytes().is_some())
}

fn prepare(request: reqwest::Request) -> Prepared<reqwest::Request, reqwest::Request> {
    if is_replayable(&request) {
        Prepared::Replayable(request)
    } else {
        Prepared::Once(request, NotReplayable::Streaming)
    }
}

fn copy(source: &reqwest::Request) -> reqwest::Request {
    match source.try_clone() {
        Some(request) => request,
        // `prepare` keeps only requests whose body is bytes, which clone.
        None => unreachable!("a request kept for replay has a buffered body"),
    }
}
