//! [`ConcurrencyLimitLayer`]: a shared concurrency limit in front of a
//! service, refusing at once or holding callers back in `poll_ready`.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use pin_project_lite::pin_project;
use steadfast::Classify;
use steadfast::call::LimitRefused;
use steadfast::call::Refused;
use steadfast::classify::{AnyError, ClassifyFn};
use steadfast::clock::{AsyncClock, DefaultClock, SystemClock};
use steadfast::limit::{Acquire, ConcurrencyLimit};
use steadfast::policy::Limits;
use steadfast::policy::gate::{Admission, Ticket};
use tower_layer::Layer;
use tower_service::Service;

/// Puts a shared [`ConcurrencyLimit`] in front of a service: each call holds
/// one of its slots from the call until its future completes or is dropped.
///
/// Unlike `tower::limit::ConcurrencyLimit`, whose semaphore is made per
/// layer and so multiplied by every service clone the stack builds (one per
/// connection under axum or hyper), the limit here is the value you pass:
/// every clone of the layer and of its services shares it, and so can
/// several services on purpose (a pool per dependency). An adaptive limit
/// learns from each call's latency and from its outcome, as the classifier
/// judges it ([`Signal::of`](steadfast::limit::Signal::of)).
///
/// Two ways to meet a full limit:
/// - **refuse** ([`new`](Self::new)): `poll_ready` passes the inner
///   service's readiness through and `call` answers
///   [`LimitError::Refused`] at once, without calling the service;
/// - **wait** ([`waiting`](Self::waiting)): `poll_ready` reports
///   backpressure (`Pending`) while every slot is taken, waiting in the
///   limit's [queue](steadfast::limit::ConcurrencyLimitBuilder::queue) for
///   at most its `max_wait`; a limit without a queue, a full queue or a
///   wait that runs out makes `poll_ready` answer the refusal instead. The
///   slot is taken before the inner service is readied, and the call that
///   follows uses it.
///
/// ```
/// use std::time::Duration;
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_tower::{ConcurrencyLimitLayer, LimitError};
/// use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = ConcurrencyLimit::fixed(1).name("inventory").build()?;
/// let slow = service_fn(|n: u32| async move {
///     tokio::time::sleep(Duration::from_millis(20)).await;
///     Ok::<_, std::io::Error>(n)
/// });
/// let mut a = ServiceBuilder::new().layer(ConcurrencyLimitLayer::new(pool.clone())).service(slow);
/// let mut b = a.clone(); // a clone shares the limit
/// let first = a.ready().await?.call(1); // holds the only slot
/// let refused = b.ready().await?.call(2).await.unwrap_err();
/// assert!(matches!(refused, LimitError::Refused(r) if r.by == "inventory" && r.in_flight == 1));
/// assert_eq!(first.await?, 1);
/// assert_eq!(pool.in_flight(), 0);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ConcurrencyLimitLayer<K = AnyError, C = DefaultClock> {
    limit: ConcurrencyLimit,
    /// The gate over the limit alone: what `poll_ready` and `call` ask.
    gate: Limits,
    classify: K,
    clock: C,
    wait: bool,
}

impl<K: fmt::Debug, C> fmt::Debug for ConcurrencyLimitLayer<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimitLayer")
            .field("limit", &self.limit)
            .field("classify", &self.classify)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl ConcurrencyLimitLayer {
    /// Applies `limit`, refusing at once when it is full; every `Ok` is a
    /// success (a latency sample) and every `Err` says nothing of the
    /// dependency's capacity.
    pub fn new(limit: ConcurrencyLimit) -> Self {
        Self {
            gate: Limits::default().with_concurrency_limit(limit.clone()),
            limit,
            classify: AnyError,
            clock: DefaultClock::default(),
            wait: false,
        }
    }

    /// Applies `limit`, holding callers back in `poll_ready` while it is
    /// full (in its queue, for at most its `max_wait`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::limit::{ConcurrencyLimit, Signal};
    /// use steadfast_tower::ConcurrencyLimitLayer;
    /// use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limit = ConcurrencyLimit::fixed(1).queue(16, Duration::from_secs(5)).build()?;
    /// let held = limit.try_acquire()?; // someone holds the only slot
    /// let mut svc = ServiceBuilder::new()
    ///     .layer(ConcurrencyLimitLayer::waiting(limit.clone()))
    ///     .service(service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n) }));
    /// let mut ready = tokio_test::task::spawn(svc.ready());
    /// assert!(ready.poll().is_pending()); // backpressure, not an error
    /// held.finish(Signal::Success);
    /// assert!(ready.is_woken());
    /// let svc = match ready.poll() { std::task::Poll::Ready(Ok(s)) => s, _ => unreachable!() };
    /// assert_eq!(svc.call(7).await?, 7);
    /// # Ok(()) }
    /// ```
    pub fn waiting(limit: ConcurrencyLimit) -> Self {
        Self {
            wait: true,
            ..Self::new(limit)
        }
    }
}

impl<K, C> ConcurrencyLimitLayer<K, C> {
    /// Judges each outcome with `f` (a drop signal for an adaptive limit
    /// comes from [`Classify::overloaded`], which a closure classifier does
    /// not have: use [`with_classifier`](Self::with_classifier) for that).
    pub fn classify<F>(self, f: F) -> ConcurrencyLimitLayer<ClassifyFn<F>, C> {
        self.with_classifier(ClassifyFn::new(f))
    }

    /// Uses any [`Classify`] implementation.
    pub fn with_classifier<K2>(self, classify: K2) -> ConcurrencyLimitLayer<K2, C> {
        ConcurrencyLimitLayer {
            limit: self.limit,
            gate: self.gate,
            classify,
            clock: self.clock,
            wait: self.wait,
        }
    }

    /// Bounds the wait for a slot on `clock` (tokio's by default).
    pub fn clock<C2: AsyncClock>(self, clock: C2) -> ConcurrencyLimitLayer<K, C2> {
        ConcurrencyLimitLayer {
            limit: self.limit,
            gate: self.gate,
            classify: self.classify,
            clock,
            wait: self.wait,
        }
    }

    /// The shared limit.
    pub fn limit(&self) -> &ConcurrencyLimit {
        &self.limit
    }
}

impl<S, K: Clone, C: AsyncClock> Layer<S> for ConcurrencyLimitLayer<K, C> {
    type Service = ConcurrencyLimitService<S, K, C>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimitService {
            inner,
            layer: self.clone(),
            ticket: Ticket::FREE,
            waiting: None,
        }
    }
}

/// The service a [`ConcurrencyLimitLayer`] makes. A clone shares the limit
/// and holds no slot of its own until it is readied.
pub struct ConcurrencyLimitService<S, K = AnyError, C = DefaultClock>
where
    C: AsyncClock,
{
    inner: S,
    layer: ConcurrencyLimitLayer<K, C>,
    /// The slot `poll_ready` took (the waiting mode) for the next call.
    ticket: Ticket,
    /// The wait for a slot in the limit's queue, with its bound.
    waiting: Option<Waiting<C>>,
}

struct Waiting<C: AsyncClock> {
    acquire: Acquire,
    since: Instant,
    timer: Pin<Box<C::Sleep>>,
}

impl<S: Clone, K: Clone, C: AsyncClock> Clone for ConcurrencyLimitService<S, K, C> {
    /// A clone with the same inner service and limit, and no slot.
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
            ticket: Ticket::FREE,
            waiting: None,
        }
    }
}

impl<S: fmt::Debug, K: fmt::Debug, C: AsyncClock> fmt::Debug for ConcurrencyLimitService<S, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimitService")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .field("has_slot", &self.ticket.holds_slot())
            .field("waiting", &self.waiting.is_some())
            .finish()
    }
}

impl<S, K, C> ConcurrencyLimitService<S, K, C>
where
    C: AsyncClock,
{
    /// The waiting mode's part of `poll_ready`: a slot, or backpressure
    /// while the queue holds the caller, or the refusal.
    fn poll_slot(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), LimitRefused>> {
        if self.ticket.holds_slot() {
            return Poll::Ready(Ok(()));
        }
        let clock = &self.layer.clock;
        let waiting = match &mut self.waiting {
            Some(waiting) => waiting,
            // The gate: a slot now, a place in the queue, or the refusal
            // (counted once).
            None => match self.layer.gate.admit(None, &[], clock) {
                Admission::Admitted(ticket) => {
                    self.ticket = ticket;
                    return Poll::Ready(Ok(()));
                }
                Admission::Queue(queue) if clock.can_sleep() => self.waiting.insert(Waiting {
                    since: clock.now(),
                    timer: Box::pin(clock.sleep(queue.bound())),
                    acquire: queue.enter(),
                }),
                // Nowhere to wait here: refused now.
                Admission::Queue(queue) => return Poll::Ready(Err(queue.give_up())),
                Admission::Refused(Refused::Limit(refused)) => return Poll::Ready(Err(refused)),
                Admission::Refused(_) | Admission::Turn(_) => {
                    unreachable!("the layer's gate holds a concurrency limit alone")
                }
            },
        };
        let got = match Pin::new(&mut waiting.acquire).poll(cx) {
            Poll::Ready(got) => got,
            Poll::Pending => {
                if waiting.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let waited = self
                    .layer
                    .clock
                    .now()
                    .saturating_duration_since(waiting.since);
                match self.waiting.take() {
                    Some(waiting) => waiting.acquire.give_up(waited),
                    None => unreachable!("matched above"),
                }
            }
        };
        self.waiting = None;
        Poll::Ready(got.map(|permit| self.ticket = Ticket::from(permit)))
    }
}

impl<S, K, C, Req> Service<Req> for ConcurrencyLimitService<S, K, C>
where
    S: Service<Req>,
    K: Classify<S::Response, S::Error> + Clone,
    C: AsyncClock,
{
    type Response = S::Response;
    type Error = LimitError<S::Error>;
    type Future = LimitFuture<S::Future, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.layer.wait {
            std::task::ready!(self.poll_slot(cx)).map_err(LimitError::Refused)?;
        }
        self.inner.poll_ready(cx).map_err(LimitError::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let ticket = if self.ticket.holds_slot() {
            std::mem::take(&mut self.ticket)
        } else {
            match self.layer.gate.admit_now(&[], &self.layer.clock) {
                Ok(ticket) => ticket,
                Err(refused) => {
                    return LimitFuture {
                        state: State::Refused {
                            refused: Some(refused),
                        },
                    };
                }
            }
        };
        LimitFuture {
            state: State::Called {
                future: self.inner.call(request),
                ticket,
                classify: self.layer.classify.clone(),
            },
        }
    }
}

pin_project! {
    /// The future of a [`ConcurrencyLimitService`] call: holds the call's
    /// slot until it completes (or is dropped).
    #[must_use = "futures do nothing unless polled"]
    pub struct LimitFuture<F, K> {
        #[pin]
        state: State<F, K>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, K> {
        Called {
            #[pin]
            future: F,
            ticket: Ticket,
            classify: K,
        },
        Refused { refused: Option<Refused> },
    }
}

impl<F, K> fmt::Debug for LimitFuture<F, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.state {
            State::Called { .. } => "LimitFuture(called)",
            State::Refused { .. } => "LimitFuture(refused)",
        })
    }
}

impl<F, K, T, E> Future for LimitFuture<F, K>
where
    F: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
{
    type Output = Result<T, LimitError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called {
                future,
                ticket,
                classify,
            } => {
                let out = std::task::ready!(future.poll(cx));
                if ticket.holds_slot() {
                    let verdict = classify.classify(&out);
                    // The layer's gate holds no endpoint set: the clock,
                    // which only a pick reads, is never read.
                    std::mem::take(ticket).finish(&*classify, verdict, &out, &SystemClock);
                }
                Poll::Ready(out.map_err(LimitError::Inner))
            }
            StateProj::Refused { refused } => match refused.take() {
                Some(Refused::Limit(refused)) => Poll::Ready(Err(LimitError::Refused(refused))),
                Some(_) => unreachable!("the layer's gate holds a concurrency limit alone"),
                None => panic!("LimitFuture polled after it completed"),
            },
        }
    }
}

/// The error of a call through a [`ConcurrencyLimitLayer`].
///
/// ```
/// use std::time::Duration;
/// use steadfast::call::LimitRefused;
/// use steadfast_tower::LimitError;
/// let err = LimitError::<std::io::Error>::Refused(LimitRefused {
///     by: "search", in_flight: 32, limit: 32, waited: Duration::ZERO,
/// });
/// assert_eq!(err.to_string(), "call not sent: concurrency limit search full: 32 in flight, limit 32");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitError<E> {
    /// The limit had no slot; the service was not called.
    Refused(LimitRefused),
    /// The service failed.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for LimitError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused(refused) => write!(f, "call not sent: {refused}"),
            Self::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: Error + 'static> Error for LimitError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Refused(refused) => Some(refused),
            Self::Inner(e) => Some(e),
        }
    }
}
