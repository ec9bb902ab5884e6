//! [`FallbackLayer`]: the core's fallback, outermost, over a retry or
//! hedge layer.

use std::task::{Context, Poll};

use steadfast::RetryError;
use steadfast::call::{Lend, Plain, Reported};
use steadfast::fallback::{AsyncFallback, FallbackFuture, WithFallback};
use tower_layer::Layer;
use tower_service::Service;

use crate::layer::{PolicyService, Runs};
use crate::replay::Replay;

/// Ends every call of the retry or hedge layer under it with a fallback
/// when the call fails for any reason but a cancellation
/// ([`steadfast::fallback::fires`]): attempts spent (an exhausted `503`
/// included: the layer runs the call reported, so it knows a failed
/// response from a success), the deadline, a breaker or budget refusing, a
/// permanent error. The fallback sees the final outcome and the reason
/// ([`Failure`](steadfast::fallback::Failure)); its answer is the call's.
/// Put it over a [`PolicyLayer`](crate::PolicyLayer) (`RetryLayer`,
/// `HedgeLayer`): it drives that layer's reported call.
///
/// ```
/// use std::time::Duration;
/// use steadfast::fallback::{self, Failure};
/// use steadfast::{Backoff, RetryError, RetryPolicy, StopReason};
/// use steadfast_tower::{FallbackLayer, RetryLayer};
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::builder()
///     .backoff(Backoff::constant(Duration::from_millis(10)).build()?)
///     .build()?;
/// let stale = fallback::from_fn(|f: Failure<String, std::io::Error>| {
///     assert_eq!(f.reason(), StopReason::Exhausted);
///     Ok::<_, RetryError<std::io::Error>>(format!("stale after {} attempts", f.attempts()))
/// });
/// let service = ServiceBuilder::new()
///     .layer(FallbackLayer::new(stale))
///     .layer(RetryLayer::new(policy))
///     .service_fn(|_: ()| async { Err::<String, _>(std::io::Error::other("down")) });
/// assert_eq!(service.oneshot(()).await?, "stale after 3 attempts");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct FallbackLayer<F> {
    fallback: F,
    name: Option<&'static str>,
}

impl<F> FallbackLayer<F> {
    /// A layer ending failed calls with `fallback` (cloned into each call:
    /// wrap a large one in an `Arc`).
    #[must_use]
    pub fn new(fallback: F) -> Self {
        Self {
            fallback,
            name: None,
        }
    }

    /// Names the calls in the event a fallback records.
    #[must_use]
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = Some(name);
        self
    }
}

impl<S, F: Clone> Layer<S> for FallbackLayer<F> {
    type Service = FallbackService<S, F>;

    fn layer(&self, inner: S) -> Self::Service {
        FallbackService {
            inner,
            fallback: self.fallback.clone(),
            name: self.name,
        }
    }
}

/// A retry or hedge service under a [`FallbackLayer`].
#[derive(Debug, Clone)]
pub struct FallbackService<S, F> {
    inner: S,
    fallback: F,
    name: Option<&'static str>,
}

impl<S, Req, P, K, R, C, F> Service<Req> for FallbackService<PolicyService<S, P, K, R, C>, F>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend,
    P::Policy: Runs<S, Req, P, K, R, C, Plain> + Runs<S, Req, P, K, R, C, Reported>,
    F: AsyncFallback<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = RetryError<S::Error>;
    type Future = FallbackFuture<
        <P::Policy as Runs<S, Req, P, K, R, C, Reported>>::Future,
        F,
        F::Future,
        Plain,
    >;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let call = self.inner.call_reported(request);
        std::future::IntoFuture::into_future(WithFallback::<_, _, Plain>::new(
            call,
            self.fallback.clone(),
            self.name,
        ))
    }
}
