//! One attempt on a tower service, and the operation that makes them: what
//! the core's executors run when a layer drives them.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use steadfast::Attempt;
use steadfast::call::Operation;
use tower_service::Service;

use crate::replay::{Prepared, Replay};

pin_project! {
    /// One attempt: waits until its own clone of the service is ready, then
    /// calls it and awaits the response.
    ///
    /// A readiness error is the attempt's outcome, classified like any
    /// other error.
    #[project = AttemptProj]
    pub(crate) enum AttemptFuture<S, Req>
    where
        S: Service<Req>,
    {
        /// Waiting for the service to be ready.
        Readying { service: S, request: Option<Req> },
        /// Called: the response is on its way.
        Called { #[pin] future: S::Future },
    }
}

impl<S: Service<Req>, Req> AttemptFuture<S, Req> {
    /// An attempt on a service that has not said it is ready.
    pub(crate) fn new(service: S, request: Req) -> Self {
        Self::Readying {
            service,
            request: Some(request),
        }
    }

    /// An attempt on a service that said it is ready: called at once.
    #[inline]
    pub(crate) fn call(service: &mut S, request: Req) -> Self {
        Self::Called {
            future: service.call(request),
        }
    }
}

impl<S: Service<Req>, Req> fmt::Debug for AttemptFuture<S, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Readying { .. } => "AttemptFuture::Readying",
            Self::Called { .. } => "AttemptFuture::Called",
        })
    }
}

impl<S: Service<Req>, Req> Future for AttemptFuture<S, Req> {
    type Output = Result<S::Response, S::Error>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project() {
                AttemptProj::Called { future } => return future.poll(cx),
                AttemptProj::Readying { service, request } => {
                    if let Err(error) = std::task::ready!(service.poll_ready(cx)) {
                        return Poll::Ready(Err(error));
                    }
                    let Some(request) = request.take() else {
                        unreachable!("an attempt's request is taken only when it is called");
                    };
                    let future = service.call(request);
                    self.set(Self::Called { future });
                }
            }
        }
    }
}

/// What each attempt is made from: a replayable request, or one that can be
/// sent only once.
pub(crate) enum Payload<Src, Req> {
    Replayable(Src),
    Once(Option<Req>),
}

impl<Src, Req> Payload<Src, Req> {
    /// What a prepared request's attempts are made from, and whether it can
    /// be sent more than once.
    #[inline]
    pub(crate) fn from_prepared(prepared: Prepared<Src, Req>) -> (Self, bool) {
        match prepared {
            Prepared::Replayable(source) => (Self::Replayable(source), true),
            Prepared::Once(request, _) => (Self::Once(Some(request)), false),
        }
    }
}

/// The operation a layer hands to the core's executor: each attempt is the
/// request made again from its source, sent on a service that is ready.
///
/// The first attempt goes to the service the layer's `poll_ready` readied;
/// every later attempt (a retry, a hedge copy) to a fresh clone of it,
/// readied first. Attempts are made inside the attempt's deadline scope, so
/// the inner service's `call` sees the attempt's deadline as the ambient one.
pub(crate) struct Attempts<S, R, Req>
where
    R: Replay<Req>,
{
    service: S,
    /// Whether `service` is the readied one, not called yet.
    ready: bool,
    replay: R,
    payload: Payload<R::Source, R::Request>,
    _request: PhantomData<fn(Req)>,
}

impl<S, R: Replay<Req>, Req> Attempts<S, R, Req> {
    #[inline]
    pub(crate) fn new(
        service: S,
        replay: R,
        payload: Payload<R::Source, R::Request>,
        ready: bool,
    ) -> Self {
        Self {
            service,
            ready,
            replay,
            payload,
            _request: PhantomData,
        }
    }
}

impl<S, R: Replay<Req>, Req> fmt::Debug for Attempts<S, R, Req> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attempts")
            .field("ready", &self.ready)
            .finish_non_exhaustive()
    }
}

impl<S, R, Req> Operation for Attempts<S, R, Req>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
{
    type Future = AttemptFuture<S, R::Request>;

    #[inline]
    fn attempt(&mut self, attempt: Attempt) -> Self::Future {
        let request = match &mut self.payload {
            Payload::Replayable(source) => self.replay.replay(source, &attempt),
            Payload::Once(request) => match request.take() {
                Some(request) => self.replay.once(request, &attempt),
                // The layers run a request that is sent once under a
                // single-attempt policy, so no second attempt is asked for.
                None => unreachable!("a request that cannot be replayed is sent once"),
            },
        };
        if std::mem::take(&mut self.ready) {
            AttemptFuture::call(&mut self.service, request)
        } else {
            AttemptFuture::new(self.service.clone(), request)
        }
    }
}
