//! The engine a client or a middleware drives: `steadfast-tower`'s retry
//! layer (and its one-attempt twin, for requests that must not be retried)
//! and hedge layer, over one attempt service; and the rule that picks one
//! of them for a request.

use std::fmt;
use std::future::poll_fn;
use std::sync::Arc;

use http::HeaderName;
use steadfast::retry::DefaultClock;
use steadfast::{HedgePolicy, RetryPolicy};
use steadfast_tower::{HedgeLayer, HedgeService, RetryLayer, RetryService};
use tower_layer::Layer;
use tower_service::Service;

use crate::attempt::{AttemptConfig, AttemptService, ByVerdict, Tracked, TransportError};
use crate::classify::is_idempotent;
use crate::error::{Error, Last, NotRetried};
use crate::replay::{ReqwestReplay, is_replayable};
use crate::report::{Report, Tracker};

type Retry = RetryLayer<Arc<RetryPolicy>, ByVerdict, ReqwestReplay, DefaultClock>;
type Hedge = HedgeLayer<HedgePolicy, ByVerdict, ReqwestReplay, DefaultClock>;

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
}

impl fmt::Debug for Layers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Layers")
            .field("retry", &self.retry)
            .field("hedge", &self.hedge)
            .field("attempt", &self.attempt)
            .field("rules", &self.rules)
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
            hedge: self.hedge.as_ref().map(|h| h.layer(attempts.clone())),
            retry: self.retry.layer(attempts.clone()),
            once: self.once.layer(attempts),
        }
    }
}

/// The services a call runs on.
#[derive(Clone)]
pub(crate) struct Engine<S> {
    retry:
        RetryService<AttemptService<S>, Arc<RetryPolicy>, ByVerdict, ReqwestReplay, DefaultClock>,
    once: RetryService<AttemptService<S>, Arc<RetryPolicy>, ByVerdict, ReqwestReplay, DefaultClock>,
    hedge: Option<
        HedgeService<AttemptService<S>, HedgePolicy, ByVerdict, ReqwestReplay, DefaultClock>,
    >,
}

impl<S> Engine<S> {
    /// The service attempts are sent on.
    pub(crate) fn inner(&self) -> &S {
        &self.retry.get_ref().inner
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
    ) -> Result<(reqwest::Response, Report), Error> {
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
        let tracker = Tracker::default();
        let tracked = Tracked {
            request,
            tracker: &tracker,
        };
        match (&self.hedge, retryable && idempotent) {
            (Some(hedge), true) => {
                let result = call(hedge.clone(), tracked).await;
                let report = tracker.report(true);
                match result {
                    Ok(response) => Ok((response, report)),
                    Err(e) => {
                        Err(Error::from_hedge(method, e, report).sent_once_if(streaming, why_once))
                    }
                }
            }
            _ => {
                let service = if retryable { &self.retry } else { &self.once };
                let result = call(service.clone(), tracked).await;
                let report = tracker.report(false);
                match result {
                    Ok(response) => Ok((response, report)),
                    Err(e) => {
                        let e = Error::from_retry(method, e, report);
                        Err(if retryable {
                            e.sent_once_if(streaming, why_once)
                        } else {
                            e.sent_once(NotRetried::NotIdempotent)
                        })
                    }
                }
            }
        }
    }
}

/// Readies `service` (the tower contract), then calls it.
async fn call<S: Service<R>, R>(mut service: S, request: R) -> Result<S::Response, S::Error> {
    poll_fn(|cx| service.poll_ready(cx)).await?;
    service.call(request).await
}
