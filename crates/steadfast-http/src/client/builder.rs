use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderName;
use steadfast::chaos::Chaos;
use steadfast::clock::{Clock, DefaultClock};
use steadfast::deadline::DeadlineHeader;
use steadfast::endpoint::{Endpoints, EndpointsBuilder, OutlierDetection};
use steadfast::fallback::AsyncFallback;
use steadfast::limit::ConcurrencyLimit;
use steadfast::policy::{HedgeDelay, Limits};
use steadfast::rate::RateLimit;
use steadfast::{Backoff, Classify, ConfigError, HedgePolicy, RetryControl, RetryPolicy};
use steadfast_tower::{HedgeLayer, RetryLayer};

use super::{Client, Shared};
use crate::attempt::{AttemptConfig, ByVerdict, SharedClassifier};
use crate::classify::DefaultClassifier;
use crate::engine::{Layers, Rules};
use crate::error::Error;
use crate::event::{AttemptEvent, OnAttempt};
use crate::fallback::ClientFallback;
use crate::redact::RedactedUrl;
use crate::replay::ReqwestReplay;
use reqwest::Url;
use steadfast::endpoint::EndpointId;

/// Configures a [`Client`] once: attempts, backoff, deadlines, a retry
/// control, hedging, the classifier and the inner `reqwest::Client`.
///
/// ```
/// use std::time::Duration;
/// use steadfast::Backoff;
///
/// let client = steadfast_http::Client::builder()
///     .attempts(4)
///     .backoff(Backoff::exponential().initial(Duration::from_millis(50)).build()?)
///     .deadline(Duration::from_secs(10))
///     .attempt_timeout(Duration::from_secs(2))
///     .build()?;
/// # let _ = client;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a builder does nothing until built"]
#[derive(Clone)]
pub struct ClientBuilder {
    reqwest: Option<reqwest::Client>,
    attempts: u32,
    max_requeues: u32,
    backoff: Option<Backoff>,
    max_delay: Option<Duration>,
    deadline: Option<Duration>,
    attempt_timeout: Option<Duration>,
    control: Option<Arc<dyn RetryControl>>,
    concurrency: Option<ConcurrencyLimit>,
    rate: Option<(RateLimit, Duration)>,
    hedge: Option<Hedging>,
    header: Option<DeadlineHeader>,
    retry_non_idempotent: bool,
    idempotency_key: Option<HeaderName>,
    attempt_header: Option<HeaderName>,
    classify: SharedClassifier,
    name: Option<&'static str>,
    on_attempt: Option<OnAttempt>,
    chaos: Option<Chaos<reqwest::Response, ()>>,
    fallback: Option<ClientFallback>,
    /// The base URLs of the endpoints a call is spread over, as given.
    endpoints: Vec<String>,
    /// How their set picks and ejects (Envoy's outlier detection unless
    /// told otherwise).
    endpoint_set: Option<EndpointsBuilder>,
}

#[derive(Clone)]
enum Hedging {
    Copies(u32, HedgeDelay),
    Policy(HedgePolicy),
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("attempts", &self.attempts)
            .field("max_requeues", &self.max_requeues)
            .field("backoff", &self.backoff)
            .field("max_delay", &self.max_delay)
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("concurrency_limit", &self.concurrency)
            .field("rate_limit", &self.rate)
            .field("hedging", &self.hedge.is_some())
            .field("header", &self.header)
            .field("retry_non_idempotent", &self.retry_non_idempotent)
            .field("idempotency_key", &self.idempotency_key)
            .field("attempt_header", &self.attempt_header)
            .field("name", &self.name)
            .field("on_attempt", &self.on_attempt.is_some())
            .field("fallback", &self.fallback.is_some())
            .field("endpoints", &self.endpoints.len())
            .finish_non_exhaustive()
    }
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            reqwest: None,
            attempts: 3,
            max_requeues: steadfast::policy::DEFAULT_MAX_REQUEUES,
            backoff: None,
            max_delay: None,
            deadline: None,
            attempt_timeout: None,
            control: None,
            concurrency: None,
            rate: None,
            hedge: None,
            header: Some(DeadlineHeader::DEFAULT),
            retry_non_idempotent: false,
            idempotency_key: Some(HeaderName::from_static("idempotency-key")),
            attempt_header: None,
            classify: Arc::new(DefaultClassifier),
            name: None,
            on_attempt: None,
            chaos: None,
            fallback: None,
            endpoints: Vec::new(),
            endpoint_set: None,
        }
    }
}

impl ClientBuilder {
    /// Several endpoints (replicas) of one service, by base URL: each
    /// attempt goes to one of them, picked by load among the healthy ones
    /// (the power of two choices by peak-EWMA round trip × calls in
    /// flight), a retry or a hedged copy to one the call has not tried
    /// while another is eligible, and an endpoint that keeps failing is
    /// ejected for a while (outlier detection). A request's scheme, host
    /// and port become the endpoint's, its path goes under the endpoint's
    /// own: write requests against any one of them (`client.get(format!("{first}/users/7"))`).
    ///
    /// The set judges outcomes by HTTP's own model unless told otherwise
    /// ([`endpoint_set`](Self::endpoint_set)): Envoy's outlier detection
    /// ([`OutlierDetection::envoy`]: five 5xx or gateway errors in a row
    /// eject at once; a 4xx never counts, where gRFC A50, gRPC's model,
    /// counts every answer but a success). [`Client::endpoints`] shows the
    /// set. Every URL must be an absolute `http` or `https` URL with a host
    /// ([`build`](Self::build) says which one is not).
    ///
    /// ```
    /// let client = steadfast_http::Client::builder()
    ///     .endpoints(["http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083"])
    ///     .build()?;
    /// assert_eq!(client.endpoints().map(|set| set.len()), Some(3));
    /// // Sent to whichever of the three the set picks:
    /// let request = client.get("http://127.0.0.1:8081/users/7");
    /// # let _ = request;
    /// # Ok::<(), steadfast_http::BuildError>(())
    /// ```
    pub fn endpoints<I>(mut self, base_urls: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.endpoints = base_urls.into_iter().map(Into::into).collect();
        self
    }

    /// How the set of [`endpoints`](Self::endpoints) picks and ejects: its
    /// outlier detection (A50's, Envoy's, or none), panic threshold, load
    /// decay and default round trip, seed. Default: Envoy's outlier
    /// detection, the rest the set's defaults.
    ///
    /// ```
    /// use steadfast::endpoint::{Endpoints, OutlierDetection};
    /// let client = steadfast_http::Client::builder()
    ///     .endpoints(["http://127.0.0.1:8081", "http://127.0.0.1:8082"])
    ///     .endpoint_set(Endpoints::builder().outlier_detection(Some(OutlierDetection::a50().build()?)))
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn endpoint_set(mut self, set: EndpointsBuilder) -> Self {
        self.endpoint_set = Some(set);
        self
    }

    /// Attempts per call, counting the first (default 3; 1 = no retry).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    /// The backoff between attempts: any core schedule (default:
    /// exponential from 100 ms with full jitter, the core's default).
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// The longest single wait, for the schedule and for a server's
    /// `Retry-After` alike (the core's default is 5 minutes).
    pub fn max_delay(mut self, max: Duration) -> Self {
        self.max_delay = Some(max);
        self
    }

    /// The overall deadline of a call, every attempt and wait included. A
    /// wait that would end past it is not started. An ambient deadline
    /// (`steadfast::deadline::scope`) also bounds the call.
    pub fn deadline(mut self, limit: Duration) -> Self {
        self.deadline = Some(limit);
        self
    }

    /// The time limit of each attempt; one that runs out is retried.
    pub fn attempt_timeout(mut self, limit: Duration) -> Self {
        self.attempt_timeout = Some(limit);
        self
    }

    /// A retry control (budget, token bucket, throttle) shared by retries
    /// and hedges; share the same `Arc` between clients to bound them
    /// together.
    pub fn control(mut self, control: Arc<dyn RetryControl>) -> Self {
        self.control = Some(control);
        self
    }

    /// A concurrency limit: every attempt of every call (the first, each
    /// retry, each hedged copy; requests sent once too) takes one of its
    /// slots while it is in flight and gives it back when its response
    /// head arrives, it fails, or it is cancelled. Clone one limit into
    /// several clients to bound them together.
    ///
    /// An adaptive limit ([`ConcurrencyLimit::adaptive`]) learns from each
    /// attempt: a success's latency is a sample, and a sign of overload is
    /// a drop that shrinks it (with the [`DefaultClassifier`]: a 429 or
    /// 503 response, a timeout; see
    /// [`Classify::overloaded`](steadfast::Classify::overloaded)).
    ///
    /// A call whose attempt finds no slot (at once, or within the limit's
    /// [queue](steadfast::limit::ConcurrencyLimitBuilder::queue) wait)
    /// stops with [`StopReason::LimitReached`](steadfast::StopReason::LimitReached):
    /// its [`Error::reason`](crate::Error::reason) says so and
    /// [`Error::limit_refused`](crate::Error::limit_refused) names the
    /// limit and how full it was. Nothing is sent for a refused attempt.
    ///
    /// A complete [`hedge_policy`](Self::hedge_policy) gets this limit too,
    /// unless it has one of its own.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::limit::{ConcurrencyLimit, Gradient2};
    ///
    /// let limit = ConcurrencyLimit::adaptive(Gradient2::default())
    ///     .name("inventory")
    ///     .queue(64, Duration::from_millis(20))
    ///     .build()?;
    /// let client = steadfast_http::Client::builder()
    ///     .concurrency_limit(limit.clone())
    ///     .build()?;
    /// # let _ = client;
    /// assert_eq!(limit.in_flight(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn concurrency_limit(mut self, limit: ConcurrencyLimit) -> Self {
        self.concurrency = Some(limit);
        self
    }

    /// A rate limit every attempt of every call is admitted by (first,
    /// retry, hedged copy, requests sent once), shared by every clone of
    /// the client and by whatever else holds the same [`RateLimit`] (a
    /// provider's quota for the whole process). A call it has no room for
    /// is not sent: an [`Error`](crate::Error) with
    /// `reason() == StopReason::Throttled`, the limit's name in
    /// [`refused_by`](crate::Error::refused_by) and the time until it would
    /// be admitted in [`retry_after`](crate::Error::retry_after).
    ///
    /// ```
    /// use steadfast::rate::{Quota, RateLimit};
    ///
    /// let quota = RateLimit::builder().name("maps api").quota(Quota::per_second(10)?).build()?;
    /// let client = steadfast_http::Client::builder().rate_limit(quota).build()?;
    /// # let _ = client;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rate_limit(mut self, limit: RateLimit) -> Self {
        self.rate = Some((limit, Duration::ZERO));
        self
    }

    /// As [`rate_limit`](Self::rate_limit), but an attempt waits for its
    /// turn up to `max_wait` (never past the call's deadline: a turn that
    /// would come later is refused at once). Hedged copies never wait.
    pub fn rate_limit_waiting(mut self, limit: RateLimit, max_wait: Duration) -> Self {
        self.rate = Some((limit, max_wait));
        self
    }

    /// Hedges idempotent requests: up to `copies` copies (counting the
    /// first), the next one sent `delay` after the previous one (zero: all
    /// at once) or at once when a copy fails; the first success wins and
    /// the others are aborted. A fixed delay or an adaptive one
    /// ([`AdaptiveDelay`](steadfast::policy::AdaptiveDelay)). Hedged calls
    /// do not also retry: the copies are their attempts, bounded by the
    /// [`deadline`](Self::deadline) (the per-attempt timeout does not apply
    /// to them). Non-idempotent requests are never hedged; if opted in,
    /// they are retried instead.
    pub fn hedge(mut self, copies: u32, delay: impl Into<HedgeDelay>) -> Self {
        self.hedge = Some(Hedging::Copies(copies, delay.into()));
        self
    }

    /// Hedges under a complete core [`HedgePolicy`] (its own deadline and
    /// control; [`deadline`](Self::deadline) and [`control`](Self::control)
    /// are not added to it; the client's
    /// [`concurrency_limit`](Self::concurrency_limit) is, unless the policy
    /// has a limit of its own).
    pub fn hedge_policy(mut self, policy: HedgePolicy) -> Self {
        self.hedge = Some(Hedging::Policy(policy));
        self
    }

    /// The header that carries each attempt's time left (default
    /// `x-steadfast-timeout`, in the `grpc-timeout` format).
    pub fn deadline_header(mut self, header: DeadlineHeader) -> Self {
        self.header = Some(header);
        self
    }

    /// Sends no deadline header.
    pub fn no_deadline_header(mut self) -> Self {
        self.header = None;
        self
    }

    /// Retries every method, POST and PATCH included (off by default: a
    /// retried POST can pay twice).
    pub fn retry_non_idempotent(mut self, yes: bool) -> Self {
        self.retry_non_idempotent = yes;
        self
    }

    /// The header whose presence makes a request retryable whatever its
    /// method (default `Idempotency-Key`); `None` turns the rule off.
    pub fn idempotency_key_header(mut self, name: Option<HeaderName>) -> Self {
        self.idempotency_key = name;
        self
    }

    /// Over several [`endpoints`](Self::endpoints), the most times a call
    /// whose connection could not be made is *requeued*: sent at once to
    /// another endpoint without using an attempt, a POST included (it was
    /// never written). Default 3; 0 makes such a failure an ordinary
    /// retry. See [`RetryPolicyBuilder::max_requeues`](steadfast::policy::RetryPolicyBuilder::max_requeues).
    pub fn max_requeues(mut self, requeues: u32) -> Self {
        self.max_requeues = requeues;
        self
    }

    /// Sends each attempt's number (1 for the first, 2 for the first retry
    /// or hedged copy, ...) in header `name`, so that the server can tell
    /// a retry from a first attempt (gRPC sends the attempts before it in
    /// `grpc-previous-rpc-attempts`; HTTP has no standard name: pick
    /// yours). Off by default.
    ///
    /// ```
    /// use http::HeaderName;
    /// let client = steadfast_http::Client::builder()
    ///     .attempt_number_header(HeaderName::from_static("x-attempt"))
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn attempt_number_header(mut self, name: HeaderName) -> Self {
        self.attempt_header = Some(name);
        self
    }

    /// Classifies each attempt's outcome with `classify` instead of
    /// [`DefaultClassifier`]; it sees the status, the headers and the error.
    ///
    /// ```
    /// use steadfast::classify::ClassifyFn;
    /// use steadfast::Verdict;
    ///
    /// // Also retry 501, which the default treats as final.
    /// let client = steadfast_http::Client::builder()
    ///     .classify(ClassifyFn::new(|o: &steadfast_http::Outcome| match o {
    ///         Ok(r) if r.status().is_server_error() => Verdict::Retry,
    ///         Ok(_) => Verdict::Success,
    ///         Err(_) => Verdict::Retry,
    ///     }))
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn classify<K>(mut self, classify: K) -> Self
    where
        K: Classify<reqwest::Response, reqwest::Error> + Send + Sync + 'static,
    {
        self.classify = Arc::new(classify);
        self
    }

    /// Sends through this `reqwest::Client` (its pool, TLS, proxies).
    ///
    /// Build it with `.retry(reqwest::retry::never())`: reqwest's own
    /// client retries HTTP/2 GOAWAY and REFUSED_STREAM by default, and two
    /// retry layers multiply attempts. Add
    /// `.connector_layer(steadfast_http::ConnectWithinDeadline)` too, so that
    /// an attempt the deadline cuts off while connecting is known to have
    /// sent nothing ([`Error::attempts`](crate::Error::attempts)). Without
    /// this call the client builds its own, with reqwest's retries off and
    /// that connector layer.
    pub fn reqwest_client(mut self, client: reqwest::Client) -> Self {
        self.reqwest = Some(client);
        self
    }

    /// Names the client's calls in errors and telemetry.
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = Some(name);
        self
    }

    /// Calls `hook` when each attempt ends (succeeded, failed, or abandoned),
    /// with the attempt's typed [`AttemptEvent`]: its number, the wait
    /// before it, its status or transport error, the classifier's verdict
    /// and a `Retry-After` with the wait it really gets. The same facts as
    /// the attempt's `tracing` event, for code that acts on them (a progress
    /// display, a metric) rather than reads log text. The hook runs on the
    /// call's task: keep it short.
    pub fn on_attempt<F>(mut self, hook: F) -> Self
    where
        F: Fn(&AttemptEvent<'_>) + Send + Sync + 'static,
    {
        self.on_attempt = Some(OnAttempt(Arc::new(hook)));
        self
    }

    /// Injects `chaos`'s faults into every attempt, for tests (gRFC A33's
    /// client-side fault injection): a latency before the attempt is sent,
    /// slept on the client's clock, and a substituted response instead of
    /// sending it, which the client then classifies like any other (a
    /// substituted 503 with `Retry-After` is retried after that wait). A
    /// chaos is off unless turned on. reqwest's errors cannot be made, so
    /// an error fault is refused here: use a substituted response
    /// ([`chaos_response`](crate::chaos_response)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::chaos::Chaos;
    /// use steadfast_http::{Client, chaos_response};
    ///
    /// let chaos = Chaos::builder()
    ///     .enabled(cfg!(test)) // off unless asked
    ///     .latency(0.1, Duration::from_millis(50))
    ///     .outcome(0.2, || chaos_response(503, Some(Duration::from_secs(1))))
    ///     .build()?;
    /// let client = Client::builder().chaos(chaos).build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn chaos(mut self, chaos: Chaos<reqwest::Response, ()>) -> Self {
        self.chaos = Some(chaos);
        self
    }

    /// Ends every failed call with `fallback`, the outermost step: after
    /// the attempts, the waits, the limits, the deadline. It runs when the
    /// call fails for any reason but a cancellation
    /// ([`steadfast::fallback::fires`]): an exhausted `503`, a transport
    /// error, the deadline, a refusal by a limit or control, a final status
    /// such as `501`; never for a success, a cancelled call (a dropped
    /// `send` future), nor a request that could not be built.
    ///
    /// It sees a [`Failure`](crate::fallback::Failure) (the last response,
    /// or the client's [`Error`](crate::Error), and the reason and the
    /// attempts) and answers with a response, or an error: return
    /// `failure.into_result()` to decline, and the call ends as it would
    /// have without it. Any core fallback fits:
    /// [`static_response`](crate::fallback::static_response) (the same
    /// response every time), [`from_fn`](steadfast::fallback::from_fn)
    /// (computed from the failure), [`backup`](steadfast::fallback::backup)
    /// (a request to a mirror, asynchronously). Each time it runs it
    /// records the core's event ([`record_fired`](steadfast::fallback::record_fired),
    /// with the client's [`name`](Self::name)), and an answer's
    /// [`Response::ending`](crate::Response::ending) says
    /// [`fell_back`](steadfast::call::Ending::fell_back) with the failed
    /// call's attempts and stop reason. See [`crate::fallback`] for the
    /// details. A first-attempt success costs nothing more for it: the
    /// answer's future is boxed only when the fallback runs.
    ///
    /// It applies to [`build_middleware`](Self::build_middleware) too.
    ///
    /// ```
    /// use steadfast::fallback::{backup, from_fn};
    /// use steadfast_http::Client;
    /// use steadfast_http::fallback::{Failure, static_response};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // The same cached page for every failed call.
    /// let client = Client::builder()
    ///     .attempts(1)
    ///     .fallback(static_response(http::Response::new("the cached page")))
    ///     .build()?;
    /// // A port bound but not listening: the connection is refused.
    /// let closed = tokio::net::TcpSocket::new_v4()?;
    /// closed.bind("127.0.0.1:0".parse()?)?;
    /// let port = closed.local_addr()?.port();
    /// let response = client.get(format!("http://127.0.0.1:{port}/")).send().await?;
    /// assert!(response.ending().fell_back);
    /// assert_eq!(response.text().await?, "the cached page");
    ///
    /// // Computed from the failure: a busy server's last 503 becomes a
    /// // friendlier answer; anything else is declined (handed on).
    /// let busy = from_fn(|failure: Failure| match failure.response() {
    ///     Some(last) if last.status() == 503 => Ok(reqwest::Response::from(
    ///         http::Response::new(format!("busy, tried {} times", failure.attempts())),
    ///     )),
    ///     _ => failure.into_result(),
    /// });
    /// let _client = Client::builder().fallback(busy).build()?;
    ///
    /// // A backup request to a mirror (a client error converts with `?`).
    /// let mirror = Client::new();
    /// let ask_mirror = backup(move |_: Failure| {
    ///     let mirror = mirror.clone();
    ///     async move { Ok(mirror.get("http://127.0.0.1:8081/").send().await?.into_inner()) }
    /// });
    /// let _client = Client::builder().fallback(ask_mirror).build()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn fallback<F>(mut self, fallback: F) -> Self
    where
        F: AsyncFallback<reqwest::Response, Error> + Send + Sync + 'static,
        F::Future: Send + 'static,
    {
        self.fallback = Some(ClientFallback::new(fallback));
        self
    }

    /// Builds the client.
    ///
    /// # Errors
    /// A [`BuildError`] naming the setting and its rule (attempts = 0, a
    /// bad header name, ...), or reqwest's error if its client fails to
    /// build.
    pub fn build(self) -> Result<Client, BuildError> {
        let (layers, reqwest) = self.layers()?;
        let reqwest = match reqwest {
            Some(client) => client,
            None => reqwest::Client::builder()
                .retry(reqwest::retry::never())
                .connector_layer(crate::ConnectWithinDeadline)
                .build()
                .map_err(BuildError::Reqwest)?,
        };
        Ok(Client {
            shared: Arc::new(Shared {
                engine: layers.engine(reqwest),
                rules: layers.rules,
                fallback: layers.fallback,
            }),
        })
    }

    /// Builds a `reqwest-middleware` middleware with these settings (the
    /// inner `reqwest::Client`, if one was given, is not used: the
    /// middleware sends through the rest of its stack).
    ///
    /// # Errors
    /// A [`BuildError`] naming the setting and its rule.
    #[cfg(feature = "middleware")]
    pub fn build_middleware(self) -> Result<crate::middleware::RetryMiddleware, BuildError> {
        let (layers, _) = self.layers()?;
        Ok(crate::middleware::RetryMiddleware::new(layers))
    }

    /// The engine's layers and the attempt configuration.
    fn layers(self) -> Result<(Layers, Option<reqwest::Client>), BuildError> {
        let (endpoints, routes) = match self.build_endpoints()? {
            Some((set, routes)) => (Some(set), Some(routes)),
            None => (None, None),
        };
        let endpoints = endpoints.as_ref();
        let policy = self.policy(self.attempts, endpoints)?;
        let once = self.policy(1, endpoints)?;
        let hedge = match &self.hedge {
            None => None,
            Some(Hedging::Policy(p)) => {
                let mut b = p.to_builder();
                if let Some(set) = endpoints
                    && p.limits().endpoints().is_none()
                {
                    b = b.endpoints(set.clone());
                }
                if let Some(limit) = &self.concurrency
                    && p.limits().concurrency_limit().is_none()
                {
                    b = b.concurrency_limit(limit.clone());
                }
                if let Some((limit, _)) = &self.rate
                    && p.limits().rate_limit().is_none()
                {
                    b = b.rate_limit(limit.clone());
                }
                Some(b.build()?)
            }
            Some(Hedging::Copies(copies, delay)) => Some(
                HedgePolicy::builder(delay.clone())
                    .max_attempts(*copies)
                    .limits(|l| self.limits(l, endpoints))
                    .build()?,
            ),
        };
        if self
            .chaos
            .as_ref()
            .is_some_and(|c| !c.error_rate().is_never())
        {
            return Err(ConfigError::new(
                "http client",
                "chaos",
                "cannot inject errors (reqwest's cannot be made): substitute a response",
                "an error fault",
            )
            .into());
        }
        let header = match self.header {
            Some(header) => {
                let name = HeaderName::from_bytes(header.name().as_bytes()).map_err(|_| {
                    ConfigError::new(
                        "http client",
                        "deadline_header",
                        "must be a valid HTTP header name",
                        header.name().to_owned(),
                    )
                })?;
                Some((header, name))
            }
            None => None,
        };
        let attempt = Arc::new(AttemptConfig {
            classify: self.classify,
            header,
            limits: policy.limits().clone(),
            attempt_timeout: self.attempt_timeout.is_some(),
            clock: DefaultClock::default(),
            on_attempt: self.on_attempt,
            chaos: self.chaos,
            routes,
            attempt_header: self.attempt_header,
        });
        let name = self.name.unwrap_or("http");
        let layers = Layers {
            retry: RetryLayer::new(policy)
                .with_classifier(ByVerdict)
                .replay(ReqwestReplay)
                .name(name),
            once: RetryLayer::new(once)
                .with_classifier(ByVerdict)
                .replay(ReqwestReplay)
                .name(name),
            hedge: hedge.map(|p| {
                HedgeLayer::new(p)
                    .with_classifier(ByVerdict)
                    .replay(ReqwestReplay)
                    .name(name)
            }),
            attempt,
            rules: Rules {
                retry_non_idempotent: self.retry_non_idempotent,
                idempotency_key: self.idempotency_key,
            },
            fallback: self.fallback.map(|f| f.named(name)),
        };
        Ok((layers, self.reqwest))
    }

    /// The endpoint set and each endpoint's base URL, if the client has
    /// endpoints.
    #[allow(clippy::type_complexity)]
    fn build_endpoints(
        &self,
    ) -> Result<Option<(Endpoints, Arc<[(EndpointId, Url)]>)>, ConfigError> {
        if self.endpoints.is_empty() {
            return Ok(None);
        }
        let set = match &self.endpoint_set {
            Some(builder) => builder.clone(),
            None => {
                Endpoints::builder().outlier_detection(Some(OutlierDetection::envoy().build()?))
            }
        }
        .build()?;
        let now = DefaultClock::default().now();
        let mut routes = Vec::with_capacity(self.endpoints.len());
        for text in &self.endpoints {
            let url = Url::parse(text)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
                .ok_or_else(|| {
                    ConfigError::new(
                        "http client",
                        "endpoints",
                        "must be absolute http or https URLs with a host",
                        text.clone(),
                    )
                })?;
            let id = set.insert(RedactedUrl(&url).to_string(), now);
            routes.push((id, url));
        }
        Ok(Some((set, Arc::from(routes))))
    }

    fn policy(
        &self,
        attempts: u32,
        endpoints: Option<&Endpoints>,
    ) -> Result<RetryPolicy, ConfigError> {
        let mut b = RetryPolicy::builder()
            .max_attempts(attempts)
            .max_requeues(self.max_requeues)
            .limits(|l| self.limits(l, endpoints));
        if let Some(backoff) = self.backoff {
            b = b.backoff(backoff);
        }
        if let Some(d) = self.attempt_timeout {
            b = b.attempt_timeout(d);
        }
        b.build()
    }

    /// The limits every policy of the client shares: the cap on a single
    /// wait, the call's deadline, the retry control, the concurrency and
    /// rate limits, the endpoints.
    fn limits(&self, mut limits: Limits, endpoints: Option<&Endpoints>) -> Limits {
        if let Some(set) = endpoints {
            limits = limits.with_endpoints(set.clone());
        }
        if let Some(d) = self.max_delay {
            limits = limits.with_max_delay(d);
        }
        if let Some(d) = self.deadline {
            limits = limits.with_max_elapsed(d);
        }
        if let Some(c) = &self.control {
            limits = limits.with_control(Arc::clone(c));
        }
        if let Some(limit) = &self.concurrency {
            limits = limits.with_concurrency_limit(limit.clone());
        }
        if let Some((limit, max_wait)) = &self.rate {
            limits = limits.with_rate_limit_waiting(limit.clone(), *max_wait);
        }
        limits
    }
}

/// Why a [`ClientBuilder`] could not build.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting breaks a rule (the error names it).
    Config(ConfigError),
    /// reqwest could not build its client.
    Reqwest(reqwest::Error),
}

impl From<ConfigError> for BuildError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => fmt::Display::fmt(e, f),
            Self::Reqwest(_) => f.write_str("the reqwest client could not be built"),
        }
    }
}

impl StdError for BuildError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Self::Config(e) => Some(e),
            Self::Reqwest(e) => Some(e),
        }
    }
}
