//! [`RateLimitLayer`]: a shared rate limit in front of a service, refusing
//! at once or holding callers back in `poll_ready` until their turn.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::rate::{RateLimit, RateRefused, Reservation};
use tower_layer::Layer;
use tower_service::Service;

/// Puts a shared [`RateLimit`] in front of a service: each call is admitted
/// by it before the service sees it.
///
/// tower's own `RateLimit` counts in fixed windows and keeps its count in
/// the service, which is not `Clone`: a stack built once per connection
/// (axum, hyper) gets one count per connection, so a configured 5 calls a
/// second lets through 5 per connection. Here the limit is the value you
/// pass: every clone of the layer and of its services, on every
/// connection, draws from the same quotas.
///
/// Two ways to meet a limit with no room now:
/// - **refuse** ([`new`](Self::new)): `call` answers
///   [`RateLimitError::Refused`] at once, with the time until the call
///   would be admitted, without calling the service;
/// - **wait** ([`waiting`](Self::waiting)): `poll_ready` books the call's
///   turn and reports backpressure (`Pending`) until it comes, for at most
///   `max_wait` and never past the ambient deadline
///   ([`steadfast::deadline::current`]); a turn that would come later makes
///   `poll_ready` answer the refusal at once. A service readied and then
///   dropped without a call gives its turn back.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::{Clock, SystemClock};
/// use steadfast::rate::{Quota, RateLimit};
/// use steadfast_tower::{RateLimitError, RateLimitLayer};
/// use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let quota = RateLimit::builder().name("maps api").quota(Quota::per_minute(1)?).build()?;
/// let svc = service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n) });
/// let mut a = ServiceBuilder::new().layer(RateLimitLayer::new(quota)).service(svc);
/// let mut b = a.clone(); // a clone (another connection's) shares the quota
/// assert_eq!(a.ready().await?.call(1).await?, 1);
/// let refused = b.ready().await?.call(2).await.unwrap_err();
/// assert!(matches!(refused, RateLimitError::Refused(r) if r.by == "maps api"
///     && r.retry_after.is_some_and(|d| d <= Duration::from_secs(60) + SystemClock.tick_lag())));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimitLayer<C = DefaultClock> {
    limit: RateLimit,
    max_wait: Option<Duration>,
    clock: C,
}

impl<C> fmt::Debug for RateLimitLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limit", &self.limit)
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl RateLimitLayer {
    /// Applies `limit`, refusing a call it has no room for at once.
    pub fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            max_wait: None,
            clock: DefaultClock::default(),
        }
    }

    /// Applies `limit`, holding callers back in `poll_ready` until their
    /// turn, for at most `max_wait` (and never past the ambient deadline).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::TokioClock;
    /// use steadfast::rate::{Quota, RateLimit};
    /// use steadfast_tower::RateLimitLayer;
    /// use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let quota = Quota::per_second(10)?.with_burst(1)?;
    /// let limit = RateLimit::builder().quota(quota).build_with_clock(TokioClock)?;
    /// let mut svc = ServiceBuilder::new()
    ///     .layer(RateLimitLayer::waiting(limit, Duration::from_secs(1)))
    ///     .service(service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n) }));
    /// let start = tokio::time::Instant::now();
    /// for n in 0..3 {
    ///     assert_eq!(svc.ready().await?.call(n).await?, n);
    /// }
    /// assert_eq!(start.elapsed(), Duration::from_millis(200)); // one each 100 ms
    /// # Ok(()) }
    /// ```
    pub fn waiting(limit: RateLimit, max_wait: Duration) -> Self {
        Self {
            limit,
            max_wait: Some(max_wait),
            clock: DefaultClock::default(),
        }
    }
}

impl<C> RateLimitLayer<C> {
    /// Waits on `clock` (the limit keeps reading its own).
    pub fn clock<C2: AsyncClock>(self, clock: C2) -> RateLimitLayer<C2> {
        RateLimitLayer {
            limit: self.limit,
            max_wait: self.max_wait,
            clock,
        }
    }
}

impl<S, C: AsyncClock> Layer<S> for RateLimitLayer<C> {
    type Service = RateLimitService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            limit: self.limit.clone(),
            max_wait: self.max_wait,
            clock: self.clock.clone(),
            turn: None,
        }
    }
}

/// A turn booked in `poll_ready` and the wait until it comes.
struct Turn<Sl> {
    reservation: Reservation,
    sleep: Option<Pin<Box<Sl>>>,
}

/// The service [`RateLimitLayer`] makes.
pub struct RateLimitService<S, C = DefaultClock>
where
    C: AsyncClock,
{
    inner: S,
    limit: RateLimit,
    max_wait: Option<Duration>,
    clock: C,
    turn: Option<Turn<C::Sleep>>,
}

impl<S: Clone, C: AsyncClock> Clone for RateLimitService<S, C> {
    /// A clone shares the limit; a turn booked by this one stays with it.
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            limit: self.limit.clone(),
            max_wait: self.max_wait,
            clock: self.clock.clone(),
            turn: None,
        }
    }
}

impl<S, C: AsyncClock> fmt::Debug for RateLimitService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("limit", &self.limit)
            .field("max_wait", &self.max_wait)
            .field("turn", &self.turn.as_ref().map(|t| t.reservation.wait()))
            .finish_non_exhaustive()
    }
}

/// Why a rate-limited call failed: the limit refused it, or the service did.
#[derive(Debug)]
pub enum RateLimitError<E> {
    /// The limit had no room for the call (it was not sent).
    Refused(RateRefused),
    /// The inner service's own error.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for RateLimitError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused(r) => fmt::Display::fmt(r, f),
            Self::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: Error + 'static> Error for RateLimitError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Refused(r) => Some(r),
            Self::Inner(e) => Some(e),
        }
    }
}

impl<S, C, Req> Service<Req> for RateLimitService<S, C>
where
    S: Service<Req>,
    C: AsyncClock,
{
    type Response = S::Response;
    type Error = RateLimitError<S::Error>;
    type Future = RateLimitFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let Some(max_wait) = self.max_wait {
            if self.turn.is_none() {
                let now = self.clock.now();
                let bound = steadfast::deadline::current()
                    .map_or(max_wait, |d| max_wait.min(d.remaining(now)));
                let bound = if self.clock.can_sleep() {
                    bound
                } else {
                    Duration::ZERO
                };
                let reservation = self
                    .limit
                    .reserve(1, bound)
                    .map_err(RateLimitError::Refused)?;
                let wait = reservation.wait();
                self.turn = Some(Turn {
                    reservation,
                    sleep: (!wait.is_zero()).then(|| Box::pin(self.clock.sleep(wait))),
                });
            }
            if let Some(Turn {
                sleep: sleep @ Some(_),
                ..
            }) = &mut self.turn
            {
                if let Some(s) = sleep.as_mut() {
                    std::task::ready!(s.as_mut().poll(cx));
                }
                *sleep = None;
            }
        }
        self.inner.poll_ready(cx).map_err(RateLimitError::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        match self.turn.take() {
            Some(turn) => turn.reservation.admit(),
            // Refusing, or called without `poll_ready` having booked a turn
            // (a breach of the contract): admitted only if there is room now.
            None => {
                if let Err(refused) = self.limit.check() {
                    return RateLimitFuture::refused(refused);
                }
            }
        }
        RateLimitFuture::called(self.inner.call(request))
    }
}

pin_project! {
    /// The future of a [`RateLimitService`] call: the refusal, or the inner
    /// service's future.
    #[must_use = "futures do nothing unless polled"]
    pub struct RateLimitFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Refused { refused: Option<RateRefused> },
        Called { #[pin] future: F },
    }
}

impl<F> RateLimitFuture<F> {
    fn refused(refused: RateRefused) -> Self {
        Self {
            state: State::Refused {
                refused: Some(refused),
            },
        }
    }

    fn called(future: F) -> Self {
        Self {
            state: State::Called { future },
        }
    }
}

impl<F> fmt::Debug for RateLimitFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.state {
            State::Refused { .. } => "RateLimitFuture(refused)",
            State::Called { .. } => "RateLimitFuture(called)",
        })
    }
}

impl<F, T, E> Future for RateLimitFuture<F>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, RateLimitError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Refused { refused } => match refused.take() {
                Some(r) => Poll::Ready(Err(RateLimitError::Refused(r))),
                None => panic!("a refused call's future was polled after it completed"),
            },
            StateProj::Called { future } => future.poll(cx).map_err(RateLimitError::Inner),
        }
    }
}
