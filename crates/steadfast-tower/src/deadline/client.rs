use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use steadfast::clock::{AsyncClock, Clock, DefaultClock};
use steadfast::deadline::Timeout;
use steadfast::{Deadline, deadline};
use tower_layer::Layer;
use tower_service::Service;

use super::DeadlineError;

/// Runs each call under a deadline: the earliest of the ambient deadline
/// and, if set, the layer's timeout from the call's start.
///
/// The inner service's `call` and its future run with that deadline as the
/// ambient one ([`steadfast::deadline::current`]), so a
/// [`SetDeadlineHeaderLayer`](super::SetDeadlineHeaderLayer) or any library
/// below sees the time left; when it passes, the inner future is dropped and
/// the call fails with [`DeadlineError::Exceeded`]. A call with no deadline
/// at all passes through untouched, with no timer and no clock read beyond
/// the one that looks for it.
///
/// ```
/// use std::time::Duration;
/// use steadfast_tower::deadline::{DeadlineError, DeadlineLayer};
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let slow = service_fn(|_: ()| async {
///     tokio::time::sleep(Duration::from_secs(10)).await;
///     Ok::<_, std::io::Error>("late")
/// });
/// let service = ServiceBuilder::new()
///     .layer(DeadlineLayer::new(Duration::from_secs(2)))
///     .service(slow);
/// assert!(matches!(service.oneshot(()).await, Err(DeadlineError::Exceeded(_))));
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer<C = DefaultClock> {
    timeout: Option<Duration>,
    clock: C,
}

impl DeadlineLayer {
    /// Each call gets at most `timeout` (less if the ambient deadline is
    /// earlier).
    #[must_use]
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout: Some(timeout),
            clock: DefaultClock::default(),
        }
    }

    /// Each call gets the ambient deadline, if there is one, and no limit of
    /// its own.
    #[must_use]
    pub fn ambient() -> Self {
        Self {
            timeout: None,
            clock: DefaultClock::default(),
        }
    }
}

impl<C> DeadlineLayer<C> {
    /// Reads time and sleeps on `clock`.
    pub fn clock<C2: Clock>(self, clock: C2) -> DeadlineLayer<C2> {
        DeadlineLayer {
            timeout: self.timeout,
            clock,
        }
    }
}

impl<S, C: Clone> Layer<S> for DeadlineLayer<C> {
    type Service = DeadlineService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineService {
            inner,
            timeout: self.timeout,
            clock: self.clock.clone(),
        }
    }
}

/// The service a [`DeadlineLayer`] makes.
#[derive(Debug, Clone)]
pub struct DeadlineService<S, C = DefaultClock> {
    inner: S,
    timeout: Option<Duration>,
    clock: C,
}

impl<S, C, Req> Service<Req> for DeadlineService<S, C>
where
    S: Service<Req>,
    C: AsyncClock,
{
    type Response = S::Response;
    type Error = DeadlineError<S::Error>;
    type Future = DeadlineFuture<S::Future, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(DeadlineError::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let own = self.timeout.map(|t| Deadline::after(self.clock.now(), t));
        match Deadline::earliest(deadline::current(), own) {
            Some(d) => {
                let call = deadline::scope(d, || self.inner.call(request));
                DeadlineFuture {
                    kind: Kind::Timed {
                        inner: deadline::timeout_at(self.clock.clone(), d, call),
                    },
                }
            }
            None => DeadlineFuture {
                kind: Kind::Unbounded {
                    inner: self.inner.call(request),
                },
            },
        }
    }
}

pin_project! {
    /// The future of a [`DeadlineService`] call.
    #[must_use = "futures do nothing unless polled"]
    pub struct DeadlineFuture<F, C: AsyncClock> {
        #[pin]
        kind: Kind<F, C>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, C: AsyncClock> {
        // Under a deadline.
        Timed { #[pin] inner: Timeout<C, F> },
        // No deadline anywhere: the inner future as it is.
        Unbounded { #[pin] inner: F },
    }
}

impl<F, C: AsyncClock> std::fmt::Debug for DeadlineFuture<F, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Timed { inner } => f.debug_tuple("DeadlineFuture").field(inner).finish(),
            Kind::Unbounded { .. } => f.write_str("DeadlineFuture(no deadline)"),
        }
    }
}

impl<F, C, T, E> Future for DeadlineFuture<F, C>
where
    F: Future<Output = Result<T, E>>,
    C: AsyncClock,
{
    type Output = Result<T, DeadlineError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Timed { inner } => inner.poll(cx).map(|out| match out {
                Ok(Ok(response)) => Ok(response),
                Ok(Err(e)) => Err(DeadlineError::Inner(e)),
                Err(exceeded) => Err(DeadlineError::Exceeded(exceeded)),
            }),
            KindProj::Unbounded { inner } => {
                inner.poll(cx).map(|out| out.map_err(DeadlineError::Inner))
            }
        }
    }
}
