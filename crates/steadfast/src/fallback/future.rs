//! [`WithFallback`], an executor's builder with a fallback, and the future
//! it becomes.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use super::{AsyncFallback, Failure, fires, record_fired};
use crate::call::{Ending, Finish, Plain, Report, Reported};

/// An executor's builder (a [`Retry`](crate::retry::Retry) or a
/// [`Hedge`](crate::hedge::Hedge), switched to run reported) with a
/// fallback after it: made by their `.fallback(f)`. Awaited (or, for a
/// blocking retry, `.call()`ed) it runs the call and, if the call failed
/// for any reason but a cancellation ([`fires`]), the fallback.
///
/// `O` is the output form the caller chose: the `Result` ([`Plain`]) or a
/// [`Report`] whose [`fell_back`](Report::fell_back) says whether the
/// fallback answered ([`report`](Self::report)).
#[derive(Debug, Clone)]
#[must_use = "a call with a fallback does nothing until awaited or called"]
pub struct WithFallback<X, F, O = Plain> {
    pub(crate) inner: X,
    pub(crate) fallback: F,
    pub(crate) name: Option<&'static str>,
    output: PhantomData<fn() -> O>,
}

impl<X, F, O> WithFallback<X, F, O> {
    /// `inner`, an executor's builder that runs reported, with `fallback`
    /// after it; `name` labels the event a fallback records.
    pub fn new(inner: X, fallback: F, name: Option<&'static str>) -> Self {
        Self {
            inner,
            fallback,
            name,
            output: PhantomData,
        }
    }

    /// Resolves to a [`Report`] of the call, which says whether the
    /// fallback answered.
    pub fn report(self) -> WithFallback<X, F, Reported> {
        WithFallback::new(self.inner, self.fallback, self.name)
    }
}

pin_project! {
    #[project = StateProj]
    enum State<Fut, Ff> {
        Running { #[pin] call: Fut },
        FallingBack { #[pin] answer: Ff, ending: Ending },
        Done,
    }
}

pin_project! {
    /// The future of a call with a fallback ([`WithFallback`] awaited).
    /// Dropping it cancels the call, or the fallback if it is running.
    #[must_use = "futures do nothing unless polled"]
    pub struct FallbackFuture<Fut, F, Ff, O> {
        #[pin]
        state: State<Fut, Ff>,
        fallback: F,
        name: Option<&'static str>,
        output: PhantomData<fn() -> O>,
    }
}

impl<X, F, O, T, E> IntoFuture for WithFallback<X, F, O>
where
    X: IntoFuture<Output = Report<T, E>>,
    F: AsyncFallback<T, E>,
    O: Finish<T, E>,
{
    type Output = O::Output;
    type IntoFuture = FallbackFuture<X::IntoFuture, F, F::Future, O>;

    #[inline]
    fn into_future(self) -> Self::IntoFuture {
        FallbackFuture {
            state: State::Running {
                call: self.inner.into_future(),
            },
            fallback: self.fallback,
            name: self.name,
            output: PhantomData,
        }
    }
}

impl<Fut, F, O, T, E> Future for FallbackFuture<Fut, F, F::Future, O>
where
    Fut: Future<Output = Report<T, E>>,
    F: AsyncFallback<T, E>,
    O: Finish<T, E>,
{
    type Output = O::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Running { call } => {
                    let report = ready!(call.poll(cx));
                    match fall_back(report, *this.name) {
                        Next::Done(report) => {
                            this.state.set(State::Done);
                            return Poll::Ready(O::from_report(report));
                        }
                        Next::FallBack(failure, ending) => {
                            let answer = this.fallback.fall_back_async(failure);
                            this.state.set(State::FallingBack { answer, ending });
                        }
                    }
                }
                StateProj::FallingBack { answer, ending } => {
                    let result = ready!(answer.poll(cx));
                    let ending = *ending;
                    this.state.set(State::Done);
                    return Poll::Ready(O::finish(result, || ending));
                }
                StateProj::Done => panic!("FallbackFuture polled after it completed"),
            }
        }
    }
}

/// What follows a call with a fallback.
pub(crate) enum Next<T, E> {
    /// The call's own report: the fallback does not fire.
    Done(Report<T, E>),
    /// The failure to give the fallback, and the ending its answer goes
    /// out with.
    FallBack(Failure<T, E>, Ending),
}

/// The one step every executor takes at the end of a call with a fallback:
/// the report itself when the fallback does not fire, else the failure to
/// give it and the ending its answer goes out with (the event recorded).
#[inline]
pub(crate) fn fall_back<T, E>(report: Report<T, E>, name: Option<&'static str>) -> Next<T, E> {
    if !fires(report.stop) {
        return Next::Done(report);
    }
    let mut ending = report.ending();
    record_fired(name, &ending);
    ending.fell_back = true;
    Next::FallBack(Failure::from_report(report), ending)
}
