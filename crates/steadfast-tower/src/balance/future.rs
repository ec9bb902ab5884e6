//! [`BalanceFuture`]: a balanced call's response, which finishes its pick.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use steadfast::Classify;
use steadfast::clock::Clock;
use steadfast::endpoint::Picked;

use super::BalanceError;

pin_project! {
    /// The response future of a [`Balance`](super::Balance): the endpoint's
    /// own, and the pick it finishes with the outcome (dropped early, the
    /// pick only leaves the endpoint's load).
    #[must_use = "futures do nothing unless polled"]
    pub struct BalanceFuture<F, K, C> {
        #[pin]
        response: Option<F>,
        picked: Option<Picked>,
        failed: Option<BalanceError>,
        classify: Option<K>,
        clock: Option<C>,
    }
}

impl<F, K, C> BalanceFuture<F, K, C> {
    pub(super) fn new(response: F, picked: Picked, classify: K, clock: C) -> Self {
        Self {
            response: Some(response),
            picked: Some(picked),
            failed: None,
            classify: Some(classify),
            clock: Some(clock),
        }
    }

    pub(super) fn failed(error: BalanceError) -> Self {
        Self {
            response: None,
            picked: None,
            failed: Some(error),
            classify: None,
            clock: None,
        }
    }
}

impl<F, K, C, T, E> Future for BalanceFuture<F, K, C>
where
    F: Future<Output = Result<T, E>>,
    E: Into<tower::BoxError>,
    K: Classify<T, E>,
    C: Clock,
{
    type Output = Result<T, BalanceError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(response) = this.response.as_pin_mut() else {
            let error = this.failed.take().unwrap_or(BalanceError::NoEndpoint);
            return Poll::Ready(Err(error));
        };
        let outcome = ready!(response.poll(cx));
        let label: Option<Arc<str>> = this.picked.as_ref().map(|p| Arc::clone(p.label()));
        if let (Some(picked), Some(classify), Some(clock)) = (
            this.picked.take(),
            this.classify.as_ref(),
            this.clock.as_ref(),
        ) {
            let verdict = classify.classify(&outcome);
            picked.judge(classify, verdict, &outcome, clock.now());
        }
        Poll::Ready(outcome.map_err(|e| BalanceError::Service {
            endpoint: label.unwrap_or_else(|| Arc::from("")),
            source: e.into(),
        }))
    }
}
