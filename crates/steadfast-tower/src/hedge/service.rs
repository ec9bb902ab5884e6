use std::borrow::Borrow;
use std::fmt;
use std::task::{Context, Poll};

use steadfast::{AsyncClock, Classify, HedgeError, HedgePolicy, HedgeStats, StopReason};
use tower_service::Service;

use super::{HedgeLayer, ResponseFuture};
use crate::replay::Replay;

/// The service a [`HedgeLayer`] makes: see the [module docs](crate::hedge).
pub struct HedgeService<S, P, K, R, C> {
    pub(super) inner: S,
    pub(super) layer: HedgeLayer<P, K, R, C>,
}

impl<S: Clone, P, K: Clone, R: Clone, C: Clone> Clone for HedgeService<S, P, K, R, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S: fmt::Debug, P: Borrow<HedgePolicy>, K: fmt::Debug, R: fmt::Debug, C: fmt::Debug> fmt::Debug
    for HedgeService<S, P, K, R, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, P, K, R, C> HedgeService<S, P, K, R, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, Req, P, K, R, C> Service<Req> for HedgeService<S, P, K, R, C>
where
    R: Replay<Req> + Clone,
    S: Service<R::Request> + Clone,
    P: Borrow<HedgePolicy>,
    K: Classify<S::Response, S::Error> + Clone,
    C: AsyncClock,
{
    type Response = S::Response;
    type Error = HedgeError<S::Error>;
    type Future = ResponseFuture<S, Req, P, K, R, C>;

    /// The inner service's readiness; its error, should it fail, ends the
    /// call before any copy (reason [`StopReason::Permanent`], none sent).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| HedgeError::new(StopReason::Permanent, Some(e), HedgeStats::default()))
    }

    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        let ready = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, ready);
        self.layer.run(ready, request)
    }
}
