//! [`channel`]: a tonic channel under a service config, in one call.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::limit::ConcurrencyLimit;
use steadfast_tower::replay::ReplayBody;
use tonic::body::Body;
use tower_layer::Layer;
use tower_service::Service;

use crate::config::{ServiceConfig, ServiceConfigError};
use crate::layer::{BoxError, GrpcFuture, GrpcLayer, GrpcService};
use crate::throttle::target_key;
use crate::{Error, FallbackBody, StatusResponse};

/// A service config in any of the forms [`channel`] takes: JSON text
/// (`&str`, `String`), JSON bytes (`&[u8]`, `Vec<u8>`), a
/// [`serde_json::Value`], or a [`ServiceConfig`] already read.
pub trait ConfigSource {
    /// The config, read and validated.
    ///
    /// # Errors
    /// A [`ServiceConfigError`] naming the first invalid field, or saying
    /// the text is not JSON.
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError>;
}

impl ConfigSource for &str {
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError> {
        ServiceConfig::from_json(self)
    }
}

impl ConfigSource for String {
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError> {
        ServiceConfig::from_json(&self)
    }
}

impl ConfigSource for &String {
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError> {
        ServiceConfig::from_json(self)
    }
}

impl ConfigSource for &[u8] {
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError> {
        ServiceConfig::from_slice(self)
    }
}

impl ConfigSource for Vec<u8> {
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError> {
        ServiceConfig::from_slice(&self)
    }
}

impl ConfigSource for serde_json::Value {
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError> {
        ServiceConfig::from_value(&self)
    }
}

impl ConfigSource for &serde_json::Value {
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError> {
        ServiceConfig::from_value(self)
    }
}

impl ConfigSource for ServiceConfig {
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError> {
        Ok(self)
    }
}

impl ConfigSource for &ServiceConfig {
    fn into_service_config(self) -> Result<ServiceConfig, ServiceConfigError> {
        Ok(self.clone())
    }
}

/// A tonic channel (or any service a generated tonic client takes) under
/// a gRPC service config, ready for a generated client: everything
/// [`GrpcLayer`] does, with tonic's own body types on both sides.
///
/// `target` is the server the channel connects to, as it was given to
/// tonic (`http://127.0.0.1:50051`) or as grpc-go writes it
/// (`127.0.0.1:50051`, `dns:///127.0.0.1:50051`): every channel to one
/// server shares one A6 throttling bucket, and the forms of one address
/// are one server ([`target_key`]). A tonic `Channel` does not expose the
/// URI it was built from, so it is an argument. The metrics'
/// `grpc.target` is that key.
///
/// ```no_run
/// # use tonic::transport::Channel;
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let channel = Channel::from_static("http://127.0.0.1:50051").connect().await?;
/// let channel = steadfast_grpc::channel(channel, "http://127.0.0.1:50051", r#"{
///   "methodConfig": [{"name": [{"service": "helloworld.Greeter"}],
///     "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
///                     "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#)?;
/// // let mut client = GreeterClient::new(channel); // any generated tonic client
/// # let _: steadfast_grpc::GrpcChannel<Channel> = channel;
/// # Ok(()) }
/// ```
///
/// For a clock or a concurrency limit, build a [`GrpcLayer`] and call
/// [`GrpcLayer::channel`].
///
/// # Errors
/// One [`Error`] for every way it can fail: the config is not JSON or is
/// invalid ([`Error::Config`], naming the field), a policy is refused
/// ([`Error::Policy`]), or the target names no server ([`Error::Target`]).
pub fn channel<S>(
    inner: S,
    target: &str,
    config: impl ConfigSource,
) -> Result<GrpcChannel<S>, Error> {
    let key = target_key(target).ok_or_else(|| Error::Target(target.to_owned()))?;
    let config = config.into_service_config()?;
    let layer = GrpcLayer::new(config, &key)?;
    Ok(layer.channel(inner))
}

impl<C: AsyncClock> GrpcLayer<C> {
    /// This layer over a tonic channel (or any service a generated tonic
    /// client takes), with tonic's body types on both sides: the
    /// [`channel`] function's result, for a layer built with options (a
    /// clock, a concurrency limit).
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_grpc::GrpcLayer;
    /// use steadfast_grpc::config::ServiceConfig;
    /// # let channel = tower::service_fn(|_: http::Request<tonic::body::Body>| async {
    /// #     Ok::<_, std::io::Error>(http::Response::new(tonic::body::Body::empty()))
    /// # });
    ///
    /// let config = ServiceConfig::from_json("{}")?;
    /// let limit = ConcurrencyLimit::fixed(64).name("echo").build()?;
    /// let layer = GrpcLayer::builder(config, "127.0.0.1:50051").concurrency_limit(limit).build()?;
    /// let channel = layer.channel(channel);
    /// # let _ = channel;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn channel<S>(&self, inner: S) -> GrpcChannel<S, C> {
        GrpcChannel {
            inner: self.layer(ToTonic(inner)),
        }
    }
}

/// A tonic channel under a service config: what [`channel`] and
/// [`GrpcLayer::channel`] return. It takes and returns tonic's body types
/// (`http::Request<tonic::body::Body>`), so a generated client takes it
/// as it takes a `Channel`: `GreeterClient<GrpcChannel<Channel>>`.
pub struct GrpcChannel<S, C = DefaultClock> {
    inner: GrpcService<ToTonic<S>, C>,
}

impl<S, C> GrpcChannel<S, C> {
    /// The concurrency limit every call takes its slots of, if it has one.
    #[must_use]
    pub fn concurrency_limit(&self) -> Option<&ConcurrencyLimit> {
        self.inner.concurrency_limit()
    }

    /// The endpoint set its attempts are spread over ([`channel_over`](crate::channel_over)),
    /// to watch each replica's load and health; `None` for a channel to one
    /// server.
    #[must_use]
    pub fn endpoints(&self) -> Option<&steadfast::endpoint::Endpoints> {
        self.inner.endpoints()
    }
}

impl<S: Clone, C: Clone> Clone for GrpcChannel<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<S: fmt::Debug, C: fmt::Debug> fmt::Debug for GrpcChannel<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("GrpcChannel").field(&self.inner).finish()
    }
}

/// The channel under a [`GrpcService`]: it gets replay bodies and hands
/// the channel tonic's.
#[derive(Clone, Debug)]
struct ToTonic<S>(S);

impl<S> Service<Request<ReplayBody<Body>>> for ToTonic<S>
where
    S: Service<Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReplayBody<Body>>) -> S::Future {
        self.0.call(request.map(Body::new))
    }
}

impl<S, C, ResBody> Service<Request<Body>> for GrpcChannel<S, C>
where
    S: Service<Request<Body>, Response = Response<ResBody>> + Clone,
    S::Error: StdError + Send + Sync + 'static,
    ResBody: Default + From<FallbackBody>,
    C: AsyncClock,
{
    type Response = Response<ResBody>;
    type Error = BoxError;
    type Future = ChannelFuture<S, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        ChannelFuture {
            inner: self.inner.call(request),
        }
    }
}

pin_project! {
    /// The future of a [`GrpcChannel`] call.
    #[must_use = "futures do nothing unless polled"]
    pub struct ChannelFuture<S, C>
    where
        S: Service<Request<Body>>,
        S: Clone,
        S::Response: StatusResponse,
        C: AsyncClock,
    {
        #[pin]
        inner: GrpcFuture<ToTonic<S>, C, Body>,
    }
}

impl<S, C> fmt::Debug for ChannelFuture<S, C>
where
    S: Service<Request<Body>> + Clone,
    S::Response: StatusResponse,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<S, C, ResBody> Future for ChannelFuture<S, C>
where
    S: Service<Request<Body>, Response = Response<ResBody>> + Clone,
    S::Error: StdError + Send + Sync + 'static,
    ResBody: Default + From<FallbackBody>,
    C: AsyncClock,
{
    type Output = Result<Response<ResBody>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().inner.poll(cx)
    }
}
