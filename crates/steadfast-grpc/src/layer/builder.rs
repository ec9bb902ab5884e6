//! [`GrpcLayerBuilder`]: a [`GrpcLayer`](super::GrpcLayer) configured from a service config and
//! the options around it (limits, chaos, fallback, clock).

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use steadfast::chaos::Chaos;
use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::deadline::DeadlineHeader;
use steadfast::endpoint::Endpoints;
use steadfast::limit::ConcurrencyLimit;
use steadfast::policy::Limits;
use steadfast::rate::RateLimit;
use steadfast::{Backoff, ConfigError, RetryPolicy};
use steadfast_tower::deadline::SetDeadlineHeaderLayer;
use steadfast_tower::{HedgeLayer, RetryLayer};

use crate::chaos::ChaosStatus;
use crate::config::{MethodPolicy, ServiceConfig};
use crate::fallback::{FallbackAnswer, FallbackFn, GrpcFailure, answering_later, answering_now};
use crate::throttle::bucket_for;
use crate::{GrpcClassify, GrpcReplay};

use super::GrpcLayer;
use super::routes::{RetryRoute, Route, Routes};

/// Builds a [`GrpcLayer`] ([`GrpcLayer::builder`]): the service config and
/// the target, plus the clock, a concurrency limit, a rate limit, a chaos
/// for tests and a fallback.
#[must_use = "a builder does nothing until built"]
pub struct GrpcLayerBuilder<C = DefaultClock> {
    pub(super) config: ServiceConfig,
    pub(super) target: Arc<str>,
    pub(super) clock: C,
    pub(super) concurrency: Option<ConcurrencyLimit>,
    pub(super) rate: Option<RateLimit>,
    pub(super) chaos: Option<Chaos<ChaosStatus>>,
    pub(super) fallback: Option<Arc<FallbackFn>>,
    pub(super) endpoints: Option<Endpoints>,
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
            .field("endpoints", &self.endpoints)
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
            endpoints: self.endpoints,
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

    /// An endpoint set: every attempt of every call (first, retry, hedged
    /// copy) is sent to one of its endpoints, picked by load among the
    /// healthy ones, a retry or a copy to one the call has not tried while
    /// another is eligible; each attempt's status reaches its endpoint's
    /// load and outlier detection. The layer marks each attempt's request
    /// with the endpoint's [`EndpointId`](steadfast::endpoint::EndpointId)
    /// (a request extension); the service under it sends it there:
    /// [`Replicas`](crate::Replicas) does, and [`channel_over`](crate::channel_over)
    /// builds the whole channel.
    pub fn endpoints(mut self, endpoints: Endpoints) -> Self {
        self.endpoints = Some(endpoints);
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
            endpoints,
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
        let executed =
            concurrency.is_some() || rate.is_some() || fallback.is_some() || endpoints.is_some();
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
                if let Some(set) = &endpoints {
                    limits = limits.with_endpoints(set.clone());
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
            if let Some(set) = &endpoints {
                limits = limits.with_endpoints(set.clone());
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
                endpoints,
            }),
            header,
        })
    }
}

/// The route of a call made once under `limits` (a method without a retry
/// or hedging policy, when a concurrency limit holds its attempt): one
/// attempt, nothing buffered (a request with a body is sent as it comes,
/// never replayed), no code retried.
pub(super) fn once<C: AsyncClock>(limits: Limits, clock: &C) -> Result<RetryRoute<C>, ConfigError> {
    let policy = RetryPolicy::<Backoff>::builder()
        .max_attempts(1)
        .limits(|_| limits)
        .build()?;
    Ok(RetryLayer::new(policy)
        .with_classifier(GrpcClassify::retrying(&[]))
        .replay(GrpcReplay::new(0))
        .clock(clock.clone()))
}
