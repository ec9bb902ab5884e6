//! The engine a client or a middleware drives: `steadfast-tower`'s retry
//! layer (and its one-attempt twin, for requests that must not be retried)
//! and hedge layer, over one attempt service; and the rule that picks one
//! of them for a request.

use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;

use http::HeaderName;
use steadfast::RetryError;
use steadfast::call::{Ending, Lend, Reported};
use steadfast::clock::{Clock, DefaultClock};
use steadfast::{Deadline, HedgePolicy, RetryPolicy, deadline};
use steadfast_tower::layer::Runs;
use steadfast_tower::replay::Replay;
use steadfast_tower::{HedgeLayer, HedgeService, PolicyService, RetryLayer, RetryService};
use tower_layer::Layer;
use tower_service::Service;

use crate::attempt::{
    AttemptConfig, AttemptService, ByVerdict, Call, CallDeadline, TransportError,
};
use crate::classify::is_idempotent;
use crate::error::{Error, Last, NotRetried};
use crate::fallback::ClientFallback;
use crate::replay::{ReqwestReplay, is_replayable};

type Retry = RetryLayer<Arc<RetryPolicy>, ByVerdict, ReqwestReplay, DefaultClock>;
type Hedge = HedgeLayer<Arc<HedgePolicy>, ByVerdict, ReqwestReplay, DefaultClock>;

/// Which requests may be sent more than once.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub(crate) retry_non_idempotent: bool,
    pub(crate) idempotency_key: Option<HeaderName>,
}

/// The layers and the attempt configuration, built once.
#[derive(Clone)]
pub(crate) struct Layers {
    pub(crate) retry: Retry,
    pub(crate) once: Retry,
    pub(crate) hedge: Option<Hedge>,
    pub(crate) attempt: Arc<AttemptConfig>,
    pub(crate) rules: Rules,
    /// The outermost step: what a failed call hands back.
    pub(crate) fallback: Option<ClientFallback>,
}

impl fmt::Debug for Layers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layers")
            .field("retry", &self.retry)
            .field("hedge", &self.hedge)
            .field("attempt", &self.attempt)
            .field("rules", &self.rules)
            .field("fallback", &self.fallback)
            .finish()
    }
}

impl Layers {
    /// The engine over `inner`.
    pub(crate) fn engine<S: Clone>(&self, inner: S) -> Engine<S> {
        let attempts = AttemptService {
            inner,
            config: Arc::clone(&self.attempt),
        };
        Engine {
            attempt: Arc::clone(&self.attempt),
            hedge: self.hedge.as_ref().map(|h| h.layer(attempts.clone())),
            retry: self.retry.layer(attempts.clone()),
            once: self.once.layer(attempts),
        }
    }
}

/// A call's services: retrying, hedging.
type Retrying<S> =
    RetryService<AttemptService<S>, Arc<RetryPolicy>, ByVerdict, ReqwestReplay, DefaultClock>;
type Hedging<S> =
    HedgeService<AttemptService<S>, Arc<HedgePolicy>, ByVerdict, ReqwestReplay, DefaultClock>;

/// The services a call runs on.
#[derive(Clone)]
pub(crate) struct Engine<S> {
    retry: Retrying<S>,
    once: Retrying<S>,
    hedge: Option<Hedging<S>>,
    attempt: Arc<AttemptConfig>,
}

impl<S> Engine<S> {
    /// The service attempts are sent on.
    pub(crate) fn inner(&self) -> &S {
        &self.retry.get_ref().inner
    }

    /// The endpoint set the attempts are spread over, if any.
    pub(crate) fn endpoints(&self) -> Option<&steadfast::endpoint::Endpoints> {
        self.retry.get_ref().config.limits.endpoints()
    }

    /// Whether hedging is on.
    pub(crate) fn hedges(&self) -> bool {
        self.hedge.is_some()
    }
}

impl<S> Engine<S>
where
    S: Service<reqwest::Request, Response = reqwest::Response> + Clone,
    S::Error: TransportError + Into<Last>,
{
    /// Runs one call: hedged if hedging is on and the method is
    /// idempotent, retried if the request may be sent again, else sent
    /// once. `why_once` is what the error says if the body turns out to be
    /// a stream that cannot be sent again.
    pub(crate) async fn run(
        &self,
        rules: &Rules,
        request: reqwest::Request,
        retry_anyway: Option<bool>,
        why_once: NotRetried,
    ) -> Result<(reqwest::Response, Ending, Option<Deadline>), Error> {
        let method = request.method().clone();
        let idempotent = is_idempotent(&method);
        let retryable = retry_anyway.unwrap_or_else(|| {
            idempotent
                || rules.retry_non_idempotent
                || rules
                    .idempotency_key
                    .as_ref()
                    .is_some_and(|k| request.headers().contains_key(k))
        });
        let streaming = !is_replayable(&request);
        // The call's deadline, for telemetry only (whether a server's hint
        // fits it): each attempt's own unless an attempt timeout narrows
        // it; then by the policies' own rule, here (the executor works out
        // its own).
        let config = &self.attempt;
        // The call's own, which also bounds reading the response's body
        // (the clock is read only for a policy with a `max_elapsed`).
        let (call_deadline, _) = config
            .limits
            .deadline(deadline::current(), || config.clock.now());
        let deadline = if config.attempt_timeout {
            CallDeadline::Known(call_deadline)
        } else {
            CallDeadline::OfAttempt
        };
        let call = Call { request, deadline };
        let (result, ending) = match (&self.hedge, retryable && idempotent) {
            (Some(hedge), true) => reported(hedge.clone(), call).await,
            _ => {
                reported(
                    if retryable { &self.retry } else { &self.once }.clone(),
                    call,
                )
                .await
            }
        };
        match result {
            Ok(response) => Ok((response, ending, call_deadline)),
            Err(e) => {
                let e = Error::from_call(method, e, ending);
                Err(if retryable {
                    e.sent_once_if(streaming, why_once)
                } else {
                    e.sent_once(NotRetried::NotIdempotent)
                })
            }
        }
    }
}

/// Readies `service` (the tower contract), then makes the call, reported:
/// its result and how it ended.
async fn reported<S, P, R, K, C, Req>(
    mut service: PolicyService<S, P, K, R, C>,
    request: Req,
) -> (Result<S::Response, RetryError<S::Error>>, Ending)
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend,
    P::Policy: Runs<S, Req, P, K, R, C, Reported>,
    PolicyService<S, P, K, R, C>: Service<Req, Error = RetryError<S::Error>>,
{
    if let Err(e) = poll_fn(|cx| service.poll_ready(cx)).await {
        // Not ready: no attempt was made.
        return (Err(e), Ending::default());
    }
    let report = service.call_reported(request).await;
    let ending = report.ending();
    (report.result, ending)
}
