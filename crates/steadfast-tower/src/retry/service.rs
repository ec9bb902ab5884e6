use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

use steadfast::retry::AsPolicy;
use steadfast::{AsyncClock, Classify, RetryError, StopReason};
use tower_service::Service;

use super::{ResponseFuture, RetryLayer};
use crate::replay::Replay;

/// The service a [`RetryLayer`] makes: see the [module docs](crate::retry).
pub struct RetryService<S, P: AsPolicy, K, R, C> {
    pub(super) inner: S,
    pub(super) layer: RetryLayer<P, K, R, C>,
}

impl<S: Clone, P: AsPolicy + Clone, K: Clone, R: Clone, C: Clone> Clone
    for RetryService<S, P, K, R, C>
{
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S: fmt::Debug, P: AsPolicy, K: fmt::Debug, R: fmt::Debug, C: fmt::Debug> fmt::Debug
    for RetryService<S, P, K, R, C>
where
    P::Schedule: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, P: AsPolicy, K, R, C> RetryService<S, P, K, R, C> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S, Req, P, K, R, C> Service<Req> for RetryService<S, P, K, R, C>
where
    R: Replay<Req> + Clone,
    S: Service<R::Request> + Clone,
    P: AsPolicy + Clone,
    P::Schedule: Clone,
    K: Classify<S::Response, S::Error> + Clone,
    C: AsyncClock,
{
    type Response = S::Response;
    type Error = RetryError<S::Error>;
    type Future = ResponseFuture<S, Req, P, K, R, C>;

    /// The inner service's readiness; its error, should it fail, ends the
    /// call before any attempt (reason [`StopReason::Permanent`], 0 attempts).
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| RetryError::new(StopReason::Permanent, Some(e), 0, Duration::ZERO))
    }

    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        // The readied service makes the first attempt; a clone of it stays
        // here, for the next call (tower's idiom for calls that outlive
        // `call`).
        let ready = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, ready);
        self.layer.run(ready, request)
    }
}
