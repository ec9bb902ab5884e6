use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use steadfast::call::{Finish, Lend, Plain};
use steadfast::clock::AsyncClock;
use steadfast::hedge::{HedgeFuture, Hedgeable};
use steadfast::{Classify, HedgePolicy};
use tower_service::Service;

use crate::attempt::{Attempts, Payload};
use crate::layer::{Launch, PolicyLayer, Runs, Setup};
use crate::policy::{CallPolicy, PolicyFor};
use crate::prepare::Stages;
use crate::replay::{Prepared, Replay};

/// The core's hedger, run over the layer's attempts, with the output form
/// the caller chose.
type Run<S, Req, P, K, R, C, O> = HedgeFuture<Attempts<S, R, Req>, CallPolicy<P>, K, (), C, O>;

impl<S, Req, P, K, R, C, O> Launch<S, Req, P, K, R, C, O> for HedgePolicy
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend<Policy = HedgePolicy>,
    K: Classify<S::Response, S::Error>,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    type Run = Run<S, Req, P, K, R, C, O>;

    #[inline]
    fn launch(
        setup: Setup<S, Req, PolicyFor<P>, K, R, C, O>,
        prepared: Prepared<R::Source, R::Request>,
    ) -> Self::Run {
        let (payload, replayable) = Payload::from_prepared(prepared);
        let hedge = Attempts::new(setup.service, setup.replay, payload, true)
            .hedge(setup.policy.decide(replayable))
            .with_classifier(setup.classify)
            .clock(setup.clock)
            .output::<O>();
        match setup.name {
            Some(name) => hedge.name(name).into_future(),
            None => hedge.into_future(),
        }
    }
}

pin_project! {
    /// The future of a [`HedgeService`](crate::HedgeService) call: prepares
    /// the request for replay, then runs the core's hedger.
    ///
    /// It resolves to the call's `Result` (`O` = [`Plain`], the default) or,
    /// from [`PolicyLayer::run_reported`], to the core's
    /// [`Report`](steadfast::Report), with the copies' stats.
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<S, Req, P, K, R, C, O = Plain>
    where
        R: Replay<Req>,
        S: Service<R::Request>,
        S: Clone,
        P: Lend,
        C: AsyncClock,
    {
        #[pin]
        stages: Stages<R::Prepare, Setup<S, Req, PolicyFor<P>, K, R, C, O>, Run<S, Req, P, K, R, C, O>>,
    }
}

impl<S, Req, P, K, R, C, O> fmt::Debug for ResponseFuture<S, Req, P, K, R, C, O>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend,
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
    P: Lend<Policy = HedgePolicy>,
    K: Classify<S::Response, S::Error>,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    type Output = O::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().stages.poll(cx)
    }
}

impl<S, Req, P, K, R, C, O> Runs<S, Req, P, K, R, C, O> for HedgePolicy
where
    R: Replay<Req> + Clone,
    S: Service<R::Request> + Clone,
    P: Lend<Policy = Self> + Clone,
    K: Classify<S::Response, S::Error> + Clone,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    type Future = ResponseFuture<S, Req, P, K, R, C, O>;

    #[inline]
    fn run(service: S, layer: &PolicyLayer<P, K, R, C>, request: Req) -> Self::Future {
        let preparing = layer.replay.prepare(request);
        let policy = layer.policy.for_call(&preparing);
        ResponseFuture {
            stages: Stages::new(preparing, Setup::new(service, layer, policy)),
        }
    }
}
