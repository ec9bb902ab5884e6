//! [`ControlLayer`]: a shared retry control at the front door of a service.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pin_project_lite::pin_project;
use steadfast::call::Refused;
use steadfast::classify::{AnyError, ClassifyFn};
use steadfast::clock::{Clock, DefaultClock};
use steadfast::control::{Grant, Outcome};
use steadfast::{Classify, RetryControl};
use tower_layer::Layer;
use tower_service::Service;

/// Puts a shared [`RetryControl`] in front of a service: every call asks
/// [`admit`](RetryControl::admit) first (client-side adaptive throttling or
/// an open circuit breaker refuses here, locally, with
/// [`ControlError::Refused`], without calling the service), and every
/// outcome is [recorded](RetryControl::record), as the classifier judges it
/// and [`Outcome::of`] maps it (the rule every executor follows). A control that
/// [wants durations](RetryControl::wants_durations) (a breaker counting
/// slow calls) gets each call's, timed on the layer's clock; no other reads
/// a clock. A call dropped before it finished gives its admission back
/// ([`RetryControl::refund`]).
///
/// The same `Arc` can be the control of a [`RetryLayer`](crate::RetryLayer)'s
/// or a [`HedgeLayer`](crate::HedgeLayer)'s policy, so one budget or token
/// bucket bounds retries and hedges together. Give one control either to
/// this layer or to a policy whose calls pass through it, not both: each
/// would record the same outcome.
///
/// ```
/// use std::sync::Arc;
/// use steadfast::control::AdaptiveThrottle;
/// use steadfast_tower::ControlLayer;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let throttle = Arc::new(AdaptiveThrottle::builder().build()?);
/// let service = ServiceBuilder::new()
///     .layer(ControlLayer::new(throttle))
///     .service(service_fn(|n: u32| async move { Ok::<_, std::io::Error>(n * 2) }));
/// assert_eq!(service.oneshot(21).await?, 42);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ControlLayer<K = AnyError, C = DefaultClock> {
    control: Arc<dyn RetryControl>,
    classify: K,
    clock: C,
    /// `control.wants_durations()`, asked once.
    timed: bool,
}

impl<K: fmt::Debug, C: fmt::Debug> fmt::Debug for ControlLayer<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlLayer")
            .field("control", &self.control)
            .field("classify", &self.classify)
            .field("clock", &self.clock)
            .finish()
    }
}

impl ControlLayer {
    /// Applies `control`; every `Ok` is a success and every `Err` a
    /// retryable failure.
    pub fn new(control: Arc<dyn RetryControl>) -> Self {
        Self {
            timed: control.wants_durations(),
            control,
            classify: AnyError,
            clock: DefaultClock::default(),
        }
    }
}

impl<K, C> ControlLayer<K, C> {
    /// Judges each outcome with `f`.
    pub fn classify<F>(self, f: F) -> ControlLayer<ClassifyFn<F>, C> {
        self.with_classifier(ClassifyFn::new(f))
    }

    /// Uses any [`Classify`] implementation.
    pub fn with_classifier<K2>(self, classify: K2) -> ControlLayer<K2, C> {
        ControlLayer {
            control: self.control,
            classify,
            clock: self.clock,
            timed: self.timed,
        }
    }

    /// Times calls on `clock`, for a control that wants durations.
    pub fn clock<C2: Clock>(self, clock: C2) -> ControlLayer<K, C2> {
        ControlLayer {
            control: self.control,
            classify: self.classify,
            clock,
            timed: self.timed,
        }
    }
}

impl<S, K: Clone, C: Clone> Layer<S> for ControlLayer<K, C> {
    type Service = Control<S, K, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Control {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service a [`ControlLayer`] makes.
#[derive(Clone)]
pub struct Control<S, K = AnyError, C = DefaultClock> {
    inner: S,
    layer: ControlLayer<K, C>,
}

impl<S: fmt::Debug, K: fmt::Debug, C: fmt::Debug> fmt::Debug for Control<S, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Control")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, K, C, Req> Service<Req> for Control<S, K, C>
where
    S: Service<Req>,
    K: Classify<S::Response, S::Error> + Clone,
    C: Clock,
{
    type Response = S::Response;
    type Error = ControlError<S::Error>;
    type Future = ControlFuture<S::Future, K, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(ControlError::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let control = &self.layer.control;
        let state = match control.admit() {
            Ok(()) => State::Called {
                // Timed only for a control that asked for durations.
                started: self
                    .layer
                    .timed
                    .then(|| (self.layer.clock.clone(), self.layer.clock.now())),
                future: self.inner.call(request),
                admitted: Admitted(Some(Arc::clone(control))),
                classify: self.layer.classify.clone(),
            },
            Err(refusal) => {
                let retry_after = control.retry_after(refusal.by);
                tracing::debug!(
                    by = refusal.by,
                    ?retry_after,
                    "steadfast: call refused before it was sent"
                );
                State::Refused {
                    refused: Some(Refused::Control {
                        by: refusal.by,
                        retry_after,
                    }),
                }
            }
        };
        ControlFuture { state }
    }
}

/// An admission not yet settled: refunded if dropped unsettled.
struct Admitted(Option<Arc<dyn RetryControl>>);

impl Admitted {
    /// Records the outcome (with the call's duration, if it was timed).
    fn settle(&mut self, outcome: Option<Outcome>, took: Option<Duration>) {
        if let Some(control) = self.0.take()
            && let Some(outcome) = outcome
        {
            match took {
                Some(took) => control.record_timed(outcome, took),
                None => control.record(outcome),
            }
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(control) = self.0.take() {
            control.refund(Grant::Admit);
        }
    }
}

pin_project! {
    /// The future of a [`Control`] call.
    #[must_use = "futures do nothing unless polled"]
    pub struct ControlFuture<F, K, C = DefaultClock> {
        #[pin]
        state: State<F, K, C>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, K, C> {
        Called {
            #[pin]
            future: F,
            admitted: Admitted,
            classify: K,
            started: Option<(C, Instant)>,
        },
        Refused { refused: Option<Refused> },
    }
}

impl<F, K, C> fmt::Debug for ControlFuture<F, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.state {
            State::Called { .. } => "ControlFuture(called)",
            State::Refused { .. } => "ControlFuture(refused)",
        })
    }
}

impl<F, K, C, T, E> Future for ControlFuture<F, K, C>
where
    F: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
    C: Clock,
{
    type Output = Result<T, ControlError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called {
                future,
                admitted,
                classify,
                started,
            } => {
                let out = std::task::ready!(future.poll(cx));
                let took = started
                    .as_ref()
                    .map(|(clock, at)| clock.now().saturating_duration_since(*at));
                admitted.settle(Outcome::of(classify.classify(&out)), took);
                Poll::Ready(out.map_err(ControlError::Inner))
            }
            StateProj::Refused { refused } => {
                let Some(refused) = refused.take() else {
                    panic!("ControlFuture polled after it completed");
                };
                Poll::Ready(Err(ControlError::Refused(refused)))
            }
        }
    }
}

/// The error of a call through a [`ControlLayer`].
///
/// ```
/// use steadfast::call::Refused;
/// use steadfast_tower::ControlError;
/// let err = ControlError::<std::io::Error>::Refused(Refused::Control {
///     by: "circuit breaker",
///     retry_after: Some(std::time::Duration::from_millis(4200)),
/// });
/// assert_eq!(err.to_string(), "call not sent: refused by circuit breaker, for 4.2s more");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlError<E> {
    /// The control refused the call; the service was not called. The
    /// refusal is a [`Refused::Control`]: which control, and how long it
    /// will go on refusing when it knows (a circuit breaker's break).
    Refused(Refused),
    /// The service failed.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for ControlError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused(refused) => write!(f, "call not sent: {refused}"),
            Self::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: Error + 'static> Error for ControlError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Refused(refused) => Some(refused),
            Self::Inner(e) => Some(e),
        }
    }
}
