//! [`ChaosLayer`]: faults injected on purpose in front of a service, for
//! tests: the core's [`Chaos`] driven per request.

use std::fmt;
use std::task::{Context, Poll};

use steadfast::chaos::{Chaos, ChaosFuture};
use steadfast::clock::{AsyncClock, DefaultClock};
use tower_layer::Layer;
use tower_service::Service;

/// Injects a [`Chaos`]'s faults into the requests of the service it wraps:
/// a latency (slept on the layer's clock before the request goes in), an
/// error or a substituted response (instead of calling the service at
/// all). The chaos decides; this layer only runs it
/// ([`Chaos::inject`]), so it is off unless the chaos is switched on,
/// and switched off it costs one atomic load per request.
///
/// Put it under a retry layer to see the retries go through the faults:
///
/// ```
/// use std::time::Duration;
/// use steadfast::chaos::Chaos;
/// use steadfast::clock::VirtualClock;
/// use steadfast::{Backoff, RetryPolicy};
/// use steadfast_tower::chaos::ChaosLayer;
/// use steadfast_tower::RetryLayer;
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let clock = VirtualClock::new();
/// let chaos = Chaos::builder()
///     .enabled(true)
///     .seed(4)
///     .error(0.5, || std::io::Error::other("injected"))
///     .build()?;
/// let policy = RetryPolicy::builder()
///     .backoff(Backoff::constant(Duration::from_millis(10)).build()?)
///     .max_attempts(20)
///     .build()?;
/// let service = ServiceBuilder::new()
///     .layer(RetryLayer::new(policy).clock(clock.clone()))
///     .layer(ChaosLayer::new(chaos.clone()).clock(clock))
///     .service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n * 2) });
/// assert_eq!(service.oneshot(21).await?, 42);
/// assert!(chaos.stats().drawn >= 1);
/// # Ok(())
/// # }
/// ```
pub struct ChaosLayer<T, E, C = DefaultClock> {
    chaos: Chaos<T, E>,
    clock: C,
}

impl<T, E, C: Clone> Clone for ChaosLayer<T, E, C> {
    fn clone(&self) -> Self {
        Self {
            chaos: self.chaos.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl<T, E, C> fmt::Debug for ChaosLayer<T, E, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosLayer")
            .field("chaos", &self.chaos)
            .finish_non_exhaustive()
    }
}

impl<T, E> ChaosLayer<T, E> {
    /// A layer injecting `chaos`'s faults, its latencies slept on the
    /// [`DefaultClock`].
    #[must_use]
    pub fn new(chaos: Chaos<T, E>) -> Self {
        Self {
            chaos,
            clock: DefaultClock::default(),
        }
    }
}

impl<T, E, C> ChaosLayer<T, E, C> {
    /// Sleeps the latencies on `clock` (a `VirtualClock` in tests).
    #[must_use]
    pub fn clock<C2: AsyncClock>(self, clock: C2) -> ChaosLayer<T, E, C2> {
        ChaosLayer {
            chaos: self.chaos,
            clock,
        }
    }

    /// The chaos it injects.
    #[must_use]
    pub fn chaos(&self) -> &Chaos<T, E> {
        &self.chaos
    }
}

impl<S, T, E, C: Clone> Layer<S> for ChaosLayer<T, E, C> {
    type Service = ChaosService<S, T, E, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ChaosService {
            inner,
            chaos: self.chaos.clone(),
            clock: self.clock.clone(),
        }
    }
}

/// A service under a [`ChaosLayer`].
pub struct ChaosService<S, T, E, C = DefaultClock> {
    inner: S,
    chaos: Chaos<T, E>,
    clock: C,
}

impl<S: Clone, T, E, C: Clone> Clone for ChaosService<S, T, E, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            chaos: self.chaos.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl<S: fmt::Debug, T, E, C> fmt::Debug for ChaosService<S, T, E, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosService")
            .field("inner", &self.inner)
            .field("chaos", &self.chaos)
            .finish_non_exhaustive()
    }
}

impl<S, R, C> Service<R> for ChaosService<S, S::Response, S::Error, C>
where
    S: Service<R>,
    C: AsyncClock,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ChaosFuture<S::Future, C::Sleep, S::Response, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, request: R) -> Self::Future {
        let inner = &mut self.inner;
        self.chaos.inject(&self.clock, || inner.call(request))
    }
}
