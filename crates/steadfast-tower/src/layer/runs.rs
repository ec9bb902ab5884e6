//! [`Runs`]: what differs between a retried and a hedged call through a
//! layer, the executor it runs.

use std::future::Future;

use steadfast::call::{Finish, Lend};
use tower_service::Service;

use steadfast::policy::Policy;

use super::PolicyLayer;
use crate::replay::Replay;

/// How a call through a [`PolicyLayer`] runs under a policy of this type:
/// [`RetryPolicy`](steadfast::RetryPolicy) runs the core's retry future
/// (as [`retry::ResponseFuture`](crate::retry::ResponseFuture)),
/// [`HedgePolicy`](steadfast::HedgePolicy) the core's hedger (as
/// [`hedge::ResponseFuture`](crate::hedge::ResponseFuture)). Implemented for
/// those two; the layer's code is otherwise one.
pub trait Runs<S, Req, P, K, R, C, O>: Policy
where
    R: Replay<Req>,
    S: Service<R::Request>,
    P: Lend<Policy = Self>,
    O: Finish<S::Response, S::Error>,
{
    /// The future of one call, resolving to `O`'s form of its outcome.
    type Future: Future<Output = O::Output>;

    /// Makes one call of `request` on the readied `service` under `layer`.
    #[doc(hidden)]
    fn run(service: S, layer: &PolicyLayer<P, K, R, C>, request: Req) -> Self::Future;
}
