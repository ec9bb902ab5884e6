use std::fmt;
use std::sync::Arc;

use steadfast::retry::{AsPolicy, DefaultClock};
use steadfast::{AnyError, AsyncClock, Classify, ClassifyFn, Clock, RetryPolicy, Schedule};
use tower_layer::Layer;

use super::{ResponseFuture, RetryService};
use crate::policy::RetryPolicies;
use crate::replay::CloneReplay;
use crate::replay::Replay;
use tower_service::Service;

/// Retries calls of the inner service under a core
/// [`RetryPolicy`](steadfast::RetryPolicy); see the [module docs](crate::retry).
///
/// `P` is the policy, or anything that lends one
/// ([`AsPolicy`](steadfast::retry::AsPolicy): the policy itself, an `Arc` of
/// it, a `&'static` reference); `K` the classifier (default: every `Ok` is a
/// success, every `Err` is retried); `R` how requests are replayed (default:
/// [`CloneReplay`]); `C` the clock (default: tokio's).
///
/// ```
/// use steadfast::RetryPolicy;
/// use steadfast_tower::RetryLayer;
/// use steadfast_tower::replay::HttpReplay;
///
/// let layer = RetryLayer::new(RetryPolicy::builder().max_attempts(3).build()?)
///     .replay(HttpReplay::new(16 * 1024)) // http::Requests with bodies up to 16 KiB
///     .name("users-api");
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub struct RetryLayer<P: AsPolicy, K = AnyError, R = CloneReplay, C = DefaultClock> {
    pub(super) policy: RetryPolicies<P>,
    pub(super) classify: K,
    pub(super) replay: R,
    pub(super) clock: C,
    pub(super) name: Option<&'static str>,
}

impl<P: AsPolicy + Clone, K: Clone, R: Clone, C: Clone> Clone for RetryLayer<P, K, R, C> {
    fn clone(&self) -> Self {
        Self {
            policy: self.policy.clone(),
            classify: self.classify.clone(),
            replay: self.replay.clone(),
            clock: self.clock.clone(),
            name: self.name,
        }
    }
}

impl<P: AsPolicy, K: fmt::Debug, R: fmt::Debug, C: fmt::Debug> fmt::Debug for RetryLayer<P, K, R, C>
where
    P::Schedule: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("policy", &self.policy)
            .field("classify", &self.classify)
            .field("replay", &self.replay)
            .field("clock", &self.clock)
            .field("name", &self.name)
            .finish()
    }
}

impl<S: Schedule + Clone> RetryLayer<Arc<RetryPolicy<S>>> {
    /// Retries under `policy`, every error retried, `Clone` requests
    /// replayed by cloning, on tokio's clock.
    ///
    /// The policy is kept in an `Arc`: each call takes a reference along
    /// (two uncontended atomic operations). [`lend`](Self::lend) a
    /// `&'static` policy to take a plain pointer instead.
    pub fn new(policy: RetryPolicy<S>) -> Self {
        Self::lend(Arc::new(policy))
    }
}

impl<P: AsPolicy> RetryLayer<P>
where
    P::Schedule: Clone,
{
    /// Retries under a policy lent as `P`, which each call clones and takes
    /// along: an `Arc<RetryPolicy>` (a reference count), a
    /// `&'static RetryPolicy` (a pointer: from a `static`, a `LazyLock`, or
    /// a leaked `Box`), or a `RetryPolicy` itself (a copy of the whole
    /// policy per call; the slowest). They behave the same.
    ///
    /// ```
    /// use std::sync::LazyLock;
    /// use steadfast::RetryPolicy;
    /// use steadfast_tower::RetryLayer;
    ///
    /// static POLICY: LazyLock<RetryPolicy> =
    ///     LazyLock::new(|| RetryPolicy::builder().max_attempts(3).build().expect("a valid policy"));
    /// let layer = RetryLayer::lend(&*POLICY);
    /// ```
    pub fn lend(policy: P) -> Self {
        Self {
            policy: RetryPolicies::new(policy),
            classify: AnyError,
            replay: CloneReplay,
            clock: DefaultClock::default(),
            name: None,
        }
    }
}

impl<P: AsPolicy, K, R, C> RetryLayer<P, K, R, C> {
    /// Classifies each outcome (response or error) with `f`.
    pub fn classify<F>(self, f: F) -> RetryLayer<P, ClassifyFn<F>, R, C> {
        self.with_classifier(ClassifyFn::new(f))
    }

    /// Uses any [`Classify`](steadfast::Classify) implementation.
    pub fn with_classifier<K2>(self, classify: K2) -> RetryLayer<P, K2, R, C> {
        RetryLayer {
            policy: self.policy,
            classify,
            replay: self.replay,
            clock: self.clock,
            name: self.name,
        }
    }

    /// Replays requests with `replay` (e.g. [`HttpReplay`](crate::replay::HttpReplay)).
    pub fn replay<R2>(self, replay: R2) -> RetryLayer<P, K, R2, C> {
        RetryLayer {
            policy: self.policy,
            classify: self.classify,
            replay,
            clock: self.clock,
            name: self.name,
        }
    }

    /// Reads time and sleeps on `clock`.
    pub fn clock<C2: Clock>(self, clock: C2) -> RetryLayer<P, K, R, C2> {
        RetryLayer {
            policy: self.policy,
            classify: self.classify,
            replay: self.replay,
            clock,
            name: self.name,
        }
    }

    /// Names the calls in errors and telemetry.
    #[must_use]
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = Some(name);
        self
    }
}

impl<P: AsPolicy + Clone, K: Clone, R: Clone, C: AsyncClock> RetryLayer<P, K, R, C>
where
    P::Schedule: Clone,
{
    /// Makes one call of `request` on `service` under this layer, as a
    /// [`RetryService`] does: `service` must have been readied (its
    /// `poll_ready` said `Ready(Ok)`); it makes the first attempt, and
    /// clones of it the retries. For a dispatcher that picks a layer per
    /// request (the gRPC layer picks one per method).
    pub fn run<S, Req>(&self, service: S, request: Req) -> ResponseFuture<S, Req, P, K, R, C>
    where
        R: Replay<Req>,
        S: Service<R::Request> + Clone,
        K: Classify<S::Response, S::Error>,
    {
        ResponseFuture::new(service, self, request)
    }

    /// [`run`](Self::run), resolving to the core's
    /// [`Report`](steadfast::Report) (the result, the attempts, why retrying
    /// stopped, the time waited) instead of the result alone: for a
    /// dispatcher that reports per-call telemetry (the gRPC layer's A96
    /// metrics), or must tell a retried response that ran out of attempts
    /// from a success.
    pub fn run_reported<S, Req>(
        &self,
        service: S,
        request: Req,
    ) -> ResponseFuture<S, Req, P, K, R, C, steadfast::retry::Reported>
    where
        R: Replay<Req>,
        S: Service<R::Request> + Clone,
        K: Classify<S::Response, S::Error>,
    {
        ResponseFuture::new(service, self, request)
    }
}

impl<S, P: AsPolicy + Clone, K: Clone, R: Clone, C: Clone> Layer<S> for RetryLayer<P, K, R, C> {
    type Service = RetryService<S, P, K, R, C>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryService {
            inner,
            layer: self.clone(),
        }
    }
}
