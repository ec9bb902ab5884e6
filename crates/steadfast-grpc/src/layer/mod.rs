//! [`GrpcLayer`]: a service config applied per method to any gRPC client
//! service (a tonic `Channel`, or a stack over one).

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use steadfast::ConfigError;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::limit::ConcurrencyLimit;
use steadfast_tower::deadline::SetDeadlineHeaderLayer;
use tower_layer::Layer;

use crate::chaos::ChaosAttempt;
use crate::config::ServiceConfig;

mod answer;
mod builder;
mod future;
mod routes;
mod service;
#[cfg(test)]
mod tests;

pub use builder::GrpcLayerBuilder;
pub use future::GrpcFuture;
use routes::Routes;
pub use service::GrpcService;

/// A boxed error, as tonic takes them.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// Applies a gRPC service config (gRFC A6) to every call of the inner
/// service, per method: retries with the A6 backoff on the listed codes,
/// hedging, the server's pushback, throttling with the A6 token bucket
/// shared by every channel to the same server, `grpc-previous-rpc-attempts`
/// on every attempt after the first, and each attempt's `grpc-timeout` set
/// to the call's true time left (the earliest of the request's own timeout,
/// the method's `timeout` and the ambient deadline).
///
/// A response head without `grpc-status` commits the call: it is returned
/// as it is and never retried. A Trailers-Only response (its status in its
/// headers) is classified: see [`GrpcClassify`](crate::GrpcClassify). Request messages are
/// buffered for replay up to 256 KiB per call ([`GrpcReplay`](crate::GrpcReplay)); a larger
/// request is sent once. A call whose retries end because its deadline
/// would pass is answered with `DEADLINE_EXCEEDED` when its last attempt
/// failed in transport.
///
/// With a [concurrency limit](GrpcLayerBuilder::concurrency_limit), every
/// attempt of every call (retries and hedged copies included) holds a slot
/// while it is in flight, and a call the limit refuses is answered
/// `RESOURCE_EXHAUSTED`, its message naming the limit.
///
/// The inner service takes `http::Request<ReplayBody<B>>`. For a tonic
/// `Channel`, [`GrpcLayer::channel`] (or the [`channel`](crate::channel)
/// function) wraps it with tonic's body types on both sides, ready for a
/// generated client.
pub struct GrpcLayer<C = DefaultClock> {
    routes: Arc<Routes<C>>,
    header: SetDeadlineHeaderLayer<C>,
}

impl<C: Clone> Clone for GrpcLayer<C> {
    fn clone(&self) -> Self {
        Self {
            routes: Arc::clone(&self.routes),
            header: self.header.clone(),
        }
    }
}

impl<C> fmt::Debug for GrpcLayer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcLayer")
            .field("config", &self.routes.config)
            .finish_non_exhaustive()
    }
}

impl GrpcLayer {
    /// The layer for calls to `target` (the server name: its throttling
    /// bucket is shared with every other channel to it) under `config`, on
    /// tokio's clock.
    ///
    /// # Errors
    /// A core [`ConfigError`] if a policy of the config is refused (a
    /// config that parsed never has one).
    pub fn new(config: ServiceConfig, target: &str) -> Result<Self, ConfigError> {
        Self::builder(config, target).build()
    }

    /// A builder for the layer for calls to `target` under `config`, for
    /// the options beyond the service config: the clock, a concurrency
    /// limit.
    ///
    /// ```
    /// use steadfast::limit::{ConcurrencyLimit, Gradient2};
    /// use steadfast_grpc::GrpcLayer;
    /// use steadfast_grpc::config::ServiceConfig;
    ///
    /// let config = ServiceConfig::from_json(r#"{"methodConfig": [{"name": [{}], "timeout": "1s"}]}"#)?;
    /// let limit = ConcurrencyLimit::adaptive(Gradient2::default()).name("echo").build()?;
    /// let layer = GrpcLayer::builder(config, "127.0.0.1:50051")
    ///     .concurrency_limit(limit.clone())
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(config: ServiceConfig, target: &str) -> GrpcLayerBuilder {
        GrpcLayerBuilder {
            config,
            target: Arc::from(target),
            clock: DefaultClock::default(),
            concurrency: None,
            rate: None,
            chaos: None,
            fallback: None,
            endpoints: None,
        }
    }
}

impl<C: AsyncClock> GrpcLayer<C> {
    /// [`new`](GrpcLayer::new), reading time and sleeping on `clock`.
    ///
    /// # Errors
    /// As [`new`](GrpcLayer::new).
    pub fn with_clock(config: ServiceConfig, target: &str, clock: C) -> Result<Self, ConfigError> {
        GrpcLayer::builder(config, target).clock(clock).build()
    }

    /// The concurrency limit every call of the layer takes its slots of,
    /// if it has one.
    #[must_use]
    pub fn concurrency_limit(&self) -> Option<&ConcurrencyLimit> {
        self.routes.concurrency.as_ref()
    }

    /// The endpoint set every attempt is sent to one of, if it has one.
    #[must_use]
    pub fn endpoints(&self) -> Option<&steadfast::endpoint::Endpoints> {
        self.routes.endpoints.as_ref()
    }
}

impl<S, C: Clone> Layer<S> for GrpcLayer<C> {
    type Service = GrpcService<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcService {
            inner: ChaosAttempt::new(
                self.header.layer(inner),
                self.routes.chaos.clone(),
                self.routes.clock.clone(),
            ),
            routes: Arc::clone(&self.routes),
        }
    }
}
