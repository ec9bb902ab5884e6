//! One attempt on the wire: the service the retry and hedge layers of
//! `steadfast-tower` drive. It writes the attempt's time left into the
//! deadline header, sends the request, classifies the outcome once, emits
//! the attempt's `tracing` event, and turns an outcome that is not a
//! success into an `Err` carrying its verdict, so the engine's error keeps
//! the last response or transport error.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderName, HeaderValue, Method};
use pin_project_lite::pin_project;
use reqwest::Url;
use steadfast::deadline::{self, DeadlineHeader};
use steadfast::retry::DefaultClock;
use steadfast::{Classify, Clock, Verdict};
use tower_service::Service;

use crate::classify::Outcome;
use crate::redact::RedactedUrl;
use crate::report::Tracker;

/// A shared classifier of [`Outcome`]s.
pub(crate) type SharedClassifier =
    Arc<dyn Classify<reqwest::Response, reqwest::Error> + Send + Sync>;

/// A request on its way, with the counters of the call it belongs to.
#[derive(Debug)]
pub(crate) struct Tracked<'a> {
    pub(crate) request: reqwest::Request,
    pub(crate) tracker: &'a Tracker,
}

/// An attempt that did not succeed: the response or error, and what the
/// classifier made of it.
#[derive(Debug)]
pub(crate) enum Failure<E> {
    /// A response the classifier did not call a success.
    Status {
        response: reqwest::Response,
        verdict: Verdict,
    },
    /// The request failed on the way.
    Transport { error: E, verdict: Verdict },
}

impl<E> Failure<E> {
    fn verdict(&self) -> Verdict {
        match self {
            Self::Status { verdict, .. } | Self::Transport { verdict, .. } => *verdict,
        }
    }
}

/// What the engine's layers classify with: the verdict each attempt already
/// got (`Ok` is a success).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ByVerdict;

impl<E> Classify<reqwest::Response, Failure<E>> for ByVerdict {
    #[inline]
    fn classify(&self, outcome: &Result<reqwest::Response, Failure<E>>) -> Verdict {
        match outcome {
            Ok(_) => Verdict::Success,
            Err(failure) => failure.verdict(),
        }
    }
}

/// An inner service's error, as far as it is a `reqwest::Error` the
/// classifier can judge.
pub(crate) trait TransportError: Sized {
    /// The `reqwest::Error` inside, or `self` back if it is something else
    /// (a middleware's own error, which is never retried).
    fn into_reqwest(self) -> Result<reqwest::Error, Self>;
    /// Wraps a `reqwest::Error` again.
    fn from_reqwest(error: reqwest::Error) -> Self;
}

impl TransportError for reqwest::Error {
    #[inline]
    fn into_reqwest(self) -> Result<reqwest::Error, Self> {
        Ok(self)
    }

    #[inline]
    fn from_reqwest(error: reqwest::Error) -> Self {
        error
    }
}

/// What every attempt of a client needs, built once.
pub(crate) struct AttemptConfig {
    pub(crate) classify: SharedClassifier,
    /// The deadline header and its name, unless propagation is off.
    pub(crate) header: Option<(DeadlineHeader, HeaderName)>,
    /// The policy's `max_delay`, to tell whether a hint was clamped.
    pub(crate) max_delay: Duration,
    pub(crate) clock: DefaultClock,
}

impl fmt::Debug for AttemptConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttemptConfig")
            .field("header", &self.header.as_ref().map(|(h, _)| h))
            .field("max_delay", &self.max_delay)
            .finish_non_exhaustive()
    }
}

/// Sends one attempt on `S` (a `reqwest::Client`, or the rest of a
/// middleware stack).
#[derive(Clone)]
pub(crate) struct AttemptService<S> {
    pub(crate) inner: S,
    pub(crate) config: Arc<AttemptConfig>,
}

impl<S> fmt::Debug for AttemptService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttemptService")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<'a, S> Service<Tracked<'a>> for AttemptService<S>
where
    S: Service<reqwest::Request, Response = reqwest::Response>,
    S::Error: TransportError,
{
    type Response = reqwest::Response;
    type Error = Failure<S::Error>;
    type Future = AttemptFuture<'a, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|error| Failure::Transport {
                error,
                verdict: Verdict::Stop,
            })
    }

    fn call(&mut self, tracked: Tracked<'a>) -> Self::Future {
        let Tracked {
            mut request,
            tracker,
        } = tracked;
        let config = &self.config;
        if let (Some((header, name)), Some(d)) = (&config.header, deadline::current()) {
            let text = header.encode_deadline(d, config.clock.now());
            // The encoders write ASCII digits and a unit letter only.
            if let Ok(value) = HeaderValue::from_str(text.as_str()) {
                request.headers_mut().insert(name.clone(), value);
            }
        }
        let (number, waited) = tracker.start(&config.clock);
        // The URL is kept for the attempt's event only when someone listens.
        let url = tracing::enabled!(tracing::Level::DEBUG).then(|| request.url().clone());
        let method = request.method().clone();
        AttemptFuture {
            inner: self.inner.call(request),
            state: Some(AttemptState {
                tracker,
                config: Arc::clone(config),
                number,
                waited,
                method,
                url,
            }),
        }
    }
}

/// What an attempt's future keeps for its end.
struct AttemptState<'a> {
    tracker: &'a Tracker,
    config: Arc<AttemptConfig>,
    number: u32,
    waited: Duration,
    method: Method,
    url: Option<Url>,
}

pin_project! {
    /// One attempt in flight.
    pub(crate) struct AttemptFuture<'a, F> {
        #[pin]
        inner: F,
        state: Option<AttemptState<'a>>,
    }

    impl<'a, F> PinnedDrop for AttemptFuture<'a, F> {
        fn drop(this: Pin<&mut Self>) {
            // Dropped before it finished: timed out, or a losing hedge.
            if let Some(state) = this.project().state.take() {
                state.tracker.end(false, &state.config.clock);
                tracing::debug!(
                    method = %state.method,
                    url = state.url.as_ref().map(|u| tracing::field::display(RedactedUrl(u))),
                    attempt = state.number,
                    "steadfast-http: attempt abandoned (timed out, or another copy won)"
                );
            }
        }
    }
}

impl<F> fmt::Debug for AttemptFuture<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttemptFuture")
            .field("done", &self.state.is_none())
            .finish_non_exhaustive()
    }
}

impl<F, E> Future for AttemptFuture<'_, F>
where
    F: Future<Output = Result<reqwest::Response, E>>,
    E: TransportError,
{
    type Output = Result<reqwest::Response, Failure<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let out = std::task::ready!(this.inner.poll(cx));
        let Some(state) = this.state.take() else {
            panic!("an attempt's future was polled after it completed");
        };
        let classify = &state.config.classify;
        let mut kind = None;
        let result = match out {
            Ok(response) => {
                let outcome: Outcome = Ok(response);
                let verdict = classify.classify(&outcome);
                match (outcome, verdict) {
                    (Ok(response), Verdict::Success) => Ok(response),
                    (Ok(response), verdict) => Err(Failure::Status { response, verdict }),
                    (Err(_), _) => unreachable!("the outcome was made Ok above"),
                }
            }
            Err(error) => match error.into_reqwest() {
                Ok(error) => {
                    kind = Some(error_kind(&error));
                    let outcome: Outcome = Err(error.without_url());
                    let verdict = classify.classify(&outcome);
                    match outcome {
                        Err(error) => Err(Failure::Transport {
                            error: E::from_reqwest(error),
                            verdict,
                        }),
                        Ok(_) => unreachable!("the outcome was made Err above"),
                    }
                }
                Err(other) => Err(Failure::Transport {
                    error: other,
                    verdict: Verdict::Stop,
                }),
            },
        };
        let success = result.is_ok();
        state.tracker.end(success, &state.config.clock);
        report(&state, &result, kind);
        Poll::Ready(result)
    }
}

/// The attempt's `tracing` event: debug for a success, info for a failure.
/// Never a header: no `Authorization`, `Cookie` or `Proxy-Authorization`.
fn report<E>(
    state: &AttemptState<'_>,
    result: &Result<reqwest::Response, Failure<E>>,
    kind: Option<&'static str>,
) {
    let url = state
        .url
        .as_ref()
        .map(|u| tracing::field::display(RedactedUrl(u)));
    let waited_ms = state.waited.as_millis();
    match result {
        Ok(response) => tracing::debug!(
            method = %state.method,
            url,
            attempt = state.number,
            status = response.status().as_u16(),
            waited_ms,
            "steadfast-http: attempt succeeded"
        ),
        Err(failure) => {
            let (status, error) = match failure {
                Failure::Status { response, .. } => (Some(response.status().as_u16()), None),
                Failure::Transport { .. } => (None, Some(kind.unwrap_or("middleware error"))),
            };
            let verdict = failure.verdict();
            let (retry_after_ms, clamped) = match verdict {
                Verdict::RetryAfter(d) => (Some(d.as_millis()), Some(d > state.config.max_delay)),
                _ => (None, None),
            };
            tracing::info!(
                method = %state.method,
                url,
                attempt = state.number,
                status,
                error,
                verdict = ?verdict,
                waited_ms,
                retry_after_ms,
                retry_after_clamped = clamped,
                "steadfast-http: attempt failed"
            );
        }
    }
}

/// What kind of transport failure an error is, for telemetry (the error's
/// own message may hold the URL).
fn error_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() {
        "request body failed"
    } else if e.is_request() {
        "connection closed or reset before the response"
    } else if e.is_builder() {
        "the request could not be built"
    } else if e.is_redirect() {
        "redirect failed"
    } else {
        "transport error"
    }
}
