//! [`GrpcLayer`]: a service config applied per method to any gRPC client
//! service (a tonic `Channel`, or a stack over one).

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use steadfast::call::Reported;
use steadfast::chaos::Chaos;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::deadline::{CancelCause, DeadlineHeader};
use steadfast::limit::ConcurrencyLimit;
use steadfast::policy::Limits;
use steadfast::rate::RateLimit;
use steadfast::{
    Backoff, ConfigError, Deadline, HedgePolicy, Report, RetryError, RetryPolicy, StopReason,
    deadline,
};
use steadfast_tower::deadline::{SetDeadlineHeader, SetDeadlineHeaderLayer};
use steadfast_tower::replay::ReplayBody;
use steadfast_tower::{HedgeLayer, RetryLayer, hedge, retry};
use tower_layer::Layer;
use tower_service::Service;

use crate::chaos::{AttemptFuture, ChaosAttempt, ChaosStatus, StatusResponse};
use crate::config::{MethodPolicy, ServiceConfig};
use crate::fallback::{
    FallbackAnswer, FallbackBody, FallbackFn, Finished, GrpcFailure, LaterAnswer, answered,
    answering_later, answering_now, finish,
};
use crate::metrics::{self, Extra};
use crate::throttle::bucket_for;
use crate::{Code, GrpcClassify, GrpcReplay};

/// A boxed error, as tonic takes them.
pub type BoxError = Box<dyn Error + Send + Sync>;

type RetryRoute<C> = RetryLayer<Arc<RetryPolicy<Backoff>>, GrpcClassify, GrpcReplay, C>;
type HedgeRoute<C> = HedgeLayer<Arc<HedgePolicy>, GrpcClassify, GrpcReplay, C>;

/// What a method's calls go through.
enum Route<C> {
    /// A retried method, and its config's timeout.
    Retry(RetryRoute<C>, Option<Duration>),
    /// A hedged method, and its config's timeout.
    Hedge(HedgeRoute<C>, Option<Duration>),
    Plain {
        timeout: Option<Duration>,
    },
}

/// The routes of a service config, one per method config, in its order.
struct Routes<C> {
    config: ServiceConfig,
    routes: Vec<Route<C>>,
    /// The route of calls no method config names, when a concurrency limit
    /// holds their attempt.
    unnamed: Option<Route<C>>,
    concurrency: Option<ConcurrencyLimit>,
    /// Injected into every attempt ([`GrpcLayerBuilder::chaos`]).
    chaos: Option<Chaos<ChaosStatus>>,
    /// Asked once a call has failed ([`GrpcLayerBuilder::fallback`]).
    fallback: Option<Arc<FallbackFn>>,
    clock: C,
    // The server name, as the metrics' `grpc.target`.
    target: Arc<str>,
}

impl<C> Routes<C> {
    fn route(&self, path: &str) -> Option<&Route<C>> {
        let Some(config) = self.config.method_config(path) else {
            return self.unnamed.as_ref();
        };
        let index = self
            .config
            .method_configs()
            .iter()
            .position(|c| std::ptr::eq(c, config))?;
        self.routes.get(index)
    }
}

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
/// headers) is classified: see [`GrpcClassify`]. Request messages are
/// buffered for replay up to 256 KiB per call ([`GrpcReplay`]); a larger
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
}

/// Builds a [`GrpcLayer`] ([`GrpcLayer::builder`]): the service config and
/// the target, plus the clock, a concurrency limit, a rate limit, a chaos
/// for tests and a fallback.
#[must_use = "a builder does nothing until built"]
pub struct GrpcLayerBuilder<C = DefaultClock> {
    config: ServiceConfig,
    target: Arc<str>,
    clock: C,
    concurrency: Option<ConcurrencyLimit>,
    rate: Option<RateLimit>,
    chaos: Option<Chaos<ChaosStatus>>,
    fallback: Option<Arc<FallbackFn>>,
}

impl<C> fmt::Debug for GrpcLayerBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcLayerBuilder")
            .field("config", &self.config)
            .field("target", &self.target)
            .field("concurrency_limit", &self.concurrency)
            .field("rate_limit", &self.rate)
            .field("chaos", &self.chaos)
            .field("fallback", &self.fallback.is_some())
            .finish_non_exhaustive()
    }
}

impl<C> GrpcLayerBuilder<C> {
    /// Reads time and sleeps on `clock` (default tokio's).
    ///
    /// ```
    /// use steadfast::clock::TokioClock;
    /// use steadfast_grpc::GrpcLayer;
    /// use steadfast_grpc::config::ServiceConfig;
    ///
    /// let config = ServiceConfig::from_json("{}")?;
    /// let layer = GrpcLayer::builder(config, "127.0.0.1:50051").clock(TokioClock).build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clock<C2: AsyncClock>(self, clock: C2) -> GrpcLayerBuilder<C2> {
        GrpcLayerBuilder {
            config: self.config,
            target: self.target,
            clock,
            concurrency: self.concurrency,
            rate: self.rate,
            chaos: self.chaos,
            fallback: self.fallback,
        }
    }

    /// One concurrency limit for every call of the channel, whatever its
    /// method: each attempt (the first, a retry, a hedged copy) takes one
    /// of its slots while in flight and gives it back when its response
    /// head arrives, it fails, or it is dropped; a method without a retry
    /// or hedging policy makes its one attempt under the limit too. As the
    /// throttle's token bucket, the limit is the channel's (or, cloned into
    /// several layers, theirs together).
    ///
    /// An adaptive limit learns from every attempt: a success's latency is
    /// a sample; `RESOURCE_EXHAUSTED` and `UNAVAILABLE` (a transport error
    /// included), retryable or not, and an attempt cut off by the deadline
    /// are drops that shrink it ([`GrpcClassify`]'s
    /// [`overloaded`](steadfast::Classify::overloaded)).
    ///
    /// A call whose first attempt gets no slot (at once, or within the
    /// limit's queue wait) is not sent: it is answered with a
    /// Trailers-Only `RESOURCE_EXHAUSTED` whose message is the refusal
    /// (`concurrency limit NAME full: N in flight, limit L`). A retry or
    /// hedge the limit refuses ends the call with the last attempt's answer,
    /// as one the throttle refuses.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::limit::{Aimd, ConcurrencyLimit};
    /// use steadfast_grpc::GrpcLayer;
    /// use steadfast_grpc::config::ServiceConfig;
    ///
    /// let config = ServiceConfig::from_json(r#"{"methodConfig": [{"name": [{}],
    ///     "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
    ///                     "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#)?;
    /// let limit = ConcurrencyLimit::adaptive(Aimd::default())
    ///     .name("inventory")
    ///     .queue(32, Duration::from_millis(10))
    ///     .build()?;
    /// let layer = GrpcLayer::builder(config, "inventory:443").concurrency_limit(limit.clone()).build()?;
    /// assert_eq!(layer.concurrency_limit().map(|l| l.name()), Some("inventory"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn concurrency_limit(mut self, limit: ConcurrencyLimit) -> Self {
        self.concurrency = Some(limit);
        self
    }

    /// One rate limit for every call of the channel, whatever its method:
    /// every attempt (first, retry, hedged copy) is admitted by it. A call
    /// it has no room for is answered `RESOURCE_EXHAUSTED` before anything
    /// is sent, its message naming the limit and the wait; a retry or hedge
    /// it refuses is not sent, and the call ends with its last answer.
    ///
    /// ```
    /// use steadfast::rate::{Quota, RateLimit};
    /// use steadfast_grpc::GrpcLayer;
    /// use steadfast_grpc::config::ServiceConfig;
    ///
    /// let config = ServiceConfig::from_json("{}")?;
    /// let quota = RateLimit::builder().name("maps api").quota(Quota::per_second(50)?).build()?;
    /// let layer = GrpcLayer::builder(config, "maps:443").rate_limit(quota).build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate = Some(limit);
        self
    }

    /// Injects `chaos`'s faults into every attempt of every call, for tests
    /// (gRFC A33's client-side fault injection): a latency before the
    /// attempt is made, slept on the layer's clock (nothing is sent during
    /// it, and the attempt's `grpc-timeout` is the time left after it), and
    /// a substituted status ([`chaos_status`](crate::chaos_status)) instead
    /// of sending it, which the layer then classifies like the server's: an
    /// injected `UNAVAILABLE` that the method's retry policy lists is
    /// retried (after its pushback, if it has one), as a hedging policy's
    /// non-fatal codes send the next copy. The delay and the abort each
    /// have their own rate and their own draw, as A33 says. Methods with
    /// no retry or hedging policy get the faults on their one attempt.
    ///
    /// A chaos is off unless turned on ([`Chaos::switch`]). The channel's
    /// errors cannot be made, so an error fault is refused when the layer
    /// is built: substitute a status.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::chaos::Chaos;
    /// use steadfast_grpc::config::ServiceConfig;
    /// use steadfast_grpc::{Code, GrpcLayer, chaos_status};
    ///
    /// let config = ServiceConfig::from_json("{}")?;
    /// let chaos = Chaos::builder()
    ///     .enabled(cfg!(test)) // off unless asked
    ///     .latency(0.1, Duration::from_millis(50))
    ///     .outcome(0.2, || chaos_status(Code::Unavailable, Some(Duration::from_millis(100))))
    ///     .build()?;
    /// let layer = GrpcLayer::builder(config, "inventory:443").chaos(chaos.clone()).build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn chaos(mut self, chaos: Chaos<ChaosStatus>) -> Self {
        self.chaos = Some(chaos);
        self
    }

    /// Answers a call that failed with `fallback`'s answer: the outermost
    /// step, after the retries or hedges and after the layer's own answer
    /// (`DEADLINE_EXCEEDED` for a call out of time, `RESOURCE_EXHAUSTED`
    /// for one a limit refused). It is asked when the call stopped for any
    /// reason but a cancellation ([`steadfast::fallback::fires`]) with a
    /// failure: a Trailers-Only status other than `OK`, or an error (of the
    /// transport, counted as `UNAVAILABLE`); never for a success, nor for a
    /// committed response (a head without `grpc-status`), which streams.
    /// It sees a [`GrpcFailure`] (the method, the code, the response's
    /// metadata or the error, the stop reason and attempts) and answers a
    /// [`FallbackAnswer`] (a status, or a unary reply message that the
    /// generated client decodes as the server's) or `None` to hand the
    /// failure on. Each time it is asked, the core's fallback event and
    /// `steadfast.fallback` counter record it
    /// ([`record_fired`](steadfast::fallback::record_fired), as `grpc`).
    ///
    /// Every call of a layer with a fallback runs under the retry
    /// executor (one attempt for a method without a policy), so that its
    /// fallback knows how it ended. This fallback answers at once, on the
    /// call's task: a cached value. For a backup service's reply, use
    /// [`fallback_async`](Self::fallback_async).
    ///
    /// ```
    /// use steadfast_grpc::config::ServiceConfig;
    /// use steadfast_grpc::{Code, FallbackAnswer, GrpcLayer};
    ///
    /// let config = ServiceConfig::from_json("{}")?;
    /// let layer = GrpcLayer::builder(config, "prices:443")
    ///     .fallback(|failure| match failure.method() {
    ///         // A cached reply (its prost encoding) for the read method.
    ///         "/shop.Prices/Get" => Some(FallbackAnswer::message(vec![0x08, 0x2a])),
    ///         _ if failure.code() == Code::Unavailable => {
    ///             Some(FallbackAnswer::status(Code::Unavailable, "prices are down; try later"))
    ///         }
    ///         _ => None,
    ///     })
    ///     .build()?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fallback<F>(mut self, fallback: F) -> Self
    where
        F: Fn(&GrpcFailure<'_>) -> Option<FallbackAnswer> + Send + Sync + 'static,
    {
        self.fallback = Some(answering_now(fallback));
        self
    }

    /// [`fallback`](Self::fallback) whose answer is a future: a backup
    /// service's reply, a read of a cache over the network. `fallback`
    /// sees the [`GrpcFailure`] when the call fails (copy out what the
    /// answer needs: the future outlives it) and returns the future of
    /// the answer, `None` to hand the failure on. The same rule of when it
    /// is asked, and the same event. The future runs outside the failed
    /// call's deadline (which may be why it failed): give the backup call
    /// a deadline of its own. It is boxed only when the fallback is asked.
    ///
    /// ```
    /// use steadfast_grpc::config::ServiceConfig;
    /// use steadfast_grpc::{Code, FallbackAnswer, GrpcLayer};
    ///
    /// let config = ServiceConfig::from_json("{}")?;
    /// let layer = GrpcLayer::builder(config, "prices:443")
    ///     .fallback_async(|failure| {
    ///         let method = failure.method().to_owned();
    ///         async move {
    ///             // Ask the backup region (here: a stand-in for its reply).
    ///             let reply: Option<Vec<u8>> = ask_backup(&method).await;
    ///             reply.map(FallbackAnswer::message)
    ///         }
    ///     })
    ///     .build()?;
    /// # async fn ask_backup(_: &str) -> Option<Vec<u8>> { Some(vec![0x08, 0x2a]) }
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fallback_async<F, Fut>(mut self, fallback: F) -> Self
    where
        F: Fn(&GrpcFailure<'_>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<FallbackAnswer>> + Send + 'static,
    {
        self.fallback = Some(answering_later(fallback));
        self
    }
}

impl<C: AsyncClock> GrpcLayerBuilder<C> {
    /// The layer.
    ///
    /// # Errors
    /// A core [`ConfigError`] if a policy of the config is refused (a
    /// config that parsed never has one).
    pub fn build(self) -> Result<GrpcLayer<C>, ConfigError> {
        let Self {
            config,
            target,
            clock,
            concurrency,
            rate,
            chaos,
            fallback,
        } = self;
        if chaos.as_ref().is_some_and(|c| !c.error_rate().is_never()) {
            return Err(ConfigError::new(
                "grpc layer",
                "chaos",
                "cannot inject errors (the channel's cannot be made): substitute a status with chaos_status",
                "an error fault",
            ));
        }
        // Every call runs under the executor (one attempt for a method
        // without a policy) when a limit must hold its attempt or a
        // fallback must see how it ended.
        let executed = concurrency.is_some() || rate.is_some() || fallback.is_some();
        let bucket = config
            .retry_throttling()
            .map(|t| bucket_for(&target, *t))
            .transpose()?;
        let mut routes = Vec::with_capacity(config.method_configs().len());
        for method in config.method_configs() {
            let timeout = method.timeout();
            // The method's timeout bounds the whole call; the server's bucket
            // is asked before every retry and hedge; the concurrency limit
            // holds a slot per attempt. One function sets them on either
            // kind of policy.
            let limits = |mut limits: Limits| {
                if let Some(t) = timeout {
                    limits = limits.with_max_elapsed(t);
                }
                if let Some(b) = &bucket {
                    limits = limits.with_control(b.clone());
                }
                if let Some(l) = &concurrency {
                    limits = limits.with_concurrency_limit(l.clone());
                }
                if let Some(r) = &rate {
                    limits = limits.with_rate_limit(r.clone());
                }
                limits
            };
            routes.push(match method.policy() {
                Some(MethodPolicy::Retry(r)) => Route::Retry(
                    RetryLayer::new(r.to_policy()?.to_builder().limits(limits).build()?)
                        .with_classifier(GrpcClassify::retrying(r.retryable_codes()))
                        .replay(GrpcReplay::default())
                        .clock(clock.clone()),
                    timeout,
                ),
                Some(MethodPolicy::Hedging(h)) => Route::Hedge(
                    HedgeLayer::new(h.to_policy()?.to_builder().limits(limits).build()?)
                        .with_classifier(GrpcClassify::retrying(h.non_fatal_codes()))
                        .replay(GrpcReplay::default())
                        .clock(clock.clone()),
                    timeout,
                ),
                None if executed => Route::Retry(once(limits(Limits::default()), &clock)?, timeout),
                None => Route::Plain { timeout },
            });
        }
        // Calls no method config names take their slot (and their turn) too.
        let unnamed = if executed {
            let mut limits = Limits::default();
            if let Some(l) = &concurrency {
                limits = limits.with_concurrency_limit(l.clone());
            }
            if let Some(r) = &rate {
                limits = limits.with_rate_limit(r.clone());
            }
            Some(Route::Retry(once(limits, &clock)?, None))
        } else {
            None
        };
        let header = SetDeadlineHeaderLayer::new(DeadlineHeader::GRPC)?.clock(clock.clone());
        Ok(GrpcLayer {
            routes: Arc::new(Routes {
                config,
                routes,
                unnamed,
                concurrency,
                chaos,
                fallback,
                clock,
                target,
            }),
            header,
        })
    }
}

/// The route of a call made once under `limits` (a method without a retry
/// or hedging policy, when a concurrency limit holds its attempt): one
/// attempt, nothing buffered (a request with a body is sent as it comes,
/// never replayed), no code retried.
fn once<C: AsyncClock>(limits: Limits, clock: &C) -> Result<RetryRoute<C>, ConfigError> {
    let policy = RetryPolicy::<Backoff>::builder()
        .max_attempts(1)
        .limits(|_| limits)
        .build()?;
    Ok(RetryLayer::new(policy)
        .with_classifier(GrpcClassify::retrying(&[]))
        .replay(GrpcReplay::new(0))
        .clock(clock.clone()))
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

/// The service a [`GrpcLayer`] makes.
pub struct GrpcService<S, C = DefaultClock> {
    inner: Inner<S, C>,
    routes: Arc<Routes<C>>,
}

impl<S: Clone, C: Clone> Clone for GrpcService<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            routes: Arc::clone(&self.routes),
        }
    }
}

impl<S: fmt::Debug, C: fmt::Debug> fmt::Debug for GrpcService<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, C> GrpcService<S, C> {
    /// The concurrency limit every call takes its slots of, if it has one.
    #[must_use]
    pub fn concurrency_limit(&self) -> Option<&ConcurrencyLimit> {
        self.routes.concurrency.as_ref()
    }
}

/// The service each attempt is made on: the layer's chaos (if any) over
/// the `grpc-timeout` of the attempt's time left over the channel.
type Inner<S, C> = ChaosAttempt<SetDeadlineHeader<S, C>, C>;
type Outgoing<B> = Request<ReplayBody<B>>;

impl<S, C, B, ResBody> Service<Request<B>> for GrpcService<S, C>
where
    S: Service<Outgoing<B>, Response = Response<ResBody>> + Clone,
    S::Error: Error + Send + Sync + 'static,
    B: Body<Data = Bytes> + Unpin,
    ResBody: Default + From<FallbackBody>,
    C: AsyncClock,
{
    type Response = Response<ResBody>;
    type Error = BoxError;
    type Future = GrpcFuture<S, C, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let ready = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, ready);
        let clock = self.routes.clock.clone();
        // The request's own timeout (tonic writes it as `grpc-timeout`).
        let own = request
            .headers()
            .get("grpc-timeout")
            .and_then(|v| DeadlineHeader::GRPC.decode(v.as_bytes()).ok())
            .map(|left| Deadline::after(clock.now(), left));
        // Every event of the call (attempts, waits, hedges, giving up) is
        // inside this span, which names the method and the target; a span
        // no subscriber wants costs a check.
        let span = tracing::debug_span!("grpc call", method = %request.uri().path());
        let entered = span.enter();
        let method = request.uri().path_and_query().cloned();
        // The call's effective deadline, to judge its last answer by: the
        // earliest of its own, the method's timeout and the ambient one.
        let due = |timeout: &Option<Duration>| {
            let method = timeout.map(|t| Deadline::after(clock.now(), t));
            Deadline::earliest(Deadline::earliest(own, method), deadline::current())
        };
        let (kind, due) = match self.routes.route(request.uri().path()) {
            Some(Route::Retry(layer, timeout)) => (
                Kind::Retry {
                    future: layer.run_reported(ready, request),
                },
                due(timeout),
            ),
            Some(Route::Hedge(layer, timeout)) => (
                Kind::Hedge {
                    future: layer.run_reported(ready, request),
                },
                due(timeout),
            ),
            Some(Route::Plain { timeout }) => {
                let method = timeout.map(|t| Deadline::after(clock.now(), t));
                let deadline = Deadline::earliest(own, method);
                drop(entered);
                return plain(ready, request, deadline, clock, span);
            }
            None => {
                drop(entered);
                return plain(ready, request, own, clock, span);
            }
        };
        drop(entered);
        GrpcFuture {
            kind,
            deadline: own,
            due,
            clock,
            span,
            labels: Some(Labels {
                method,
                target: Arc::clone(&self.routes.target),
            }),
            fallback: self.routes.fallback.clone(),
            answering: None,
        }
    }
}

/// What names a call in its metrics.
struct Labels {
    method: Option<http::uri::PathAndQuery>,
    target: Arc<str>,
}

impl Labels {
    fn record(&self, extra: Extra) {
        let method = self.method.as_ref().map_or("", |m| m.path());
        metrics::record(extra, method, &self.target);
    }
}

fn plain<S, C, B>(
    mut inner: Inner<S, C>,
    request: Request<B>,
    deadline: Option<Deadline>,
    clock: C,
    span: tracing::Span,
) -> GrpcFuture<S, C, B>
where
    S: Service<Outgoing<B>> + Clone,
    S::Response: StatusResponse,
    B: Body<Data = Bytes> + Unpin,
    C: AsyncClock,
{
    let request = request.map(ReplayBody::streaming);
    let future = span.in_scope(|| match deadline {
        Some(d) => deadline::scope(d, || inner.call(request)),
        None => inner.call(request),
    });
    GrpcFuture {
        kind: Kind::Plain { future },
        deadline,
        due: deadline,
        clock,
        span,
        labels: None,
        // A layer with a fallback runs every call under the executor.
        fallback: None,
        answering: None,
    }
}

pin_project! {
    /// The future of a [`GrpcService`] call.
    #[must_use = "futures do nothing unless polled"]
    pub struct GrpcFuture<S, C, B>
    where
        S: Service<Outgoing<B>>,
        S: Clone,
        S::Response: StatusResponse,
        B: Body<Data = Bytes>,
        B: Unpin,
        C: AsyncClock,
    {
        #[pin]
        kind: Kind<S, C, B>,
        // The request's own deadline, ambient around every poll.
        deadline: Option<Deadline>,
        // The call's effective deadline (its own, the method's timeout,
        // the ambient one): a failure that arrives at or after it is the
        // deadline's doing.
        due: Option<Deadline>,
        clock: C,
        // The call's span: every poll runs inside it.
        span: tracing::Span,
        // Method and target, for the metrics of a retried or hedged call.
        labels: Option<Labels>,
        // The layer's fallback, asked once a retried or hedged call failed.
        fallback: Option<Arc<FallbackFn>>,
        // An async fallback answering: the call's own result (returned if
        // it declines) and the answer's future.
        answering: Option<(Result<S::Response, BoxError>, LaterAnswer)>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<S, C, B>
    where
        S: Service<Outgoing<B>>,
        S: Clone,
        S::Response: StatusResponse,
        B: Body<Data = Bytes>,
        B: Unpin,
        C: AsyncClock,
    {
        Retry { #[pin] future: retry::ResponseFuture<Inner<S, C>, Request<B>, Arc<RetryPolicy<Backoff>>, GrpcClassify, GrpcReplay, C, Reported> },
        Hedge { #[pin] future: hedge::ResponseFuture<Inner<S, C>, Request<B>, Arc<HedgePolicy>, GrpcClassify, GrpcReplay, C, Reported> },
        Plain { #[pin] future: AttemptFuture<SetDeadlineHeader<S, C>, Outgoing<B>, C::Sleep> },
    }
}

impl<S, C, B> fmt::Debug for GrpcFuture<S, C, B>
where
    S: Service<Outgoing<B>> + Clone,
    S::Response: StatusResponse,
    B: Body<Data = Bytes> + Unpin,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            Kind::Retry { .. } => "GrpcFuture(retrying)",
            Kind::Hedge { .. } => "GrpcFuture(hedging)",
            Kind::Plain { .. } => "GrpcFuture(plain)",
        })
    }
}

impl<S, C, B, ResBody> Future for GrpcFuture<S, C, B>
where
    S: Service<Outgoing<B>, Response = Response<ResBody>> + Clone,
    S::Error: Error + Send + Sync + 'static,
    B: Body<Data = Bytes> + Unpin,
    ResBody: Default + From<FallbackBody>,
    C: AsyncClock,
{
    type Output = Result<Response<ResBody>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let kind = this.kind;
        let clock = &*this.clock;
        let due = *this.due;
        let labels = this.labels.as_ref();
        let fallback = this.fallback.as_ref();
        // The call's answer, then its fallback's if it failed (outermost:
        // after the retries or hedges, and after the layer's own answer).
        let method = labels
            .and_then(|l| l.method.as_ref())
            .map_or("", |m| m.path());
        let end = move |report: Report<Response<ResBody>, S::Error>| {
            let ending = report.ending();
            finish(answer(report, due, clock.now()), &ending, fallback, method)
        };
        let answering = this.answering;
        if let Some((_, later)) = answering.as_mut() {
            let answer = std::task::ready!(later.as_mut().poll(cx));
            return match answering.take() {
                Some((out, _)) => Poll::Ready(answered(out, answer)),
                None => Poll::Pending,
            };
        }
        let poll = move |cx: &mut Context<'_>| match kind.project() {
            KindProj::Retry { future } => future.poll(cx).map(|report| {
                if let Some(labels) = labels {
                    labels.record(Extra::Retries {
                        retries: report.attempts.saturating_sub(1),
                        delay: report.waited,
                    });
                }
                end(report)
            }),
            KindProj::Hedge { future } => future.poll(cx).map(|report| {
                if let Some(labels) = labels {
                    labels.record(Extra::Hedges {
                        hedges: report.hedge.map_or(0, |stats| stats.hedges()),
                    });
                }
                end(report)
            }),
            KindProj::Plain { future } => future.poll(cx).map(|out| {
                Finished::Done(match out {
                    Ok(response) => Ok(response),
                    // A call cut off once its deadline had passed (tonic's channel
                    // enforces the `grpc-timeout` it sends, and reports
                    // CANCELLED) is DEADLINE_EXCEEDED, as gRPC reports it.
                    Err(e) => match CancelCause::classify(deadline::current(), clock.now()) {
                        CancelCause::DeadlineExceeded => {
                            Ok(status_response(Code::DeadlineExceeded, "deadline exceeded"))
                        }
                        CancelCause::Cancelled => Err(e.into()),
                    },
                })
            }),
        };
        let finished = std::task::ready!(match *this.deadline {
            Some(d) => deadline::scope(d, || poll(&mut *cx)),
            None => poll(&mut *cx),
        });
        match finished {
            Finished::Done(out) => Poll::Ready(out),
            // An async fallback's answer, outside the failed call's
            // deadline (which may be why it failed).
            Finished::Answering { out, mut answer } => match answer.as_mut().poll(cx) {
                Poll::Ready(answer) => Poll::Ready(answered(out, answer)),
                Poll::Pending => {
                    *answering = Some((out, answer));
                    Poll::Pending
                }
            },
        }
    }
}

/// A retried or hedged call's answer: its response, unless the call stopped
/// because the next attempt would start past the deadline, which gRPC
/// reports as `DEADLINE_EXCEEDED` (whatever status the last attempt had).
/// A failure that arrives at or after the call's deadline (`due`, at
/// `now`) is the deadline's doing, whatever it says: a server that enforces
/// the `grpc-timeout` it received answers CANCELLED ("Timeout expired", as
/// tonic does) a hair after the deadline, and the caller must still see
/// `DEADLINE_EXCEEDED`.
fn answer<T: Default, E: Error + Send + Sync + 'static>(
    report: Report<Response<T>, E>,
    due: Option<Deadline>,
    now: Instant,
) -> Result<Response<T>, BoxError> {
    let late = due.is_some_and(|d| d.is_expired(now));
    match (report.result, report.stop) {
        (Ok(response), Some(StopReason::Deadline)) => Ok(out_of_time(&response, report.attempts)),
        (Ok(response), Some(_)) if late && failed(&response) => {
            Ok(past_deadline(&response, report.attempts))
        }
        (Ok(response), _) => Ok(response),
        (Err(e), _) if late && e.reason() != StopReason::LimitReached => Ok(status_response(
            Code::DeadlineExceeded,
            &format!("deadline exceeded: {e}"),
        )),
        (Err(e), _) => call_error(e),
    }
}

/// Whether a response head says the call failed (a Trailers-Only status
/// other than OK).
fn failed<T>(response: &Response<T>) -> bool {
    crate::head_status(response.headers()).is_some_and(|code| code != Code::Ok)
}

/// `DEADLINE_EXCEEDED` for a call whose last attempt failed at or after its
/// deadline (its status names the attempt's own answer).
#[cold]
fn past_deadline<T: Default>(last: &Response<T>, attempts: u32) -> Response<T> {
    let code = crate::head_status(last.headers()).unwrap_or(Code::Unknown);
    let message = format!(
        "deadline exceeded: attempt {attempts} ended {code} at or after the call's deadline"
    );
    status_response(Code::DeadlineExceeded, &message)
}

/// `DEADLINE_EXCEEDED` for a call that gave up on `last` (a Trailers-Only
/// failure) because its deadline would pass before the next attempt.
#[cold]
fn out_of_time<T: Default>(last: &Response<T>, attempts: u32) -> Response<T> {
    let code = crate::head_status(last.headers()).unwrap_or(Code::Unknown);
    let message = format!(
        "deadline exceeded: no time for another attempt after {attempts} (the last ended {code})"
    );
    status_response(Code::DeadlineExceeded, &message)
}

/// A call that ran out of time is `DEADLINE_EXCEEDED`, as gRPC reports it;
/// a call the concurrency limit refused before its first attempt is
/// `RESOURCE_EXHAUSTED`, its message the refusal; any other failure is the
/// error itself.
fn call_error<T: Default, E: Error + Send + Sync + 'static>(
    e: RetryError<E>,
) -> Result<Response<T>, BoxError> {
    match (e.reason(), e.limit_refused()) {
        (StopReason::Deadline, _) => Ok(status_response(Code::DeadlineExceeded, &e.to_string())),
        (StopReason::LimitReached, Some(refused)) if e.attempts() == 0 => {
            tracing::debug!(
                limit = refused.by,
                in_flight = refused.in_flight,
                max = refused.limit,
                "steadfast: gRPC call refused by its concurrency limit"
            );
            Ok(status_response(
                Code::ResourceExhausted,
                &refused.to_string(),
            ))
        }
        (StopReason::Throttled, _) if e.attempts() == 0 && e.refused_by().is_some() => {
            tracing::debug!(
                limit = e.refused_by(),
                "steadfast: gRPC call refused by its rate limit"
            );
            let refused = steadfast::rate::RateRefused {
                by: e
                    .refused_by()
                    .unwrap_or(steadfast::rate::DEFAULT_RATE_LIMIT_NAME),
                retry_after: e.retry_after(),
            };
            Ok(status_response(
                Code::ResourceExhausted,
                &refused.to_string(),
            ))
        }
        _ => Err(Box::new(e)),
    }
}

/// A Trailers-Only response with `code` and `message`.
fn status_response<T: Default>(code: Code, message: &str) -> Response<T> {
    crate::trailers_only::trailers_only(u32::from(code.number()), message, None)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use steadfast::call::{Ending, Finish, Reported};
    use steadfast::{Deadline, StopReason};

    use super::*;

    /// A Trailers-Only answer with `code`, as an attempt's final outcome.
    fn report(code: Code) -> Report<Response<()>, std::io::Error> {
        let mut ending = Ending::default();
        ending.attempts = 1;
        ending.stop = Some(StopReason::Permanent);
        <Reported as Finish<Response<()>, std::io::Error>>::finish(
            Ok(status_response(code, "Timeout expired")),
            || ending,
        )
    }

    fn code(answer: &Result<Response<()>, BoxError>) -> Option<Code> {
        answer
            .as_ref()
            .ok()
            .and_then(|r| crate::head_status(r.headers()))
    }

    /// #28 item 6: a server that enforces the `grpc-timeout` it got answers
    /// CANCELLED a hair after the deadline; the caller sees the deadline's
    /// status, DEADLINE_EXCEEDED. Before the deadline, CANCELLED stands.
    #[test]
    fn a_failure_at_or_after_the_deadline_is_deadline_exceeded() {
        let start = Instant::now();
        let due = Some(Deadline::after(start, Duration::from_millis(200)));
        let late = start + Duration::from_millis(201);
        assert_eq!(
            code(&answer(report(Code::Cancelled), due, late)),
            Some(Code::DeadlineExceeded)
        );
        assert_eq!(
            code(&answer(
                report(Code::Unavailable),
                due,
                start + Duration::from_millis(200)
            )),
            Some(Code::DeadlineExceeded)
        );
        let early = start + Duration::from_millis(150);
        assert_eq!(
            code(&answer(report(Code::Cancelled), due, early)),
            Some(Code::Cancelled)
        );
        assert_eq!(
            code(&answer(report(Code::Cancelled), None, late)),
            Some(Code::Cancelled)
        );
    }
}
