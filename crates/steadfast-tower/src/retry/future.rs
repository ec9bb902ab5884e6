use std::fmt;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use steadfast::retry::{AsPolicy, Finish, Plain, RetryFuture, Retryable};
use steadfast::{AsyncClock, Classify};
use tower_service::Service;

use super::RetryLayer;
use crate::attempt::{AttemptFuture, Attempts, Payload};
use crate::policy::{CallPolicy, PolicyFor};
use crate::prepare::{SentOnce, Stages, Start};
use crate::replay::{Prepared, Replay};

/// The core's retry future, run over the layer's attempts, with the output
/// form the caller chose (`O`: the `Result`, or the whole report).
type Run<S, Req, P, K, R, C, O> = RetryFuture<
    Attempts<S, R, Req>,
    AttemptFuture<S, <R as Replay<Req>>::Request>,
    CallPolicy<P>,
    K,
    (),
    C,
    <S as Service<<R as Replay<Req>>::Request>>::Response,
    <S as Service<<R as Replay<Req>>::Request>>::Error,
    O,
>;

/// What a call needs once its request is prepared.
pub(crate) struct Setup<S, Req, P: AsPolicy, K, R, C, O> {
    service: S,
    policy: PolicyFor<P>,
    classify: K,
    replay: R,
    clock: C,
    name: Option<&'static str>,
    _request: PhantomData<fn(Req) -> O>,
}

impl<S, Req, P, K, R, C, O> Start<R::Source, R::Request> for Setup<S, Req, P, K, R, C, O>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: AsPolicy,
    P::Schedule: Clone,
    K: Classify<S::Response, S::Error>,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    type Run = Run<S, Req, P, K, R, C, O>;

    #[inline]
    fn start(self, prepared: Prepared<R::Source, R::Request>) -> Self::Run {
        let setup = self;
        let (payload, replayable) = Payload::from_prepared(prepared);
        let policy = setup.policy.decide(replayable);
        let retry = Attempts::new(setup.service, setup.replay, payload)
            .retry(policy)
            .with_classifier(setup.classify)
            .clock(setup.clock)
            .output::<O>();
        match setup.name {
            Some(name) => retry.name(name).into_future(),
            None => retry.into_future(),
        }
    }
}

pin_project! {
    /// The future of a [`RetryService`](super::RetryService) call: prepares
    /// the request for replay, then runs the core's retry future.
    ///
    /// It resolves to the call's `Result` (`O` = [`Plain`], the default) or,
    /// from [`RetryLayer::run_reported`], to the core's [`Report`].
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<S, Req, P, K, R, C, O = Plain>
    where
        R: Replay<Req>,
        S: Service<R::Request>,
        P: AsPolicy,
        C: AsyncClock,
    {
        #[pin]
        stages: Stages<R::Prepare, Setup<S, Req, P, K, R, C, O>, Run<S, Req, P, K, R, C, O>>,
    }
}

impl<S, Req, P, K, R, C, O> ResponseFuture<S, Req, P, K, R, C, O>
where
    R: Replay<Req> + Clone,
    S: Service<R::Request> + Clone,
    P: AsPolicy + Clone,
    P::Schedule: Clone,
    K: Classify<S::Response, S::Error> + Clone,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    #[inline]
    pub(super) fn new(service: S, layer: &RetryLayer<P, K, R, C>, request: Req) -> Self {
        let preparing = layer.replay.prepare(request);
        let setup = Setup {
            service,
            policy: layer.policy.for_call(&preparing),
            classify: layer.classify.clone(),
            replay: layer.replay.clone(),
            clock: layer.clock.clone(),
            name: layer.name,
            _request: PhantomData,
        };
        Self {
            stages: Stages::new(preparing, setup),
        }
    }
}

impl<S, Req, P, K, R, C, O> fmt::Debug for ResponseFuture<S, Req, P, K, R, C, O>
where
    R: Replay<Req>,
    S: Service<R::Request>,
    P: AsPolicy,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("stage", &self.stages)
            .finish_non_exhaustive()
    }
}

impl<S, Req, P, K, R, C, O> Future for ResponseFuture<S, Req, P, K, R, C, O>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: AsPolicy,
    P::Schedule: Clone,
    K: Classify<S::Response, S::Error>,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
    O::Output: SentOnce,
{
    type Output = O::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().stages.poll(cx)
    }
}
