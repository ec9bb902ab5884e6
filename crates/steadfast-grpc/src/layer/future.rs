//! [`GrpcFuture`]: the future of one call through a [`GrpcService`](super::GrpcService).

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use steadfast::call::Reported;
use steadfast::clock::AsyncClock;
use steadfast::deadline::CancelCause;
use steadfast::{Backoff, Deadline, HedgePolicy, Report, RetryPolicy, deadline};
use steadfast_tower::deadline::SetDeadlineHeader;
use steadfast_tower::{hedge, retry};
use tower_service::Service;

use crate::chaos::{AttemptFuture, StatusResponse};
use crate::fallback::{FallbackBody, FallbackFn, Finished, LaterAnswer, answered, finish};
use crate::metrics::Extra;
use crate::{Code, GrpcClassify, GrpcReplay};

use super::BoxError;
use super::answer::{answer, status_response};
use super::service::{Inner, Labels, Outgoing};

pin_project! {
    /// The future of a [`GrpcService`] call.
    #[must_use = "futures do nothing unless polled"]
    pub struct GrpcFuture<S, C, B>
    where
        S: Service<Outgoing<B>>,
        S: Clone,
        S::Response: StatusResponse,
        B: Body<Data = Bytes>,
        B: Unpin,
        C: AsyncClock,
    {
        #[pin]
        pub(super) kind: Kind<S, C, B>,
        // The request's own deadline, ambient around every poll.
        pub(super) deadline: Option<Deadline>,
        // The call's effective deadline (its own, the method's timeout,
        // the ambient one): a failure that arrives at or after it is the
        // deadline's doing.
        pub(super) due: Option<Deadline>,
        pub(super) clock: C,
        // The call's span: every poll runs inside it.
        pub(super) span: tracing::Span,
        // Method and target, for the metrics of a retried or hedged call.
        pub(super) labels: Option<Labels>,
        // The layer's fallback, asked once a retried or hedged call failed.
        pub(super) fallback: Option<Arc<FallbackFn>>,
        // An async fallback answering: the call's own result (returned if
        // it declines) and the answer's future.
        pub(super) answering: Option<(Result<S::Response, BoxError>, LaterAnswer)>,
    }
}

pin_project! {
    #[project = KindProj]
    pub(super) enum Kind<S, C, B>
    where
        S: Service<Outgoing<B>>,
        S: Clone,
        S::Response: StatusResponse,
        B: Body<Data = Bytes>,
        B: Unpin,
        C: AsyncClock,
    {
        Retry { #[pin] future: retry::ResponseFuture<Inner<S, C>, Request<B>, Arc<RetryPolicy<Backoff>>, GrpcClassify, GrpcReplay, C, Reported> },
        Hedge { #[pin] future: hedge::ResponseFuture<Inner<S, C>, Request<B>, Arc<HedgePolicy>, GrpcClassify, GrpcReplay, C, Reported> },
        Plain { #[pin] future: AttemptFuture<SetDeadlineHeader<S, C>, Outgoing<B>, C::Sleep> },
    }
}

impl<S, C, B> fmt::Debug for GrpcFuture<S, C, B>
where
    S: Service<Outgoing<B>> + Clone,
    S::Response: StatusResponse,
    B: Body<Data = Bytes> + Unpin,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            Kind::Retry { .. } => "GrpcFuture(retrying)",
            Kind::Hedge { .. } => "GrpcFuture(hedging)",
            Kind::Plain { .. } => "GrpcFuture(plain)",
        })
    }
}

impl<S, C, B, ResBody> Future for GrpcFuture<S, C, B>
where
    S: Service<Outgoing<B>, Response = Response<ResBody>> + Clone,
    S::Error: Error + Send + Sync + 'static,
    B: Body<Data = Bytes> + Unpin,
    ResBody: Default + From<FallbackBody>,
    C: AsyncClock,
{
    type Output = Result<Response<ResBody>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let kind = this.kind;
        let clock = &*this.clock;
        let due = *this.due;
        let labels = this.labels.as_ref();
        let fallback = this.fallback.as_ref();
        // The call's answer, then its fallback's if it failed (outermost:
        // after the retries or hedges, and after the layer's own answer).
        let method = labels
            .and_then(|l| l.method.as_ref())
            .map_or("", |m| m.path());
        let end = move |report: Report<Response<ResBody>, S::Error>| {
            let ending = report.ending();
            finish(answer(report, due, clock.now()), &ending, fallback, method)
        };
        let answering = this.answering;
        if let Some((_, later)) = answering.as_mut() {
            let answer = std::task::ready!(later.as_mut().poll(cx));
            return match answering.take() {
                Some((out, _)) => Poll::Ready(answered(out, answer)),
                None => Poll::Pending,
            };
        }
        let poll = move |cx: &mut Context<'_>| match kind.project() {
            KindProj::Retry { future } => future.poll(cx).map(|report| {
                if let Some(labels) = labels {
                    labels.record(Extra::Retries {
                        retries: report.attempts.saturating_sub(1),
                        delay: report.waited,
                    });
                }
                end(report)
            }),
            KindProj::Hedge { future } => future.poll(cx).map(|report| {
                if let Some(labels) = labels {
                    labels.record(Extra::Hedges {
                        hedges: report.hedge.map_or(0, |stats| stats.hedges()),
                    });
                }
                end(report)
            }),
            KindProj::Plain { future } => future.poll(cx).map(|out| {
                Finished::Done(match out {
                    Ok(response) => Ok(response),
                    // A call cut off once its deadline had passed (tonic's channel
                    // enforces the `grpc-timeout` it sends, and reports
                    // CANCELLED) is DEADLINE_EXCEEDED, as gRPC reports it.
                    Err(e) => match CancelCause::classify(deadline::current(), clock.now()) {
                        CancelCause::DeadlineExceeded => {
                            Ok(status_response(Code::DeadlineExceeded, "deadline exceeded"))
                        }
                        CancelCause::Cancelled => Err(e.into()),
                    },
                })
            }),
        };
        let finished = std::task::ready!(match *this.deadline {
            Some(d) => deadline::scope(d, || poll(&mut *cx)),
            None => poll(&mut *cx),
        });
        match finished {
            Finished::Done(out) => Poll::Ready(out),
            // An async fallback's answer, outside the failed call's
            // deadline (which may be why it failed).
            Finished::Answering { out, mut answer } => match answer.as_mut().poll(cx) {
                Poll::Ready(answer) => Poll::Ready(answered(out, answer)),
                Poll::Pending => {
                    *answering = Some((out, answer));
                    Poll::Pending
                }
            },
        }
    }
}
