//! [`BalanceFuture`]: a balanced call's response, which finishes its pick.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;
use steadfast::clock::Clock;
use steadfast::endpoint::{Judge, Picked};

use super::BalanceError;

pin_project! {
    /// The response future of a [`Balance`](super::Balance): the endpoint's
    /// own, and the pick it finishes with the outcome (dropped early, the
    /// pick only leaves the endpoint's load).
    #[must_use = "futures do nothing unless polled"]
    pub struct BalanceFuture<F, J, C> {
        #[pin]
        response: Option<F>,
        picked: Option<Picked>,
        failed: Option<BalanceError>,
        judge: Option<J>,
        clock: Option<C>,
    }
}

impl<F, J, C> BalanceFuture<F, J, C> {
    pub(super) fn new(response: F, picked: Picked, judge: J, clock: C) -> Self {
        Self {
            response: Some(response),
            picked: Some(picked),
            failed: None,
            judge: Some(judge),
            clock: Some(clock),
        }
    }

    pub(super) fn failed(error: BalanceError) -> Self {
        Self {
            response: None,
            picked: None,
            failed: Some(error),
            judge: None,
            clock: None,
        }
    }
}

impl<F, J, C, T, E> Future for BalanceFuture<F, J, C>
where
    F: Future<Output = Result<T, E>>,
    E: Into<tower::BoxError>,
    J: Judge<T, E>,
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
        if let (Some(picked), Some(judge), Some(clock)) =
            (this.picked.take(), this.judge.as_ref(), this.clock.as_ref())
        {
            let (answer, hint) = judge.judge(&outcome);
            picked.finish(answer, hint, clock.now());
        }
        Poll::Ready(outcome.map_err(|e| BalanceError::Service {
            endpoint: label.unwrap_or_else(|| Arc::from("")),
            source: e.into(),
        }))
    }
}
