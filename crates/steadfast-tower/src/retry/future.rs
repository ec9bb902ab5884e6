use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use steadfast::backoff::Schedule;
use steadfast::call::{Finish, Lend, Plain};
use steadfast::clock::AsyncClock;
use steadfast::limit::Permit;
use steadfast::policy::gate::Ticket;
use steadfast::retry::{Retry, RetryFuture, Retryable};
use steadfast::{Attempt, Classify, RetryPolicy, Verdict};
use tower_service::Service;

use crate::attempt::{Attempts, Payload};
use crate::layer::{Launch, PolicyLayer, Runs, Setup};
use crate::policy::{CallPolicy, PolicyFor};
use crate::prepare::Stages;
use crate::replay::{Prepared, Preparing, Replay};

/// The core's retry future, run over the layer's attempts, with the output
/// form the caller chose (`O`: the `Result`, or the whole report).
type Run<S, Req, P, K, R, C, O> = RetryFuture<Attempts<S, R, Req>, CallPolicy<P>, K, (), C, O>;

/// A call run by the core, on the heap: its request being prepared, then
/// the core's retry future.
type Staged<S, Req, P, K, R, C, O> = Pin<
    Box<
        Stages<
            <R as Replay<Req>>::Prepare,
            Setup<S, Req, PolicyFor<P>, K, R, C, O>,
            Run<S, Req, P, K, R, C, O>,
        >,
    >,
>;

/// The core's call over the layer's attempts; `called`: the service was
/// called for the first attempt already (the next attempt readies it
/// again).
#[inline]
fn retry<S, Req, P, K, R, C, O, Sch>(
    setup: Setup<S, Req, PolicyFor<P>, K, R, C, O>,
    payload: Payload<R::Source, R::Request>,
    replayable: bool,
    called: bool,
) -> Retry<Attempts<S, R, Req>, CallPolicy<P>, K, (), C, O>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend<Policy = RetryPolicy<Sch>>,
    Sch: Schedule,
    C: AsyncClock,
{
    let retry = Attempts::new(setup.service, setup.replay, payload, !called)
        .retry(setup.policy.decide(replayable))
        .with_classifier(setup.classify)
        .clock(setup.clock)
        .output::<O>();
    match setup.name {
        Some(name) => retry.name(name),
        None => retry,
    }
}

impl<S, Req, P, K, R, C, O, Sch> Launch<S, Req, P, K, R, C, O> for RetryPolicy<Sch>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend<Policy = RetryPolicy<Sch>>,
    Sch: Schedule,
    K: Classify<S::Response, S::Error>,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    type Run = Run<S, Req, P, K, R, C, O>;

    #[inline]
    fn launch(
        setup: Setup<S, Req, PolicyFor<P>, K, R, C, O>,
        prepared: Prepared<R::Source, R::Request>,
    ) -> Self::Run {
        let (payload, replayable) = Payload::from_prepared(prepared);
        retry(setup, payload, replayable, false).into_future()
    }
}

/// A lean call's: the core takes over from a first attempt that did not
/// succeed.
fn resume<S, Req, P, K, R, C, O, Sch>(
    setup: Setup<S, Req, P, K, R, C, O>,
    source: R::Source,
    outcome: Result<S::Response, S::Error>,
    verdict: Verdict,
    ticket: Ticket,
) -> Run<S, Req, P, K, R, C, O>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend<Policy = RetryPolicy<Sch>>,
    Sch: Schedule,
    K: Classify<S::Response, S::Error>,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    let setup = setup.map_policy(|policy| PolicyFor::Decided(CallPolicy::Shared(policy)));
    retry(setup, Payload::Replayable(source), true, true)
        .after_first_attempt(outcome, verdict, ticket)
}

pin_project! {
    /// The future of a [`RetryService`](crate::RetryService) call.
    ///
    /// A lean call (a replayable request, a [lean](steadfast::RetryPolicy::is_lean)
    /// policy, no ambient deadline) is the service's own future for its first
    /// attempt, and one classification of the outcome: the core's retry
    /// future is made only if that attempt does not succeed, and takes over
    /// from its outcome ([`Retry::after_first_attempt`]). Any other call
    /// prepares the request for replay, then runs the core's retry future
    /// from the start.
    ///
    /// It resolves to the call's `Result` (`O` = [`Plain`], the default) or,
    /// from [`PolicyLayer::run_reported`], to the core's [`Report`](steadfast::Report).
    #[must_use = "futures do nothing unless polled"]
    pub struct ResponseFuture<S, Req, P, K, R, C, O = Plain>
    where
        R: Replay<Req>,
        S: Service<R::Request>,
        S: Clone,
        P: Lend,
        C: AsyncClock,
    {
        #[pin]
        path: Path<S, Req, P, K, R, C, O>,
    }
}

pin_project! {
    #[project = PathProj]
    enum Path<S, Req, P, K, R, C, O>
    where
        R: Replay<Req>,
        S: Service<R::Request>,
        S: Clone,
        P: Lend,
        C: AsyncClock,
    {
        /// A lean call's first attempt, and what the core needs should it
        /// not succeed (`None` once the call is over).
        Lean {
            #[pin]
            attempt: S::Future,
            // The gate's slot for the attempt (a lean policy's ticket holds
            // no pick: one word).
            slot: Option<Permit>,
            rest: Option<(Setup<S, Req, P, K, R, C, O>, R::Source)>,
        },
        /// The core's retry future, from the start or after the first
        /// attempt: on the heap, so that a lean call's future stays small.
        Core {
            stages: Staged<S, Req, P, K, R, C, O>,
        },
    }
}

impl<S, Req, P, K, R, C, O, Sch> ResponseFuture<S, Req, P, K, R, C, O>
where
    R: Replay<Req> + Clone,
    S: Service<R::Request> + Clone,
    P: Lend<Policy = RetryPolicy<Sch>> + Clone,
    Sch: Schedule,
    K: Classify<S::Response, S::Error> + Clone,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    #[inline]
    fn new(service: S, layer: &PolicyLayer<P, K, R, C>, request: Req) -> Self {
        let path = match layer.replay.prepare(request) {
            Preparing::Done(Prepared::Replayable(source))
                if layer.policy.is_lean() && steadfast::deadline::current().is_none() =>
            {
                // The gate: a call it does not admit now goes to the core,
                // which asks it again (and waits, or refuses with its
                // reason). A lean policy has no endpoint set: the
                // admission is the slot alone.
                let limits = layer.policy.shared().policy().limits();
                let Ok(slot) = limits.admit_lean(&layer.clock) else {
                    let preparing = Preparing::Done(Prepared::Replayable(source));
                    return Self {
                        path: Path::Core {
                            stages: Self::staged(service, layer, preparing),
                        },
                    };
                };
                // The readied service makes the first attempt; the future
                // keeps it for the retries, which ready it again.
                let mut service = service;
                let attempt = service.call(layer.replay.replay(&source, &Attempt::new(1)));
                let policy = layer.policy.shared().clone();
                Path::Lean {
                    attempt,
                    slot,
                    rest: Some((Setup::new(service, layer, policy), source)),
                }
            }
            preparing => Path::Core {
                stages: Self::staged(service, layer, preparing),
            },
        };
        Self { path }
    }

    /// Any call but a lean one: the core runs it from the start (out of
    /// line, so that the lean path stays small enough to inline).
    #[cold]
    #[inline(never)]
    fn staged(
        service: S,
        layer: &PolicyLayer<P, K, R, C>,
        preparing: Preparing<R::Prepare, R::Source, R::Request>,
    ) -> Staged<S, Req, P, K, R, C, O> {
        let policy = layer.policy.for_call(&preparing);
        Box::pin(Stages::new(preparing, Setup::new(service, layer, policy)))
    }
}

impl<S, Req, P, K, R, C, O> fmt::Debug for ResponseFuture<S, Req, P, K, R, C, O>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend,
    C: AsyncClock,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("ResponseFuture");
        match &self.path {
            Path::Lean { rest: Some(_), .. } => s.field("stage", &"first attempt (lean)"),
            Path::Lean { rest: None, .. } => s.field("stage", &"done"),
            Path::Core { stages } => s.field("stage", &**stages),
        };
        s.finish_non_exhaustive()
    }
}

impl<S, Req, P, K, R, C, O, Sch> Future for ResponseFuture<S, Req, P, K, R, C, O>
where
    R: Replay<Req>,
    S: Service<R::Request> + Clone,
    P: Lend<Policy = RetryPolicy<Sch>>,
    Sch: Schedule,
    K: Classify<S::Response, S::Error>,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    type Output = O::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut path = self.project().path;
        loop {
            match path.as_mut().project() {
                PathProj::Lean {
                    attempt,
                    slot,
                    rest,
                } => {
                    let Some((setup, _)) = rest.as_ref() else {
                        panic!("a layer's response future was polled after it completed");
                    };
                    let outcome = std::task::ready!(attempt.poll(cx));
                    let verdict = setup.classify.classify(&outcome);
                    let ticket = Ticket::from_slot(slot.take());
                    let (outcome, ticket) = if verdict == Verdict::Success {
                        ticket.finish(&setup.classify, verdict, &outcome, &setup.clock);
                        match outcome {
                            Ok(value) => {
                                // Over: dropped in place (not moved out).
                                *rest = None;
                                return Poll::Ready(O::first_success(value));
                            }
                            outcome => (outcome, Ticket::FREE),
                        }
                    } else {
                        // The core records where it went, then finishes it.
                        (outcome, ticket)
                    };
                    let Some((setup, source)) = rest.take() else {
                        unreachable!("checked above");
                    };
                    let run = resume(setup, source, outcome, verdict, ticket);
                    path.set(Path::Core {
                        stages: Box::pin(Stages::running(run)),
                    });
                }
                PathProj::Core { stages } => return stages.as_mut().poll(cx),
            }
        }
    }
}

impl<S, Req, P, K, R, C, O, Sch> Runs<S, Req, P, K, R, C, O> for RetryPolicy<Sch>
where
    R: Replay<Req> + Clone,
    S: Service<R::Request> + Clone,
    P: Lend<Policy = Self> + Clone,
    Sch: Schedule + Clone,
    K: Classify<S::Response, S::Error> + Clone,
    C: AsyncClock,
    O: Finish<S::Response, S::Error>,
{
    type Future = ResponseFuture<S, Req, P, K, R, C, O>;

    #[inline]
    fn run(service: S, layer: &PolicyLayer<P, K, R, C>, request: Req) -> Self::Future {
        ResponseFuture::new(service, layer, request)
    }
}
