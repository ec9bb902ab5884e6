use std::borrow::Borrow;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use steadfast::hedge::{HedgeFinish, HedgeFuture, HedgeReport, Hedgeable};
use steadfast::retry::{Plain, Reported};
use steadfast::{AsyncClock, Classify, HedgePolicy};
use tower_service::Service;

use super::HedgeLayer;
use crate::attempt::{AttemptFuture, Attempts, Payload};
use crate::policy::{HedgeCallPolicy, HedgePolicies};
use crate::prepare::{Stages, Start};
use crate::replay::{Prepared, Replay};

/// The core's hedger, run over the layer's attempts.
type Run<S, Req, P, K, R, C> = HedgeFuture<
    Attempts<S, R, Req>,
    AttemptFuture<S, <R as Replay<Req>>::Request>,
    HedgeCallPolicy<P>,
    K,
    C,
    (),
    <S as Service<<R as Replay<Req>>::Request>>::Response,
    <S as Service<<R as Replay<Req>>::Request>>::Error,
    Reported,
>;

/// What a call needs once its request is prepared.
pub(crate) struct Setup<S, Req, P, K, R, C> {
    service: S,
    policy: HedgePolicies<P>,
    classify: K,
    replay: R,
    clock: C,
    name: Option<&'static str>,
    _request: PhantomData<fn(Req)>,
}

impl<S, Req, P, K, R, C> Start<R::Source, R::Request> for Setup<S, Req, P, K, R, C>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Borrow<HedgePolicy>,
    K: Classify<S::Response, S::Error>,
    C: AsyncClock,
{
    type Run = Run<S, Req, P, K, R, C>;

    #[inline]
    fn start(self, prepared: Prepared<R::Source, R::Request>) -> Self::Run {
        let (payload, replayable) = Payload::from_prepared(prepared);
        let policy = self.policy.for_call(replayable);
        let hedge = Attempts::new(self.service, self.replay, payload, true)
            .hedge(policy)
            .with_classifier(self.classify)
            .clock(self.clock)
            .report();
        match self.name {
            Some(name) => hedge.name(name).into_future(),
            None => hedge.into_future(),
        }
    }
}

pin_project! {
    /// The future of a [`HedgeService`](super::HedgeService) call: prepares
    /// the request for replay, then runs the core's hedger.
    ///
    /// It resolves to the call's `Result` (`O` = [`Plain`], the default) or,
    /// from [`HedgeLayer::run_reported`], to the core's [`HedgeReport`].
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<S, Req, P, K, R, C, O = Plain>
    where
        R: Replay<Req>,
        S: Service<R::Request>,
        C: AsyncClock,
    {
        #[pin]
        stages: Stages<R::Prepare, Setup<S, Req, P, K, R, C>, Run<S, Req, P, K, R, C>>,
        output: PhantomData<fn() -> O>,
    }
}

impl<S, Req, P, K, R, C, O> ResponseFuture<S, Req, P, K, R, C, O>
where
    R: Replay<Req> + Clone,
    S: Service<R::Request> + Clone,
    P: Borrow<HedgePolicy>,
    K: Classify<S::Response, S::Error> + Clone,
    C: AsyncClock,
{
    #[inline]
    pub(super) fn new(service: S, layer: &HedgeLayer<P, K, R, C>, request: Req) -> Self {
        let setup = Setup {
            service,
            policy: layer.policy.clone(),
            classify: layer.classify.clone(),
            replay: layer.replay.clone(),
            clock: layer.clock.clone(),
            name: layer.name,
            _request: PhantomData,
        };
        Self {
            stages: Stages::new(layer.replay.prepare(request), setup),
            output: PhantomData,
        }
    }
}

impl<S, Req, P, K, R, C, O> fmt::Debug for ResponseFuture<S, Req, P, K, R, C, O>
where
    R: Replay<Req>,
    S: Service<R::Request>,
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
    P: Borrow<HedgePolicy>,
    K: Classify<S::Response, S::Error>,
    C: AsyncClock,
    O: HedgeFinish<S::Response, S::Error>,
{
    type Output = O::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project()
            .stages
            .poll(cx)
            .map(|report: HedgeReport<S::Response, S::Error>| O::from_report(report))
    }
}
