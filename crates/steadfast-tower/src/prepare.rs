//! The two stages every replaying layer's call goes through: prepare the
//! request for replay, then run the core's executor over its attempts.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::replay::{NotReplayable, Prepared, Preparing};

/// Starts a layer's executor once its request is prepared.
pub(crate) trait Start<Src, Req> {
    /// The executor's future.
    type Run: Future;

    /// The executor for `prepared`: all attempts from a replayable source,
    /// or one attempt of a request that can be sent only once.
    fn start(self, prepared: Prepared<Src, Req>) -> Self::Run;

    /// The executor's output for a request that was sent once (the core's
    /// `Finish::sent_once`).
    fn sent_once(output: <Self::Run as Future>::Output) -> <Self::Run as Future>::Output;
}

pin_project! {
    /// Prepares the request (`P`), then runs what `S` starts.
    #[project = StagesProj]
    pub(crate) enum Stages<P, S, R> {
        Preparing {
            #[pin]
            prepare: P,
            start: Option<S>,
        },
        Running {
            #[pin]
            run: R,
            once: Option<NotReplayable>,
        },
    }
}

impl<P, S, R> Stages<P, S, R> {
    /// A call of a replayable request whose run is under way already.
    #[inline]
    pub(crate) fn running(run: R) -> Self {
        Self::Running { run, once: None }
    }

    /// Starts at once when the request is prepared already (a `Clone`
    /// request, a body-less one), else once it is.
    #[inline]
    pub(crate) fn new<Src, Req>(preparing: Preparing<P, Src, Req>, start: S) -> Self
    where
        S: Start<Src, Req, Run = R>,
    {
        match preparing {
            Preparing::Done(prepared) => {
                let once = once(&prepared);
                Self::Running {
                    run: start.start(prepared),
                    once,
                }
            }
            Preparing::Reading(prepare) => Self::Preparing {
                prepare,
                start: Some(start),
            },
        }
    }
}

/// Why a prepared request is sent once, if it is.
#[inline]
fn once<Src, Req>(prepared: &Prepared<Src, Req>) -> Option<NotReplayable> {
    match prepared {
        Prepared::Replayable(_) => None,
        Prepared::Once(_, why) => Some(sent_once(*why)),
    }
}

/// Says, once per call, that a request is sent once; out of the way of the
/// replayable path.
#[cold]
#[inline(never)]
fn sent_once(why: NotReplayable) -> NotReplayable {
    tracing::debug!(why = %why, "steadfast: the request cannot be replayed; sending it once");
    why
}

impl<P, S, R> fmt::Debug for Stages<P, S, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Preparing { .. } => "preparing the request",
            Self::Running { once: None, .. } => "running",
            Self::Running { once: Some(_), .. } => "running once (not replayable)",
        })
    }
}

impl<P, S, R, Src, Req> Future for Stages<P, S, R>
where
    P: Future<Output = Prepared<Src, Req>>,
    S: Start<Src, Req, Run = R>,
    R: Future,
{
    type Output = R::Output;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project() {
                StagesProj::Preparing { prepare, start } => {
                    let prepared = std::task::ready!(prepare.poll(cx));
                    let Some(start) = start.take() else {
                        panic!("a layer's response future was polled after it completed");
                    };
                    let once = once(&prepared);
                    let run = start.start(prepared);
                    self.set(Self::Running { run, once });
                }
                StagesProj::Running { run, once } => {
                    let out = std::task::ready!(run.poll(cx));
                    return Poll::Ready(match once {
                        Some(_) => S::sent_once(out),
                        None => out,
                    });
                }
            }
        }
    }
}
