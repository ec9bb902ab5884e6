//! [`ShedFuture`]: a request on its way through a [`Shed`](super::Shed)
//! service: waiting for a slot, in the service, or shed.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use steadfast::clock::AsyncClock;
use steadfast::limit::{Acquire, LimitRefused, Permit};
use tower_service::Service;

use super::Shedding;
use super::body::ShedBody;

pin_project! {
    /// The future of a [`Shed`](super::Shed) call: the service's response
    /// with the request's slot in its body, or the protocol's refusal for a
    /// request the limit had no slot for.
    ///
    /// Dropped before it is done (the connection went away), it gives back
    /// the slot it holds, or leaves the limit's queue.
    #[must_use = "futures do nothing unless polled"]
    pub struct ShedFuture<S, B, P, C>
    where
        S: Service<Request<B>>,
        C: AsyncClock,
    {
        #[pin]
        state: State<S, B, C>,
        protocol: Option<P>,
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
        },
        /// Shed: answered with the protocol's refusal when polled.
        Refused {
            refused: LimitRefused,
        },
        Done,
    }
}

impl<S, B, P, C> ShedFuture<S, B, P, C>
where
    S: Service<Request<B>>,
    C: AsyncClock,
{
    pub(super) fn calling(future: S::Future, permit: Permit, protocol: P) -> Self {
        Self {
            state: State::Calling {
                future,
                permit: Some(permit),
            },
            protocol: Some(protocol),
        }
    }

    pub(super) fn refused(refused: LimitRefused, protocol: P) -> Self {
        Self {
            state: State::Refused { refused },
            protocol: Some(protocol),
        }
    }

    pub(super) fn queued(
        acquire: Acquire,
        timer: C::Sleep,
        clock: C,
        service: S,
        request: Request<B>,
        protocol: P,
    ) -> Self {
        Self {
            state: State::Queued {
                acquire: Some(acquire),
                timer,
                since: clock.now(),
                clock,
                service: Some(service),
                request: Some(request),
            },
            protocol: Some(protocol),
        }
    }
}

impl<S, B, P, C> fmt::Debug for ShedFuture<S, B, P, C>
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

impl<S, B, P, C, ResBody> Future for ShedFuture<S, B, P, C>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    ResBody: Body,
    P: Shedding,
    C: AsyncClock,
{
    type Output = Result<Response<ShedBody<ResBody, P>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut state = this.state;
        loop {
            match state.as_mut().project() {
                StateProj::Calling { future, permit } => {
                    let out = ready!(future.poll(cx));
                    let permit = permit.take();
                    let protocol = this.protocol.take();
                    state.set(State::Done);
                    // An error of the service drops the slot: no signal.
                    return Poll::Ready(out.map(|response| {
                        let (head, body) = response.into_parts();
                        let body = match (permit, protocol) {
                            (Some(permit), Some(protocol)) => {
                                let signal = protocol.on_head(&head);
                                ShedBody::holding(body, permit, signal, protocol)
                            }
                            _ => unreachable!("a call holds its slot and protocol"),
                        };
                        Response::from_parts(head, body)
                    }));
                }
                StateProj::Queued {
                    acquire,
                    timer,
                    since,
                    clock,
                    service,
                    request,
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
                        Err(refused) => state.set(State::Refused { refused }),
                    }
                }
                StateProj::Refused { refused } => {
                    let Some(protocol) = this.protocol.take() else {
                        unreachable!("a refusal keeps its protocol");
                    };
                    let response = shed(&protocol, refused);
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
fn shed<B, P: Shedding>(protocol: &P, refused: &LimitRefused) -> Response<ShedBody<B, P>> {
    tracing::debug!(
        limit = refused.by,
        in_flight = refused.in_flight,
        max = refused.limit,
        waited_ms = u64::try_from(refused.waited.as_millis()).unwrap_or(u64::MAX),
        "steadfast: request shed"
    );
    protocol.refused(refused).map(|()| ShedBody::empty())
}
