//! [`Balance`]: one service over a set of endpoint services (the replicas
//! of one dependency), picking each call's endpoint from a shared
//! [`Endpoints`] set: the power of two choices by peak-EWMA load, around
//! the endpoints outlier detection ejected, never to one that is not
//! ready. Endpoints come and go through tower's [`Discover`].

mod error;
mod future;

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use steadfast::Classify;
use steadfast::backoff::{ConnectionBackoff, GrpcConnectionBackoff, Rng};
use steadfast::classify::AnyError;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::endpoint::{EndpointId, Endpoints};
use tower::discover::{Change, Discover};
use tower_service::Service;

pub use error::BalanceError;
pub use future::BalanceFuture;

/// One endpoint: its key and service, whether its service said it is
/// ready (and has not been called since), and, while its readiness fails,
/// its connection backoff and when to ask again.
struct Endpoint<K, S> {
    key: K,
    id: EndpointId,
    service: S,
    ready: bool,
    down: Option<(ConnectionBackoff, Instant)>,
}

/// A service that spreads calls over the endpoints its [`Discover`] gives
/// (a static list, a channel, DNS), each picked by the shared
/// [`Endpoints`] set it was given.
///
/// - **Readiness**: `poll_ready` asks every endpoint that is not ready;
///   the set picks only among those that are, and a call uses up the
///   readiness of the endpoint it goes to. An endpoint whose `poll_ready`
///   fails is kept (never dropped for an error: tower's balancer evicts
///   it), marked not ready and asked again after the gRPC connection
///   backoff (1 s, then × 1.6 ± 20 %, at most 120 s), reset once it is
///   ready. `poll_ready` is ready while any endpoint is, pending (woken by
///   an endpoint, the discovery or the end of a backoff) while none is.
/// - **Discovery**: an inserted endpoint joins the set (a key inserted
///   again replaces its service); a removed one leaves it, receives
///   nothing new, and the calls in flight on it finish. Calls on the
///   others are never disturbed.
/// - **Outcomes**: each response future finishes its pick with what the
///   classifier says of the outcome ([`Classify::answer`] for outlier
///   detection, a [`Verdict::RetryAfter`](steadfast::Verdict::RetryAfter)'s
///   wait, the server's hint, as a load penalty): the same classifier a
///   retry layer takes. [`AnyError`] by default (an error is a server
///   error). An error names the endpoint ([`BalanceError::Service`]).
///
/// One `Balance` per set: the set's readiness flags are this service's.
///
/// ```
/// use std::convert::Infallible;
/// use steadfast::endpoint::Endpoints;
/// use steadfast_tower::balance::Balance;
/// use tower::discover::ServiceList;
/// use tower::{Service, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let replicas = (0..3).map(|i| {
///     tower::service_fn(move |x: u32| async move { Ok::<_, Infallible>(x + i) })
/// });
/// let set = Endpoints::builder().build()?;
/// let mut balance = Balance::new(ServiceList::new(replicas), set.clone());
/// let answer = balance.ready().await?.call(10).await?;
/// assert!((10..13).contains(&answer));
/// assert_eq!(set.len(), 3);
/// # Ok(())
/// # }
/// ```
pub struct Balance<D, K = AnyError, C = DefaultClock>
where
    D: Discover,
    C: AsyncClock,
{
    discover: D,
    discovered_all: bool,
    set: Endpoints,
    classify: K,
    clock: C,
    endpoints: Vec<Endpoint<D::Key, D::Service>>,
    backoff: GrpcConnectionBackoff,
    rng: Rng,
    wake: Option<Pin<Box<C::Sleep>>>,
}

impl<D: Discover> Balance<D> {
    /// Calls spread over `discover`'s endpoints, picked by `set`, on the
    /// default clock, classified by [`AnyError`].
    pub fn new(discover: D, set: Endpoints) -> Self {
        Self::with_clock(discover, set, DefaultClock::default())
    }
}

impl<D: Discover, C: AsyncClock> Balance<D, AnyError, C> {
    /// [`new`](Balance::new) on `clock` (round trips, backoffs).
    pub fn with_clock(discover: D, set: Endpoints, clock: C) -> Self {
        Self {
            discover,
            discovered_all: false,
            set,
            classify: AnyError,
            clock,
            endpoints: Vec::new(),
            backoff: GrpcConnectionBackoff::default(),
            rng: Rng::from_entropy(),
            wake: None,
        }
    }
}

impl<D: Discover, K, C: AsyncClock> Balance<D, K, C> {
    /// Judges outcomes with `classify`: its [`answer`](Classify::answer)
    /// for outlier detection, its [`Verdict::RetryAfter`](steadfast::Verdict::RetryAfter)
    /// as the server's hint (the protocol's classifier: steadfast-http's,
    /// steadfast-grpc's).
    pub fn classify<K2>(self, classify: K2) -> Balance<D, K2, C> {
        Balance {
            discover: self.discover,
            discovered_all: self.discovered_all,
            set: self.set,
            classify,
            clock: self.clock,
            endpoints: self.endpoints,
            backoff: self.backoff,
            rng: self.rng,
            wake: self.wake,
        }
    }

    /// The backoff between asks of an endpoint whose readiness fails
    /// (default: the gRPC connection backoff's published values).
    #[must_use]
    pub fn connection_backoff(mut self, backoff: GrpcConnectionBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The set it picks from.
    pub fn endpoints(&self) -> &Endpoints {
        &self.set
    }
}

impl<D, K, C> Balance<D, K, C>
where
    D: Discover + Unpin,
    D::Key: fmt::Display + Eq,
    D::Error: Into<tower::BoxError>,
    C: AsyncClock,
{
    /// Takes in every change the discovery has ready.
    fn discover(&mut self, cx: &mut Context<'_>) -> Result<(), BalanceError> {
        while !self.discovered_all {
            let change = match Pin::new(&mut self.discover).poll_discover(cx) {
                Poll::Pending => return Ok(()),
                Poll::Ready(None) => {
                    self.discovered_all = true;
                    return Ok(());
                }
                Poll::Ready(Some(Err(e))) => return Err(BalanceError::Discover(e.into())),
                Poll::Ready(Some(Ok(change))) => change,
            };
            match change {
                Change::Insert(key, service) => {
                    self.remove(&key);
                    let id = self.set.insert(key.to_string(), self.clock.now());
                    // Ready once its own poll_ready says so.
                    self.set.set_ready(id, false);
                    self.endpoints.push(Endpoint {
                        key,
                        id,
                        service,
                        ready: false,
                        down: None,
                    });
                }
                Change::Remove(key) => self.remove(&key),
            }
        }
        Ok(())
    }

    fn remove(&mut self, key: &D::Key) {
        if let Some(i) = self.endpoints.iter().position(|e| e.key == *key) {
            let gone = self.endpoints.swap_remove(i);
            self.set.remove(gone.id);
        }
    }
}

impl<D, K, C, Req> Service<Req> for Balance<D, K, C>
where
    D: Discover + Unpin,
    D::Key: fmt::Display + Eq,
    D::Error: Into<tower::BoxError>,
    D::Service: Service<Req>,
    <D::Service as Service<Req>>::Error: Into<tower::BoxError>,
    K: Classify<<D::Service as Service<Req>>::Response, <D::Service as Service<Req>>::Error>
        + Clone,
    C: AsyncClock,
{
    type Response = <D::Service as Service<Req>>::Response;
    type Error = BalanceError;
    type Future = BalanceFuture<<D::Service as Service<Req>>::Future, K, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BalanceError>> {
        self.discover(cx)?;
        let now = self.clock.now();
        let mut next_ask: Option<Instant> = None;
        for e in &mut self.endpoints {
            if e.ready {
                continue;
            }
            if let Some((_, at)) = &e.down
                && now < *at
            {
                next_ask = Some(next_ask.map_or(*at, |n| n.min(*at)));
                continue;
            }
            match e.service.poll_ready(cx) {
                Poll::Ready(Ok(())) => {
                    e.ready = true;
                    e.down = None;
                    self.set.set_ready(e.id, true);
                }
                Poll::Ready(Err(error)) => {
                    let error: tower::BoxError = error.into();
                    let (mut conn, _) = e
                        .down
                        .take()
                        .unwrap_or_else(|| (self.backoff.connection(self.rng.fork()), now));
                    let at = conn.next_attempt(now).retry_at;
                    tracing::warn!(
                        target: "steadfast::balance",
                        endpoint = %e.key,
                        %error,
                        retry_in_ms = at.saturating_duration_since(now).as_millis() as u64,
                        "endpoint not ready: kept, asked again after its backoff"
                    );
                    e.down = Some((conn, at));
                    next_ask = Some(next_ask.map_or(at, |n| n.min(at)));
                    self.set.set_ready(e.id, false);
                }
                Poll::Pending => self.set.set_ready(e.id, false),
            }
        }
        if self.endpoints.iter().any(|e| e.ready) {
            self.wake = None;
            return Poll::Ready(Ok(()));
        }
        // None ready: woken by an endpoint, the discovery, or the end of
        // the soonest backoff.
        if let Some(at) = next_ask {
            let mut sleep = Box::pin(self.clock.sleep(at.saturating_duration_since(now)));
            if sleep.as_mut().poll(cx).is_ready() {
                cx.waker().wake_by_ref();
            } else {
                self.wake = Some(sleep);
            }
        }
        Poll::Pending
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let now = self.clock.now();
        let Some(picked) = self.set.pick(now) else {
            return BalanceFuture::failed(BalanceError::NoEndpoint);
        };
        let Some(e) = self
            .endpoints
            .iter_mut()
            .find(|e| e.id == picked.id() && e.ready)
        else {
            // Not one this service readied: a contract broken by the caller
            // (no poll_ready first), or a set shared with another service.
            return BalanceFuture::failed(BalanceError::NoEndpoint);
        };
        e.ready = false;
        self.set.set_ready(e.id, false);
        let response = e.service.call(request);
        BalanceFuture::new(response, picked, self.classify.clone(), self.clock.clone())
    }
}

impl<D, K, C> fmt::Debug for Balance<D, K, C>
where
    D: Discover,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Balance")
            .field("endpoints", &self.endpoints.len())
            .field("ready", &self.endpoints.iter().filter(|e| e.ready).count())
            .field("set", &self.set)
            .finish_non_exhaustive()
    }
}
