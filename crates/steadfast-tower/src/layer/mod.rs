//! [`PolicyLayer`]: the one layer that retries and hedges. The policy it is
//! given says which: a [`RetryPolicy`](steadfast::RetryPolicy) retries, a
//! [`HedgePolicy`](steadfast::HedgePolicy) hedges. [`RetryLayer`](crate::RetryLayer)
//! and [`HedgeLayer`](crate::HedgeLayer) are its two names, so everything a
//! layer does (classify, replay, clock, name, readiness, the one-attempt
//! twin for requests sent once, the error and the report) is written once;
//! what differs, the executor a call runs, is [`Runs`].

mod runs;
mod service;
mod setup;

use std::fmt;
use std::sync::Arc;

use steadfast::call::{Lend, Plain, Reported};
use steadfast::classify::{AnyError, ClassifyFn};
use steadfast::clock::{Clock, DefaultClock};
use steadfast::policy::Policy;
use tower_layer::Layer;
use tower_service::Service;

pub use runs::Runs;
pub use service::PolicyService;
pub(crate) use setup::{Launch, Setup};

use crate::policy::Policies;
use crate::replay::{CloneReplay, Replay};

/// Runs calls of the inner service under a core policy: retries them
/// under a [`RetryPolicy`](steadfast::RetryPolicy), hedges them under a
/// [`HedgePolicy`](steadfast::HedgePolicy). Known by those two uses as
/// [`RetryLayer`](crate::RetryLayer) and [`HedgeLayer`](crate::HedgeLayer);
/// see [`retry`](crate::retry) and [`hedge`](crate::hedge).
///
/// `P` is the policy, or anything that lends one ([`Lend`]: an `Arc` of
/// it, a `&'static` reference, the policy itself); `K` the classifier
/// (default: every `Ok` is a success, every `Err` is retried, or for a
/// hedge non-fatal); `R` how requests are replayed (default:
/// [`CloneReplay`]); `C` the clock (default: tokio's;
/// [`PreciseClock`](crate::PreciseClock) for hedging delays of a few
/// milliseconds, which tokio rounds up to its 1 ms tick).
///
/// ```
/// use std::time::Duration;
/// use steadfast::{HedgePolicy, RetryPolicy};
/// use steadfast_tower::replay::HttpReplay;
/// use steadfast_tower::{HedgeLayer, RetryLayer};
///
/// let retry = RetryLayer::new(RetryPolicy::builder().max_attempts(3).build()?)
///     .replay(HttpReplay::new(16 * 1024)) // http::Requests with bodies up to 16 KiB
///     .name("users-api");
/// let hedge = HedgeLayer::new(HedgePolicy::builder(Duration::from_millis(20)).build()?)
///     .name("users-api");
/// # let _ = (retry, hedge);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct PolicyLayer<P: Lend, K = AnyError, R = CloneReplay, C = DefaultClock> {
    pub(crate) policy: Policies<P>,
    pub(crate) classify: K,
    pub(crate) replay: R,
    pub(crate) clock: C,
    pub(crate) name: Option<&'static str>,
}

impl<P: Lend, K: fmt::Debug, R: fmt::Debug, C: fmt::Debug> fmt::Debug for PolicyLayer<P, K, R, C>
where
    P::Policy: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyLayer")
            .field("policy", &self.policy)
            .field("classify", &self.classify)
            .field("replay", &self.replay)
            .field("clock", &self.clock)
            .field("name", &self.name)
            .finish()
    }
}

impl<T: Policy> PolicyLayer<Arc<T>> {
    /// Runs calls under `policy`: every error retried (or, for a hedge,
    /// non-fatal), `Clone` requests replayed by cloning, on tokio's clock.
    ///
    /// The policy is kept in an `Arc`: each call takes a reference along
    /// (two uncontended atomic operations). [`lend`](Self::lend) a
    /// `&'static` policy to take a plain pointer instead.
    pub fn new(policy: T) -> Self {
        Self::lend(Arc::new(policy))
    }
}

impl<P: Lend> PolicyLayer<P>
where
    P::Policy: Policy,
{
    /// Runs calls under a policy lent as `P`, which each call clones and
    /// takes along: an `Arc` of the policy (a reference count), a
    /// `&'static` reference (a pointer: from a `static`, a `LazyLock`, or a
    /// leaked `Box`), or the policy itself (a copy of the whole policy per
    /// call; the slowest). They behave the same.
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
            policy: Policies::new(policy),
            classify: AnyError,
            replay: CloneReplay,
            clock: DefaultClock::default(),
            name: None,
        }
    }
}

impl<P: Lend, K, R, C> PolicyLayer<P, K, R, C> {
    /// Classifies each outcome (response or error) with `f`. For a hedge:
    /// `Success` wins, `Retry` is non-fatal (the next copy goes at once),
    /// `RetryAfter(d)` is a pushback (the next copy waits `d`), `Stop` is
    /// fatal.
    pub fn classify<F>(self, f: F) -> PolicyLayer<P, ClassifyFn<F>, R, C> {
        self.with_classifier(ClassifyFn::new(f))
    }

    /// Uses any [`Classify`](steadfast::Classify) implementation.
    pub fn with_classifier<K2>(self, classify: K2) -> PolicyLayer<P, K2, R, C> {
        PolicyLayer {
            policy: self.policy,
            classify,
            replay: self.replay,
            clock: self.clock,
            name: self.name,
        }
    }

    /// Replays requests with `replay` (e.g. [`HttpReplay`](crate::replay::HttpReplay)).
    pub fn replay<R2>(self, replay: R2) -> PolicyLayer<P, K, R2, C> {
        PolicyLayer {
            policy: self.policy,
            classify: self.classify,
            replay,
            clock: self.clock,
            name: self.name,
        }
    }

    /// Reads time and sleeps on `clock`.
    pub fn clock<C2: Clock>(self, clock: C2) -> PolicyLayer<P, K, R, C2> {
        PolicyLayer {
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

    /// Makes one call of `request` on `service` under this layer, as a
    /// [`PolicyService`] does: `service` must have been readied (its
    /// `poll_ready` said `Ready(Ok)`); it makes the first attempt, and
    /// clones of it the others. For a dispatcher that picks a layer per
    /// request (the gRPC layer picks one per method).
    pub fn run<S, Req>(
        &self,
        service: S,
        request: Req,
    ) -> <P::Policy as Runs<S, Req, P, K, R, C, Plain>>::Future
    where
        R: Replay<Req>,
        S: Service<R::Request>,
        P::Policy: Runs<S, Req, P, K, R, C, Plain>,
    {
        <P::Policy as Runs<S, Req, P, K, R, C, Plain>>::run(service, self, request)
    }

    /// [`run`](Self::run), resolving to the core's
    /// [`Report`](steadfast::Report) (the result, the attempts, why the
    /// call stopped, the time waited, and for a hedge the copies' stats)
    /// instead of the result alone: for a dispatcher that reports per-call
    /// telemetry (the gRPC layer's A96 metrics), or must tell a retried
    /// response that ran out of attempts from a success.
    pub fn run_reported<S, Req>(
        &self,
        service: S,
        request: Req,
    ) -> <P::Policy as Runs<S, Req, P, K, R, C, Reported>>::Future
    where
        R: Replay<Req>,
        S: Service<R::Request>,
        P::Policy: Runs<S, Req, P, K, R, C, Reported>,
    {
        <P::Policy as Runs<S, Req, P, K, R, C, Reported>>::run(service, self, request)
    }
}

impl<S, P: Lend + Clone, K: Clone, R: Clone, C: Clone> Layer<S> for PolicyLayer<P, K, R, C> {
    type Service = PolicyService<S, P, K, R, C>;

    fn layer(&self, inner: S) -> Self::Service {
        PolicyService {
            inner,
            layer: self.clone(),
        }
    }
}
