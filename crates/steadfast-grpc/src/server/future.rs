//! [`ShedFuture`]: a call on its way through a [`Shed`](super::Shed)
//! service: waiting for a slot, in the service, or shed.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use http::{HeaderValue, Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use steadfast::clock::AsyncClock;
use steadfast::limit::{Acquire, LimitRefused, Permit};
use tower_service::Service;

use super::body::ShedBody;
use super::status_signal;
use crate::Code;

pin_project! {
    /// The future of a [`Shed`](super::Shed) call: the service's response
    /// with the call's slot in its body, or a Trailers-Only
    /// `RESOURCE_EXHAUSTED` for a call the limit had no slot for.
    ///
    /// Dropped before it is done (the connection went away), it gives back
    /// the slot it holds, or leaves the limit's queue.
    #[must_use = "futures do nothing unless polled"]
    pub struct ShedFuture<S, B, C>
    where
        S: Service<Request<B>>,
        C: AsyncClock,
    {
        #[pin]
        state: State<S, B, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B, C>
    where
        S: Service<Request<B>>,
        C: AsyncClock,
    {
        /// In the service, holding its slot.
        Calling {
            #[pin]
            future: S::Future,
            permit: Option<Permit>,
        },
        /// Waiting in the limit's queue, at most until `timer` ends, with
        /// the readied service and the request.
        Queued {
            acquire: Option<Acquire>,
            #[pin]
            timer: C::Sleep,
            since: Instant,
            clock: C,
            service: Option<S>,
            request: Option<Request<B>>,
            pushback: Option<HeaderValue>,
        },
        /// Shed: answered `RESOURCE_EXHAUSTED` when polled.
        Refused {
            refused: LimitRefused,
            pushback: Option<HeaderValue>,
        },
        Done,
    }
}

impl<S, B, C> ShedFuture<S, B, C>
where
    S: Service<Request<B>>,
    C: AsyncClock,
{
    pub(super) fn calling(future: S::Future, permit: Permit) -> Self {
        Self {
            state: State::Calling {
                future,
                permit: Some(permit),
            },
        }
    }

    pub(super) fn refused(refused: LimitRefused, pushback: Option<HeaderValue>) -> Self {
        Self {
            state: State::Refused { refused, pushback },
        }
    }

    pub(super) fn queued(
        acquire: Acquire,
        timer: C::Sleep,
        clock: C,
        service: S,
        request: Request<B>,
        pushback: Option<HeaderValue>,
    ) -> Self {
        Self {
            state: State::Queued {
                acquire: Some(acquire),
                timer,
                since: clock.now(),
                clock,
                service: Some(service),
                request: Some(request),
                pushback,
            },
        }
    }
}

impl<S, B, C> fmt::Debug for ShedFuture<S, B, C>
where
    S: Service<Request<B>>,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.state {
            State::Calling { .. } => "ShedFuture(calling)",
            State::Queued { .. } => "ShedFuture(queued)",
            State::Refused { .. } => "ShedFuture(shed)",
            State::Done => "ShedFuture(done)",
        })
    }
}

impl<S, B, C, ResBody> Future for ShedFuture<S, B, C>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    ResBody: Body,
    C: AsyncClock,
{
    type Output = Result<Response<ShedBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Calling { future, permit } => {
                    let out = ready!(future.poll(cx));
                    let permit = permit.take();
                    state.set(State::Done);
                    // An error of the service drops the slot: no signal.
                    return Poll::Ready(out.map(|response| {
                        // A Trailers-Only head says how the call ended.
                        let signal = status_signal(response.headers());
                        response.map(|body| ShedBody::holding(body, permit, signal))
                    }));
                }
                StateProj::Queued {
                    acquire,
                    timer,
                    since,
                    clock,
                    service,
                    request,
                    pushback,
                } => {
                    let Some(waiting) = acquire.as_mut() else {
                        unreachable!("a queued request waits for its slot");
                    };
                    let got = match Pin::new(waiting).poll(cx) {
                        Poll::Ready(got) => got,
                        Poll::Pending => {
                            ready!(timer.poll(cx));
                            let waited = clock.now().saturating_duration_since(*since);
                            match acquire.take() {
                                Some(waiting) => waiting.give_up(waited),
                                None => unreachable!("taken above"),
                            }
                        }
                    };
                    *acquire = None;
                    match got {
                        Ok(permit) => {
                            let (Some(mut service), Some(request)) =
                                (service.take(), request.take())
                            else {
                                unreachable!("a queued request keeps its service and request");
                            };
                            let future = service.call(request);
                            state.set(State::Calling {
                                future,
                                permit: Some(permit),
                            });
                        }
                        Err(refused) => {
                            let pushback = pushback.take();
                            state.set(State::Refused { refused, pushback });
                        }
                    }
                }
                StateProj::Refused { refused, pushback } => {
                    let response = shed(refused, pushback.take());
                    state.set(State::Done);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Done => panic!("a ShedFuture was polled after it completed"),
            }
        }
    }
}

/// The answer to a call the limit had no slot for: a Trailers-Only
/// `RESOURCE_EXHAUSTED` naming the limit, with the pushback if set.
#[cold]
fn shed<B>(refused: &LimitRefused, pushback: Option<HeaderValue>) -> Response<ShedBody<B>> {
    tracing::debug!(
        limit = refused.by,
        in_flight = refused.in_flight,
        max = refused.limit,
        waited_ms = u64::try_from(refused.waited.as_millis()).unwrap_or(u64::MAX),
        "steadfast: gRPC call shed (RESOURCE_EXHAUSTED)"
    );
    let mut response = Response::new(ShedBody::empty());
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert(
        "grpc-status",
        HeaderValue::from(u16::from(Code::ResourceExhausted.number())),
    );
    if let Ok(message) = HeaderValue::try_from(percent_encode(&refused.to_string())) {
        headers.insert("grpc-message", message);
    }
    if let Some(value) = pushback {
        headers.insert(crate::PUSHBACK_HEADER, value);
    }
    response
}

/// `grpc-message` encoding: the printable ASCII bytes but `%` as they are,
/// every other byte as `%XX` (the gRPC HTTP/2 protocol's rule).
fn percent_encode(message: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(message.len());
    for byte in message.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn grpc_message_is_percent_encoded() {
        assert_eq!(
            super::percent_encode("full: 4 in flight"),
            "full: 4 in flight"
        );
        assert_eq!(super::percent_encode("100% \u{fc}\n"), "100%25 %C3%BC%0A");
    }
}
