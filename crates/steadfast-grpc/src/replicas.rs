//! [`Replicas`]: the service under a layer with an endpoint set, which
//! sends each attempt to the endpoint its request is marked with; and
//! [`channel_over`], a channel over several replicas in one call.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use pin_project_lite::pin_project;
use steadfast::clock::{Clock, DefaultClock};
use steadfast::endpoint::{EndpointId, Endpoints};
use tower_service::Service;

use crate::Error;
use crate::channel::{ConfigSource, GrpcChannel};
use crate::layer::GrpcLayer;
use crate::throttle::target_key;

/// The services of several endpoints (a tonic `Channel` per replica), each
/// request sent to the one its [`EndpointId`] extension names: what a
/// [`GrpcLayer`] with an [endpoint set](crate::GrpcLayerBuilder::endpoints)
/// goes over, since its gate picks the endpoint and marks the attempt's
/// request with it. Ready at once: each call readies a clone of its
/// endpoint's service (a tonic `Channel` clone is a handle on one
/// connection). A request with no mark, or one naming no endpoint of
/// these, fails with [`ReplicaError::Unrouted`], which the classifier
/// reads as a transport error.
pub struct Replicas<S> {
    routes: Arc<[(EndpointId, S)]>,
}

impl<S> Replicas<S> {
    /// Over `routes`: each endpoint's identity in the layer's set, and its
    /// service.
    pub fn new(routes: impl IntoIterator<Item = (EndpointId, S)>) -> Self {
        Self {
            routes: routes.into_iter().collect(),
        }
    }

    /// How many endpoints it routes to.
    #[must_use]
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether it routes to none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

impl<S> Clone for Replicas<S> {
    fn clone(&self) -> Self {
        Self {
            routes: Arc::clone(&self.routes),
        }
    }
}

impl<S> fmt::Debug for Replicas<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replicas")
            .field("endpoints", &self.routes.len())
            .finish()
    }
}

/// A [`Replicas`] call's error: its replica's own, or [`Unrouted`](ReplicaError::Unrouted).
#[derive(Debug)]
pub enum ReplicaError<E> {
    /// The replica's service failed (a tonic transport error).
    Replica(E),
    /// The request named no endpoint of these (`None`: no mark at all,
    /// a layer without an endpoint set).
    Unrouted(Option<EndpointId>),
}

impl<E: fmt::Display> fmt::Display for ReplicaError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Replica(e) => e.fmt(f),
            Self::Unrouted(Some(id)) => write!(f, "no replica for endpoint {}", id.get()),
            Self::Unrouted(None) => {
                f.write_str("the request names no endpoint (a layer without an endpoint set?)")
            }
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ReplicaError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Replica(e) => Some(e),
            Self::Unrouted(_) => None,
        }
    }
}

impl<S, B> Service<Request<B>> for Replicas<S>
where
    S: Service<Request<B>> + Clone,
{
    type Response = S::Response;
    type Error = ReplicaError<S::Error>;
    type Future = ReplicaFuture<S, Request<B>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let id = request.extensions().get::<EndpointId>().copied();
        let service = id.and_then(|id| {
            self.routes
                .iter()
                .find(|(e, _)| *e == id)
                .map(|(_, s)| s.clone())
        });
        ReplicaFuture {
            state: match service {
                Some(service) => State::Readying {
                    service,
                    request: Some(request),
                },
                None => State::Unrouted { id },
            },
        }
    }
}

pin_project! {
    /// A [`Replicas`] call: its endpoint's service readied, then called.
    #[must_use = "futures do nothing unless polled"]
    pub struct ReplicaFuture<S, R>
    where
        S: Service<R>,
    {
        #[pin]
        state: State<S, R>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, R>
    where
        S: Service<R>,
    {
        Readying { service: S, request: Option<R> },
        Calling { #[pin] future: S::Future },
        Unrouted { id: Option<EndpointId> },
    }
}

impl<S, R> fmt::Debug for ReplicaFuture<S, R>
where
    S: Service<R>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplicaFuture").finish_non_exhaustive()
    }
}

impl<S, R> Future for ReplicaFuture<S, R>
where
    S: Service<R>,
{
    type Output = Result<S::Response, ReplicaError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Readying { service, request } => {
                    if let Err(e) = std::task::ready!(service.poll_ready(cx)) {
                        return Poll::Ready(Err(ReplicaError::Replica(e)));
                    }
                    let Some(request) = request.take() else {
                        unreachable!("a request waits while its service readies");
                    };
                    let future = service.call(request);
                    state.set(State::Calling { future });
                }
                StateProj::Calling { future } => {
                    return future.poll(cx).map_err(ReplicaError::Replica);
                }
                StateProj::Unrouted { id } => return Poll::Ready(Err(ReplicaError::Unrouted(*id))),
            }
        }
    }
}

/// A channel over several replicas of one service, under a service config,
/// in one call: each replica's service (a tonic `Channel` to its address),
/// labelled by its address, in one [`Endpoints`] set; every attempt goes
/// to the replica the set picks (by load, among the healthy ones; a retry
/// or a hedged copy to one the call has not tried), and the replicas that
/// fail are ejected as the config's `loadBalancingConfig` says (gRFC A50's
/// `outlier_detection_experimental`, the same JSON grpc-go and grpcio
/// read; [`ServiceConfig::outlier_detection`](crate::config::ServiceConfig::outlier_detection)):
/// without it, no ejection, as gRPC clients do. `target` names the
/// service, for its throttling bucket and metrics, as in [`channel`](crate::channel).
///
/// ```no_run
/// # use tonic::transport::Channel;
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let addresses = ["http://127.0.0.1:50051", "http://127.0.0.1:50052", "http://127.0.0.1:50053"];
/// let replicas = addresses.map(|a| (a, Channel::from_static(a).connect_lazy()));
/// let channel = steadfast_grpc::channel_over("echo", replicas, r#"{
///   "loadBalancingConfig": [{"outlier_detection_experimental": {
///     "failurePercentageEjection": {"minimumHosts": 3}, "childPolicy": [{"round_robin": {}}]}}]}"#)?;
/// assert_eq!(channel.endpoints().map(|set| set.len()), Some(3));
/// // let mut client = GreeterClient::new(channel); // any generated tonic client
/// # Ok(()) }
/// ```
///
/// # Errors
/// As [`channel`](crate::channel): the config ([`Error::Config`]), a
/// policy ([`Error::Policy`]) or the target ([`Error::Target`]).
pub fn channel_over<S, A>(
    target: &str,
    replicas: impl IntoIterator<Item = (A, S)>,
    config: impl ConfigSource,
) -> Result<GrpcChannel<Replicas<S>>, Error>
where
    A: fmt::Display,
{
    let key = target_key(target).ok_or_else(|| Error::Target(target.to_owned()))?;
    let config = config.into_service_config()?;
    let set = Endpoints::builder()
        .outlier_detection(config.outlier_detection().cloned())
        .build()?;
    let now = DefaultClock::default().now();
    let replicas = Replicas::new(
        replicas
            .into_iter()
            .map(|(address, service)| (set.insert(address.to_string(), now), service)),
    );
    let layer = GrpcLayer::builder(config, &key).endpoints(set).build()?;
    Ok(layer.channel(replicas))
}
