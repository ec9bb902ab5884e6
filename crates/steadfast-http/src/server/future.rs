//! [`ShedFuture`]: a request on its way through a [`Shed`](super::Shed)
//! service: waiting for a slot, in the service, or shed.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use http::{HeaderValue, Request, Response, StatusCode};
use http_body::Body;
use pin_project_lite::pin_project;
use steadfast::clock::AsyncClock;
use steadfast::limit::{Acquire, LimitRefused, Permit};
use tower_service::Service;

use super::body::ShedBody;
use super::signal_of;

pin_project! {
    /// The future of a [`Shed`](super::Shed) call: the service's response
    /// with the request's slot in its body, or a 503 for a request the
    /// limit had no slot for.
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
            retry_after: Option<HeaderValue>,
        },
        /// Shed: answered 503 when polled.
        Refused {
            refused: LimitRefused,
            retry_after: Option<HeaderValue>,
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

    pub(super) fn refused(refused: LimitRefused, retry_after: Option<HeaderValue>) -> Self {
        Self {
            state: State::Refused {
                refused,
                retry_after,
            },
        }
    }

    pub(super) fn queued(
        acquire: Acquire,
        timer: C::Sleep,
        clock: C,
        service: S,
        request: Request<B>,
        retry_after: Option<HeaderValue>,
    ) -> Self {
        Self {
            state: State::Queued {
                acquire: Some(acquire),
                timer,
                since: clock.now(),
                clock,
                service: Some(service),
                request: Some(request),
                retry_after,
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
                        let signal = signal_of(response.status());
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
                    retry_after,
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
                            let retry_after = retry_after.take();
                            state.set(State::Refused {
                                refused,
                                retry_after,
                            });
                        }
                    }
                }
                StateProj::Refused {
                    refused,
                    retry_after,
                } => {
                    let response = shed(refused, retry_after.take());
                    state.set(State::Done);
                    return Poll::Ready(Ok(response));
                }
                StateProj::Done => panic!("a ShedFuture was polled after it completed"),
            }
        }
    }
}

/// The answer to a request the limit had no slot for.
#[cold]
fn shed<B>(refused: &LimitRefused, retry_after: Option<HeaderValue>) -> Response<ShedBody<B>> {
    tracing::debug!(
        limit = refused.by,
        in_flight = refused.in_flight,
        max = refused.limit,
        waited_ms = u64::try_from(refused.waited.as_millis()).unwrap_or(u64::MAX),
        "steadfast-http: request shed (503)"
    );
    let mut response = Response::new(ShedBody::empty());
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    if let Some(value) = retry_after {
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, value);
    }
    response
}
