use std::borrow::Borrow;
use std::fmt;

use steadfast::retry::DefaultClock;
use steadfast::{AnyError, AsyncClock, Classify, ClassifyFn, Clock, HedgePolicy};
use tower_layer::Layer;

use super::{HedgeService, ResponseFuture};
use crate::policy::HedgePolicies;
use crate::replay::CloneReplay;
use crate::replay::Replay;
use tower_service::Service;

/// Hedges calls of the inner service under a core
/// [`HedgePolicy`](steadfast::HedgePolicy); see the [module docs](crate::hedge).
///
/// `P` is the policy (or an `Arc` of it, anything that borrows as one); `K`
/// the classifier (default: every `Ok` wins, every `Err` is non-fatal); `R`
/// how requests are replayed (default [`CloneReplay`]); `C` the clock
/// (default tokio's; [`PreciseClock`](crate::PreciseClock) for hedging
/// delays of a few milliseconds, which tokio rounds up to its 1 ms tick).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use steadfast::HedgePolicy;
/// use steadfast::hedge::AdaptiveDelay;
/// use steadfast_tower::{HedgeLayer, PreciseClock};
///
/// // Hedge once a call is slower than 99 % of recent ones (5 ms until that is known).
/// let delay = Arc::new(AdaptiveDelay::builder(Duration::from_millis(5)).quantile(0.99).build()?);
/// let layer = HedgeLayer::new(HedgePolicy::builder(delay).max_attempts(2).build()?)
///     .clock(PreciseClock::new().expect("the timer thread starts"));
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub struct HedgeLayer<P, K = AnyError, R = CloneReplay, C = DefaultClock> {
    pub(super) policy: HedgePolicies<P>,
    pub(super) classify: K,
    pub(super) replay: R,
    pub(super) clock: C,
    pub(super) name: Option<&'static str>,
}

impl<P, K: Clone, R: Clone, C: Clone> Clone for HedgeLayer<P, K, R, C> {
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

impl<P: Borrow<HedgePolicy>, K: fmt::Debug, R: fmt::Debug, C: fmt::Debug> fmt::Debug
    for HedgeLayer<P, K, R, C>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("policy", &self.policy)
            .field("classify", &self.classify)
            .field("replay", &self.replay)
            .field("clock", &self.clock)
            .field("name", &self.name)
            .finish()
    }
}

impl<P: Borrow<HedgePolicy>> HedgeLayer<P> {
    /// Hedges under `policy`; every `Ok` wins and every `Err` is non-fatal,
    /// `Clone` requests are replayed by cloning, on tokio's clock.
    ///
    /// The policy is kept behind an `Arc` (with its single-copy twin, for
    /// requests that cannot be replayed), so a call copies a pointer.
    pub fn new(policy: P) -> Self {
        Self {
            policy: HedgePolicies::new(policy),
            classify: AnyError,
            replay: CloneReplay,
            clock: DefaultClock::default(),
            name: None,
        }
    }
}

impl<P, K, R, C> HedgeLayer<P, K, R, C> {
    /// Classifies each copy's outcome with `f`: `Success` wins, `Retry` is
    /// non-fatal (the next copy goes at once), `RetryAfter(d)` is a pushback
    /// (the next copy waits `d`), `Stop` is fatal.
    pub fn classify<F>(self, f: F) -> HedgeLayer<P, ClassifyFn<F>, R, C> {
        self.with_classifier(ClassifyFn::new(f))
    }

    /// Uses any [`Classify`](steadfast::Classify) implementation.
    pub fn with_classifier<K2>(self, classify: K2) -> HedgeLayer<P, K2, R, C> {
        HedgeLayer {
            policy: self.policy,
            classify,
            replay: self.replay,
            clock: self.clock,
            name: self.name,
        }
    }

    /// Replays requests with `replay` (e.g. [`HttpReplay`](crate::replay::HttpReplay)).
    pub fn replay<R2>(self, replay: R2) -> HedgeLayer<P, K, R2, C> {
        HedgeLayer {
            policy: self.policy,
            classify: self.classify,
            replay,
            clock: self.clock,
            name: self.name,
        }
    }

    /// Reads time and sleeps on `clock`.
    pub fn clock<C2: Clock>(self, clock: C2) -> HedgeLayer<P, K, R, C2> {
        HedgeLayer {
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

impl<P: Borrow<HedgePolicy>, K: Clone, R: Clone, C: AsyncClock> HedgeLayer<P, K, R, C> {
    /// Makes one hedged call of `request` on `service` under this layer, as
    /// a [`HedgeService`] does: `service` must have been readied (its
    /// `poll_ready` said `Ready(Ok)`); it sends the first copy, and clones
    /// of it the others. For a dispatcher that picks a layer per request.
    pub fn run<S, Req>(&self, service: S, request: Req) -> ResponseFuture<S, Req, P, K, R, C>
    where
        R: Replay<Req>,
        S: Service<R::Request> + Clone,
        K: Classify<S::Response, S::Error>,
    {
        ResponseFuture::new(service, self, request)
    }

    /// [`run`](Self::run), resolving to the core's
    /// [`HedgeReport`](steadfast::hedge::HedgeReport) (the result, the
    /// copies' stats, why the call stopped) instead of the result alone:
    /// for a dispatcher that reports per-call telemetry (the gRPC layer's
    /// A96 metrics).
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

impl<S, P, K: Clone, R: Clone, C: Clone> Layer<S> for HedgeLayer<P, K, R, C> {
    type Service = HedgeService<S, P, K, R, C>;

    fn layer(&self, inner: S) -> Self::Service {
        HedgeService {
            inner,
            layer: self.clone(),
        }
    }
}
