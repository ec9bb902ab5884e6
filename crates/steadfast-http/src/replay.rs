//! Replay of `reqwest::Request`s for the engine's layers.

use std::future::Pending;

use steadfast_tower::replay::{NotReplayable, Prepared, Preparing, Replay};

use crate::attempt::Tracked;

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

impl<'a> Replay<Tracked<'a>> for ReqwestReplay {
    type Request = Tracked<'a>;
    type Source = Tracked<'a>;
    type Prepare = Pending<Prepared<Tracked<'a>, Tracked<'a>>>;

    fn prepare(
        &self,
        tracked: Tracked<'a>,
    ) -> Preparing<Self::Prepare, Self::Source, Self::Request> {
        let Tracked { request, tracker } = tracked;
        Preparing::Done(match prepare(request) {
            Prepared::Replayable(request) => Prepared::Replayable(Tracked { request, tracker }),
            Prepared::Once(request, why) => Prepared::Once(Tracked { request, tracker }, why),
        })
    }

    fn replay(&self, source: &Tracked<'a>, _: &steadfast::Attempt) -> Tracked<'a> {
        Tracked {
            request: copy(&source.request),
            tracker: source.tracker,
        }
    }
}

/// Whether a request can be copied: every body except a stream.
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
