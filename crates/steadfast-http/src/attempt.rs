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
use steadfast::Deadline;
use steadfast::chaos::{Chaos, ChaosFuture};
use steadfast::clock::{AsyncClock, Clock, DefaultClock};
use steadfast::deadline::DeadlineHeader;
use steadfast::endpoint::{Answer, EndpointId};
use steadfast::policy::{Limits, Wait};
use steadfast::{Classify, Verdict, deadline};
use tower_service::Service;

use crate::classify::Outcome;
use crate::event::{AttemptEnd, AttemptEvent, OnAttempt};
use crate::redact::RedactedUrl;

/// A shared classifier of [`Outcome`]s.
pub(crate) type SharedClassifier =
    Arc<dyn Classify<reqwest::Response, reqwest::Error> + Send + Sync>;

/// A call's request, with where its effective deadline comes from (for
/// telemetry: whether a server's hint fits it).
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) request: reqwest::Request,
    pub(crate) deadline: CallDeadline,
}

/// The call's deadline, as an attempt learns it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CallDeadline {
    /// The attempt's own (the ambient deadline while it is made): the
    /// call's, as no attempt timeout narrows it. Costs no clock read.
    OfAttempt,
    /// Worked out when the call started, because an attempt timeout makes
    /// each attempt's deadline earlier than the call's.
    Known(Option<Deadline>),
}

/// One attempt's request on its way: which attempt it is, as the core's
/// executor numbered it, and the wait before it.
#[derive(Debug)]
pub(crate) struct Sending {
    pub(crate) request: reqwest::Request,
    pub(crate) number: u32,
    pub(crate) waited: Duration,
    /// The call's deadline.
    pub(crate) deadline: CallDeadline,
    /// The endpoint the gate picked for it, under a client of several.
    pub(crate) endpoint: Option<EndpointId>,
}

/// An attempt that did not succeed: the response or error, what the
/// classifier made of it, and whether the classifier called it a sign of
/// overload (a drop signal for a concurrency limit).
#[derive(Debug)]
pub(crate) enum Failure<E> {
    /// A response the classifier did not call a success.
    Status {
        response: reqwest::Response,
        verdict: Verdict,
        overloaded: bool,
        answer: Answer,
    },
    /// The request failed on the way.
    Transport {
        error: E,
        verdict: Verdict,
        overloaded: bool,
        answer: Answer,
    },
}

impl<E> Failure<E> {
    fn answer(&self) -> Answer {
        match self {
            Self::Status { answer, .. } | Self::Transport { answer, .. } => *answer,
        }
    }

    fn verdict(&self) -> Verdict {
        match self {
            Self::Status { verdict, .. } | Self::Transport { verdict, .. } => *verdict,
        }
    }

    fn overloaded(&self) -> bool {
        match self {
            Self::Status { overloaded, .. } | Self::Transport { overloaded, .. } => *overloaded,
        }
    }
}

/// What the engine's layers classify with: the verdict each attempt already
/// got (`Ok` is a success), and the classifier's word on overload.
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

    #[inline]
    fn overloaded(&self, outcome: &Result<reqwest::Response, Failure<E>>) -> bool {
        outcome.as_ref().is_err_and(Failure::overloaded)
    }

    /// A failure's answer is the client's classifier's, worked out with
    /// its verdict; a response called a success is judged by its status
    /// ([`DefaultClassifier::answer_for_status`](crate::DefaultClassifier::answer_for_status)).
    #[inline]
    fn answer(&self, outcome: &Result<reqwest::Response, Failure<E>>, _: Verdict) -> Answer {
        match outcome {
            Ok(response) => crate::DefaultClassifier::answer_for_status(response.status()),
            Err(failure) => failure.answer(),
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

/// An attempt's send under the client's chaos (a pass-through without one).
pub(crate) type Chaotic<F, E> =
    ChaosFuture<F, <DefaultClock as AsyncClock>::Sleep, reqwest::Response, E>;

/// What every attempt of a client needs, built once.
pub(crate) struct AttemptConfig {
    pub(crate) classify: SharedClassifier,
    /// The deadline header and its name, unless propagation is off.
    pub(crate) header: Option<(DeadlineHeader, HeaderName)>,
    /// The policies' limits: what wait a server's hint really gets.
    pub(crate) limits: Limits,
    /// Whether an attempt timeout narrows each attempt's deadline.
    pub(crate) attempt_timeout: bool,
    pub(crate) clock: DefaultClock,
    pub(crate) on_attempt: Option<OnAttempt>,
    /// Faults injected into every attempt, for tests (off unless turned on).
    pub(crate) chaos: Option<Chaos<reqwest::Response, ()>>,
    /// The base URL of each endpoint, under a client of several.
    pub(crate) routes: Option<Arc<[(EndpointId, Url)]>>,
    /// The header that carries each attempt's number, if the user named one.
    pub(crate) attempt_header: Option<HeaderName>,
}

impl fmt::Debug for AttemptConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttemptConfig")
            .field("header", &self.header.as_ref().map(|(h, _)| h))
            .field("limits", &self.limits)
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

impl<S> Service<Sending> for AttemptService<S>
where
    S: Service<reqwest::Request, Response = reqwest::Response>,
    S::Error: TransportError,
{
    type Response = reqwest::Response;
    type Error = Failure<S::Error>;
    type Future = AttemptFuture<Chaotic<S::Future, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|error| Failure::Transport {
                error,
                verdict: Verdict::Stop,
                overloaded: false,
                answer: Answer::ClientError,
            })
    }

    fn call(&mut self, sending: Sending) -> Self::Future {
        let Sending {
            mut request,
            number,
            waited,
            deadline: call_deadline,
            endpoint,
        } = sending;
        let config = &self.config;
        if let (Some(routes), Some(id)) = (&config.routes, endpoint)
            && let Some((_, base)) = routes.iter().find(|(e, _)| *e == id)
        {
            rebase(request.url_mut(), base);
        }
        let ambient = deadline::current();
        let call_deadline = match call_deadline {
            CallDeadline::OfAttempt => ambient,
            CallDeadline::Known(d) => d,
        };
        if let (Some((header, name)), Some(d)) = (&config.header, ambient) {
            let text = header.encode_deadline(d, config.clock.now());
            // The encoders write ASCII digits and a unit letter only.
            if let Ok(value) = HeaderValue::from_str(text.as_str()) {
                request.headers_mut().insert(name.clone(), value);
            }
        }
        if let Some(name) = &config.attempt_header {
            request
                .headers_mut()
                .insert(name.clone(), HeaderValue::from(number));
        }
        // The URL is kept for the attempt's events only when someone listens.
        let listened = config.on_attempt.is_some() || tracing::enabled!(tracing::Level::DEBUG);
        let url = listened.then(|| request.url().clone());
        let method = request.method().clone();
        let inner = &mut self.inner;
        let call = match config.chaos.as_ref().and_then(Chaos::draw) {
            None => ChaosFuture::passing(inner.call(request)),
            Some(injection) => {
                let chaos = config.chaos.as_ref();
                let replacement = injection
                    .fault
                    .and_then(|_| chaos.and_then(Chaos::make_outcome))
                    .map(Ok);
                ChaosFuture::new(injection, &config.clock, replacement, || {
                    inner.call(request)
                })
            }
        };
        AttemptFuture {
            inner: call,
            state: Some(AttemptState {
                config: Arc::clone(config),
                call_deadline,
                number,
                waited,
                method,
                url,
            }),
        }
    }
}

/// What an attempt's future keeps for its end.
struct AttemptState {
    config: Arc<AttemptConfig>,
    call_deadline: Option<Deadline>,
    number: u32,
    waited: Duration,
    method: Method,
    url: Option<Url>,
}

pin_project! {
    /// One attempt in flight.
    pub(crate) struct AttemptFuture<F> {
        #[pin]
        inner: F,
        state: Option<AttemptState>,
    }

    impl<F> PinnedDrop for AttemptFuture<F> {
        fn drop(this: Pin<&mut Self>) {
            // Dropped before it finished: timed out, or a losing hedge.
            if let Some(state) = this.project().state.take() {
                state.hear(AttemptEnd::Abandoned);
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

impl<F> fmt::Debug for AttemptFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AttemptFuture")
            .field("done", &self.state.is_none())
            .finish_non_exhaustive()
    }
}

impl<F, E> Future for AttemptFuture<F>
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
                // Asked of failures only: a success costs one compare.
                let overloaded = verdict != Verdict::Success && classify.overloaded(&outcome);
                let answer = if verdict == Verdict::Success {
                    Answer::Ok
                } else {
                    classify.answer(&outcome, verdict)
                };
                match (outcome, verdict) {
                    (Ok(response), Verdict::Success) => Ok(response),
                    (Ok(response), verdict) => Err(Failure::Status {
                        response,
                        verdict,
                        overloaded,
                        answer,
                    }),
                    (Err(_), _) => unreachable!("the outcome was made Ok above"),
                }
            }
            Err(error) => match error.into_reqwest() {
                Ok(error) => {
                    kind = Some(error_kind(&error));
                    let outcome: Outcome = Err(error.without_url());
                    let verdict = classify.classify(&outcome);
                    let overloaded = classify.overloaded(&outcome);
                    let answer = classify.answer(&outcome, verdict);
                    match outcome {
                        Err(error) => Err(Failure::Transport {
                            error: E::from_reqwest(error),
                            verdict,
                            overloaded,
                            answer,
                        }),
                        Ok(_) => unreachable!("the outcome was made Err above"),
                    }
                }
                // A middleware's own error: not the endpoint's doing.
                Err(other) => Err(Failure::Transport {
                    error: other,
                    verdict: Verdict::Stop,
                    overloaded: false,
                    answer: Answer::ClientError,
                }),
            },
        };
        report(&state, &result, kind);
        Poll::Ready(result)
    }
}

impl AttemptState {
    /// Tells the client's hook, if it has one, how the attempt ended.
    fn hear(&self, end: AttemptEnd) {
        if let (Some(hook), Some(url)) = (&self.config.on_attempt, &self.url) {
            (hook.0)(&AttemptEvent {
                number: self.number,
                method: &self.method,
                url: RedactedUrl(url),
                waited: self.waited,
                end,
            });
        }
    }
}

/// The attempt's `tracing` event (debug for a success, info for a
/// failure) and the client's hook. Never a header: no `Authorization`,
/// `Cookie` or `Proxy-Authorization`.
fn report<E>(
    state: &AttemptState,
    result: &Result<reqwest::Response, Failure<E>>,
    kind: Option<&'static str>,
) {
    let url = state
        .url
        .as_ref()
        .map(|u| tracing::field::display(RedactedUrl(u)));
    let waited_ms = state.waited.as_millis();
    match result {
        Ok(response) => {
            tracing::debug!(
                method = %state.method,
                url,
                attempt = state.number,
                status = response.status().as_u16(),
                waited_ms,
                "steadfast-http: attempt succeeded"
            );
            state.hear(AttemptEnd::Succeeded {
                status: response.status(),
            });
        }
        Err(failure) => {
            let (status, error) = match failure {
                Failure::Status { response, .. } => (Some(response.status()), None),
                Failure::Transport { .. } => (None, Some(kind.unwrap_or("middleware error"))),
            };
            let verdict = failure.verdict();
            // The wait the hint really gets: the one rule, the deadline's
            // share included.
            let retry_after = match verdict {
                Verdict::RetryAfter(d) => Some((
                    d,
                    state
                        .config
                        .limits
                        .wait(d, state.call_deadline, state.config.clock.now()),
                )),
                _ => None,
            };
            let wait = retry_after.map(|(_, wait)| wait);
            tracing::info!(
                method = %state.method,
                url,
                attempt = state.number,
                status = status.map(|s| s.as_u16()),
                error,
                verdict = ?verdict,
                waited_ms,
                retry_after_ms = retry_after.map(|(d, _)| d.as_millis()),
                retry_after_clamped = wait.map(|w| matches!(w, Wait::Capped(_))),
                retry_after_past_deadline = wait.map(|w| w == Wait::PastDeadline),
                "steadfast-http: attempt failed"
            );
            state.hear(AttemptEnd::Failed {
                status,
                error,
                verdict,
                retry_after,
            });
        }
    }
}

/// Sends `url` to the endpoint at `base`: its scheme, host and port are
/// the endpoint's, its path goes under the endpoint's own (a base of
/// `http://10.0.0.1:8080/api` takes `/users/7` to `/api/users/7`); the
/// query and the fragment stay.
pub(crate) fn rebase(url: &mut Url, base: &Url) {
    let path = match base.path().trim_end_matches('/') {
        "" => None,
        prefix => Some(format!("{prefix}{}", url.path())),
    };
    // The base URLs are checked when the client is built: http or https
    // with a host, so none of these can fail.
    let _ = url.set_scheme(base.scheme());
    let _ = url.set_host(base.host_str());
    let _ = url.set_port(base.port());
    if let Some(path) = path {
        url.set_path(&path);
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
    } else if crate::DefaultClassifier::is_unprocessed(e) {
        "the server refused the request unprocessed (HTTP/2)"
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
