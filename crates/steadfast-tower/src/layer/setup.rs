//! What a layer's call takes along from the layer to run the core's
//! executor once its request is prepared.

use std::future::Future;
use std::marker::PhantomData;

use steadfast::call::{Finish, Lend};
use tower_service::Service;

use super::PolicyLayer;
use crate::policy::PolicyFor;
use crate::prepare::Start;
use crate::replay::{Prepared, Replay};

/// The service the call's first attempt goes to, the policy it runs under
/// (`Pol`: the layer's own, or one still to be picked by whether the
/// request can be replayed), and the layer's options.
pub(crate) struct Setup<S, Req, Pol, K, R, C, O> {
    pub(crate) service: S,
    pub(crate) policy: Pol,
    pub(crate) classify: K,
    pub(crate) replay: R,
    pub(crate) clock: C,
    pub(crate) name: Option<&'static str>,
    _request: PhantomData<fn(Req) -> O>,
}

impl<S, Req, Pol, K: Clone, R: Clone, C: Clone, O> Setup<S, Req, Pol, K, R, C, O> {
    #[inline]
    pub(crate) fn new<P: Lend>(service: S, layer: &PolicyLayer<P, K, R, C>, policy: Pol) -> Self {
        Self {
            service,
            policy,
            classify: layer.classify.clone(),
            replay: layer.replay.clone(),
            clock: layer.clock.clone(),
            name: layer.name,
            _request: PhantomData,
        }
    }
}

impl<S, Req, Pol, K, R, C, O> Setup<S, Req, Pol, K, R, C, O> {
    /// The same setup with its policy turned into another.
    #[inline]
    pub(crate) fn map_policy<Pol2>(
        self,
        f: impl FnOnce(Pol) -> Pol2,
    ) -> Setup<S, Req, Pol2, K, R, C, O> {
        Setup {
            service: self.service,
            policy: f(self.policy),
            classify: self.classify,
            replay: self.replay,
            clock: self.clock,
            name: self.name,
            _request: PhantomData,
        }
    }
}

/// How a call's executor starts once its request is prepared, for the
/// policy type that runs it: the retry future for a retry policy, the
/// hedger for a hedge policy.
pub(crate) trait Launch<S, Req, P: Lend, K, R: Replay<Req>, C, O>
where
    S: Service<R::Request>,
    O: Finish<S::Response, S::Error>,
{
    /// The executor, resolving to `O`'s form of the call's outcome.
    type Run: Future<Output = O::Output>;

    /// Starts the executor over the prepared request.
    fn launch(
        setup: Setup<S, Req, PolicyFor<P>, K, R, C, O>,
        prepared: Prepared<R::Source, R::Request>,
    ) -> Self::Run;
}

impl<S, Req, P, K, R, C, O> Start<R::Source, R::Request> for Setup<S, Req, PolicyFor<P>, K, R, C, O>
where
    R: Replay<Req>,
    S: Service<R::Request>,
    P: Lend,
    P::Policy: Launch<S, Req, P, K, R, C, O>,
    O: Finish<S::Response, S::Error>,
{
    type Run = <P::Policy as Launch<S, Req, P, K, R, C, O>>::Run;

    #[inline]
    fn start(self, prepared: Prepared<R::Source, R::Request>) -> Self::Run {
        <P::Policy as Launch<S, Req, P, K, R, C, O>>::launch(self, prepared)
    }

    #[inline]
    fn sent_once(output: O::Output) -> O::Output {
        O::sent_once(output)
    }
}
