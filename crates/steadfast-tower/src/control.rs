//! [`ControlLayer`]: a shared retry control at the front door of a service.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use steadfast::control::{Grant, Outcome, Refusal};
use steadfast::{AnyError, Classify, ClassifyFn, RetryControl, Verdict};
use tower_layer::Layer;
use tower_service::Service;

/// Puts a shared [`RetryControl`] in front of a service: every call asks
/// [`admit`](RetryControl::admit) first (client-side adaptive throttling
/// refuses here, locally, with [`ControlError::Refused`], without calling
/// the service), and every outcome is [recorded](RetryControl::record), as
/// the classifier judges it (`Success` as a success, `Retry`/`RetryAfter`
/// as a retryable failure, `Stop` not at all). A call dropped before it
/// finished gives its admission back ([`RetryControl::refund`]).
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
pub struct ControlLayer<K = AnyError> {
    control: Arc<dyn RetryControl>,
    classify: K,
}

impl<K: fmt::Debug> fmt::Debug for ControlLayer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControlLayer")
            .field("control", &self.control)
            .field("classify", &self.classify)
            .finish()
    }
}

impl ControlLayer {
    /// Applies `control`; every `Ok` is a success and every `Err` a
    /// retryable failure.
    pub fn new(control: Arc<dyn RetryControl>) -> Self {
        Self {
            control,
            classify: AnyError,
        }
    }
}

impl<K> ControlLayer<K> {
    /// Judges each outcome with `f`.
    pub fn classify<F>(self, f: F) -> ControlLayer<ClassifyFn<F>> {
        self.with_classifier(ClassifyFn::new(f))
    }

    /// Uses any [`Classify`] implementation.
    pub fn with_classifier<K2>(self, classify: K2) -> ControlLayer<K2> {
        ControlLayer {
            control: self.control,
            classify,
        }
    }
}

impl<S, K: Clone> Layer<S> for ControlLayer<K> {
    type Service = Control<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        Control {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service a [`ControlLayer`] makes.
#[derive(Clone)]
pub struct Control<S, K = AnyError> {
    inner: S,
    layer: ControlLayer<K>,
}

impl<S: fmt::Debug, K: fmt::Debug> fmt::Debug for Control<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Control")
            .field("inner", &self.inner)
            .field("layer", &self.layer)
            .finish()
    }
}

impl<S, K, Req> Service<Req> for Control<S, K>
where
    S: Service<Req>,
    K: Classify<S::Response, S::Error> + Clone,
{
    type Response = S::Response;
    type Error = ControlError<S::Error>;
    type Future = ControlFuture<S::Future, K>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(ControlError::Inner)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let control = &self.layer.control;
        let state = match control.admit() {
            Ok(()) => State::Called {
                future: self.inner.call(request),
                admitted: Admitted(Some(Arc::clone(control))),
                classify: self.layer.classify.clone(),
            },
            Err(refusal) => {
                tracing::debug!(
                    by = refusal.by,
                    "steadfast: call refused before it was sent"
                );
                State::Refused {
                    refusal: Some(refusal),
                }
            }
        };
        ControlFuture { state }
    }
}

/// An admission not yet settled: refunded if dropped unsettled.
struct Admitted(Option<Arc<dyn RetryControl>>);

impl Admitted {
    fn settle(&mut self, outcome: Option<Outcome>) {
        if let Some(control) = self.0.take()
            && let Some(outcome) = outcome
        {
            control.record(outcome);
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
    pub struct ControlFuture<F, K> {
        #[pin]
        state: State<F, K>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, K> {
        Called { #[pin] future: F, admitted: Admitted, classify: K },
        Refused { refusal: Option<Refusal> },
    }
}

impl<F, K> fmt::Debug for ControlFuture<F, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.state {
            State::Called { .. } => "ControlFuture(called)",
            State::Refused { .. } => "ControlFuture(refused)",
        })
    }
}

impl<F, K, T, E> Future for ControlFuture<F, K>
where
    F: Future<Output = Result<T, E>>,
    K: Classify<T, E>,
{
    type Output = Result<T, ControlError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called {
                future,
                admitted,
                classify,
            } => {
                let out = std::task::ready!(future.poll(cx));
                admitted.settle(match classify.classify(&out) {
                    Verdict::Success => Some(Outcome::Success),
                    Verdict::Retry | Verdict::RetryAfter(_) => Some(Outcome::RetryableFailure),
                    Verdict::Stop => None,
                });
                Poll::Ready(out.map_err(ControlError::Inner))
            }
            StateProj::Refused { refusal } => Poll::Ready(Err(ControlError::Refused(
                refusal.take().unwrap_or(Refusal {
                    by: "retry control",
                }),
            ))),
        }
    }
}

/// The error of a call through a [`ControlLayer`].
///
/// ```
/// use steadfast::control::Refusal;
/// use steadfast_tower::ControlError;
/// let err = ControlError::<std::io::Error>::Refused(Refusal { by: "adaptive throttle" });
/// assert_eq!(err.to_string(), "call not sent: refused by adaptive throttle");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlError<E> {
    /// The control refused the call; the service was not called.
    Refused(Refusal),
    /// The service failed.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for ControlError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused(refusal) => write!(f, "call not sent: {refusal}"),
            Self::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: Error + 'static> Error for ControlError<E> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Refused(refusal) => Some(refusal),
            Self::Inner(e) => Some(e),
        }
    }
}
