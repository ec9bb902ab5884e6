//! [`PolicyService`]: the service a [`PolicyLayer`] makes.

use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

use steadfast::call::{Lend, Plain, Reported};
use steadfast::{RetryError, StopReason};
use tower_service::Service;

use super::{PolicyLayer, Runs};
use crate::replay::Replay;

/// The service a [`PolicyLayer`] makes (as [`RetryService`](crate::RetryService)
/// or [`HedgeService`](crate::HedgeService)): see [`retry`](crate::retry)
/// and [`hedge`](crate::hedge).
#[derive(Clone)]
pub struct PolicyService<S, P: Lend, K, R, C> {
    pub(crate) inner: S,
    pub(crate) layer: PolicyLayer<P, K, R, C>,
}

impl<S: fmt::Debug, P: Lend, K: fmt::Debug, R: fmt::Debug, C: fmt::Debug> fmt::Debug
    for PolicyService<S, P, K, R, C>
where
    P::Policy: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, P: Lend, K, R, C> PolicyService<S, P, K, R, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, P: Lend, K, R, C> PolicyService<S, P, K, R, C> {
    /// [`call`](Service::call), resolving to the core's
    /// [`Report`](steadfast::Report) instead of the result alone: the
    /// result, the attempts, why the call stopped, the time waited, and for
    /// a hedge the copies' stats. The service must have been readied first,
    /// as for `call`.
    pub fn call_reported<Req>(
        &mut self,
        request: Req,
    ) -> <P::Policy as Runs<S, Req, P, K, R, C, Reported>>::Future
    where
        R: Replay<Req>,
        S: Service<R::Request> + Clone,
        P::Policy: Runs<S, Req, P, K, R, C, Reported>,
    {
        let ready = self.take_ready();
        self.layer.run_reported(ready, request)
    }

    /// The readied service, for a call to make its first attempt on; a
    /// clone of it stays here for the next call (tower's idiom for calls
    /// that outlive `call`).
    fn take_ready(&mut self) -> S
    where
        S: Clone,
    {
        let ready = self.inner.clone();
        std::mem::replace(&mut self.inner, ready)
    }
}

impl<S, Req, P, K, R, C> Service<Req> for PolicyService<S, P, K, R, C>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend,
    P::Policy: Runs<S, Req, P, K, R, C, Plain>,
{
    type Response = S::Response;
    type Error = RetryError<S::Error>;
    type Future = <P::Policy as Runs<S, Req, P, K, R, C, Plain>>::Future;

    /// The inner service's readiness; its error, should it fail, ends the
    /// call before any attempt (reason [`StopReason::Permanent`], 0 attempts).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| RetryError::new(StopReason::Permanent, Some(e), 0, Duration::ZERO))
    }

    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        let ready = self.take_ready();
        self.layer.run(ready, request)
    }
}
