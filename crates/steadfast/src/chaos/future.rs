//! The chaos executors: [`Chaos::inject`] around one call's future (the
//! tower layer and the integrations run it), [`Chaos::inject_blocking`]
//! around a blocking call, and [`Chaotic`], an operation whose attempts
//! are injected, for the core's executors.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use pin_project_lite::pin_project;

use super::Chaos;
use super::injection::Injection;
use crate::call::{Attempt, Operation};
use crate::clock::{AsyncClock, Clock};

/// What comes after an injected latency.
#[derive(Debug)]
enum Then<Fut, T, E> {
    /// The call itself.
    Call(Fut),
    /// A fault's result, instead of the call.
    Fault(Result<T, E>),
}

pin_project! {
    #[project = StageProj]
    #[derive(Debug)]
    enum Stage<Fut, Sl, T, E> {
        // The call, with no fault: what a call the chaos drew nothing for
        // (or a chaos switched off) is, so its poll is one tag check and
        // the future is the call's own plus a tag.
        Pass { #[pin] call: Fut },
        // A call the chaos drew faults for, boxed: its timer (tokio's is
        // ~100 bytes), the fault's result and the injection are carried by
        // that call alone, not by the future every call makes.
        Injected { injected: Pin<Box<Injected<Fut, Sl, T, E>>> },
    }
}

pin_project! {
    #[project = InjectedProj]
    #[derive(Debug)]
    enum Injected<Fut, Sl, T, E> {
        // The call, after its injected latency: the injection held until
        // it ends.
        Call { #[pin] call: Fut, injection: Option<Injection> },
        // The injected latency, then the call or the fault.
        Delay { #[pin] sleep: Sl, then: Option<Then<Fut, T, E>>, injection: Option<Injection> },
        // The fault's result, instead of the call.
        Fault { result: Option<Result<T, E>>, injection: Option<Injection> },
    }
}

pin_project! {
    /// One call under a [`Chaos`]: its injected latency slept on the
    /// clock, then the call or the fault that replaces it. Dropping it
    /// ends the faults (their slot under the ceiling is given back).
    #[must_use = "futures do nothing unless polled"]
    #[derive(Debug)]
    pub struct ChaosFuture<Fut, Sl, T, E> {
        #[pin]
        stage: Stage<Fut, Sl, T, E>,
    }
}

impl<Fut, Sl, T, E> Future for ChaosFuture<Fut, Sl, T, E>
where
    Fut: Future<Output = Result<T, E>>,
    Sl: Future<Output = ()>,
{
    type Output = Result<T, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, E>> {
        match self.project().stage.project() {
            StageProj::Pass { call } => call.poll(cx),
            StageProj::Injected { injected } => poll_injected(injected.as_mut(), cx),
        }
    }
}

/// The poll of a call with faults: out of line, off the path of a call
/// without any.
#[inline(never)]
fn poll_injected<Fut, Sl, T, E>(
    mut stage: Pin<&mut Injected<Fut, Sl, T, E>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, E>>
where
    Fut: Future<Output = Result<T, E>>,
    Sl: Future<Output = ()>,
{
    loop {
        match stage.as_mut().project() {
            InjectedProj::Call { call, injection } => {
                let out = ready!(call.poll(cx));
                injection.take();
                return Poll::Ready(out);
            }
            InjectedProj::Delay {
                sleep,
                then,
                injection,
            } => {
                ready!(sleep.poll(cx));
                let injection = injection.take();
                match then.take() {
                    Some(Then::Call(call)) => stage.set(Injected::Call { call, injection }),
                    Some(Then::Fault(result)) => stage.set(Injected::Fault {
                        result: Some(result),
                        injection,
                    }),
                    None => panic!("ChaosFuture polled after it completed"),
                }
            }
            InjectedProj::Fault { result, injection } => {
                injection.take();
                return Poll::Ready(
                    result
                        .take()
                        .expect("ChaosFuture polled after it completed"),
                );
            }
        }
    }
}

impl<Fut, Sl, T, E> ChaosFuture<Fut, Sl, T, E> {
    /// The call `call`, with no fault: what an executor runs when the
    /// chaos drew nothing.
    #[inline]
    pub fn passing(call: Fut) -> Self {
        Self {
            stage: Stage::Pass { call },
        }
    }

    /// A call under the faults `injection` drew: its delay slept on
    /// `clock`, then `replacement` (the fault's result, made by the
    /// executor: a response of its protocol) or, if there is none, the
    /// future `call` makes. For executors whose fault values are not the
    /// chaos's own makers (a server answering the status a request asked
    /// for); [`Chaos::inject`] is this with the chaos's makers.
    pub fn new<C>(
        injection: Injection,
        clock: &C,
        replacement: Option<Result<T, E>>,
        call: impl FnOnce() -> Fut,
    ) -> Self
    where
        C: AsyncClock<Sleep = Sl>,
    {
        let then = match replacement {
            Some(result) => Then::Fault(result),
            None => Then::Call(call()),
        };
        let injection = Some(injection);
        let injected = match (injection.as_ref().and_then(|i| i.delay), then) {
            (Some(delay), then) => Injected::Delay {
                sleep: clock.sleep(delay),
                then: Some(then),
                injection,
            },
            (None, Then::Call(call)) => Injected::Call { call, injection },
            (None, Then::Fault(result)) => Injected::Fault {
                result: Some(result),
                injection,
            },
        };
        Self {
            stage: Stage::Injected {
                injected: Box::pin(injected),
            },
        }
    }
}

impl<T, E> Chaos<T, E> {
    /// Runs one call under the chaos: draws its faults, sleeps an injected
    /// latency on `clock`, then returns the injected fault or the future
    /// `call` makes. `call` is made only if no fault replaces it, and
    /// before the latency (a lazy future, as tower's and reqwest's are,
    /// sends nothing until the latency is over). Switched off, this is one
    /// atomic load and `call()`.
    ///
    /// A fault whose value the chaos cannot make (an outcome drawn by a
    /// header for a chaos with no outcome maker) lets the call through.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::chaos::Chaos;
    /// use steadfast::clock::VirtualClock;
    /// # futures::executor::block_on(async {
    /// let chaos = Chaos::builder()
    ///     .enabled(true)
    ///     .seed(1)
    ///     .latency(1.0, Duration::from_secs(2))
    ///     .error(1.0, || "injected")
    ///     .build()?;
    /// let clock = VirtualClock::new();
    /// let start = steadfast::clock::Clock::now(&clock);
    /// let out = chaos.inject(&clock, || async { Ok::<u32, &str>(7) }).await;
    /// assert_eq!(out, Err("injected"));
    /// assert_eq!(steadfast::clock::Clock::now(&clock) - start, Duration::from_secs(2));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// # }).unwrap();
    /// ```
    #[inline]
    pub fn inject<C, Fut>(
        &self,
        clock: &C,
        call: impl FnOnce() -> Fut,
    ) -> ChaosFuture<Fut, C::Sleep, T, E>
    where
        C: AsyncClock,
        Fut: Future<Output = Result<T, E>>,
    {
        match self.draw() {
            None => ChaosFuture::passing(call()),
            Some(injection) => self.injected(injection, clock, call),
        }
    }

    /// [`inject`](Self::inject) with faults already drawn (by
    /// [`draw_asked`](Self::draw_asked), say).
    pub fn injected<C, Fut>(
        &self,
        injection: Injection,
        clock: &C,
        call: impl FnOnce() -> Fut,
    ) -> ChaosFuture<Fut, C::Sleep, T, E>
    where
        C: AsyncClock,
        Fut: Future<Output = Result<T, E>>,
    {
        let replacement = injection.fault.and_then(|f| self.faulted(f));
        ChaosFuture::new(injection, clock, replacement, call)
    }

    /// Runs one blocking call under the chaos: an injected latency slept
    /// on `clock`, then the injected fault or `call()`.
    ///
    /// # Errors
    /// An injected error, or the call's.
    pub fn inject_blocking<C: Clock>(
        &self,
        clock: &C,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let Some(injection) = self.draw() else {
            return call();
        };
        if let Some(delay) = injection.delay {
            clock.sleep_blocking(delay);
        }
        let out = match injection.fault.and_then(|f| self.faulted(f)) {
            Some(result) => result,
            None => call(),
        };
        drop(injection);
        out
    }

    /// `op` with each attempt run under the chaos, its latencies slept on
    /// `clock`: an [`Operation`] for the async executors (retries and
    /// hedges), so a test sees its policy retry through injected faults.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::chaos::Chaos;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::{Attempt, Backoff, RetryPolicy, Retryable};
    /// # futures::executor::block_on(async {
    /// let chaos = Chaos::builder().enabled(true).seed(3).error(0.5, || "injected").build()?;
    /// let clock = VirtualClock::new();
    /// let policy = RetryPolicy::builder()
    ///     .backoff(Backoff::constant(Duration::from_millis(10)).build()?)
    ///     .max_attempts(20)
    ///     .build()?;
    /// let op = chaos.wrap(|a: Attempt| async move { Ok::<u32, &str>(a.number) }, clock.clone());
    /// let report = op.retry(&policy).clock(clock).report().await;
    /// assert_eq!(report.result, Ok(report.attempts)); // retried through the injected errors
    /// assert_eq!(chaos.stats().errors, u64::from(report.attempts - 1));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub fn wrap<Op, C>(&self, op: Op, clock: C) -> Chaotic<'_, Op, C, T, E> {
        Chaotic {
            op,
            clock,
            chaos: self,
        }
    }

    /// `f` with each attempt run under the chaos, its latencies slept on
    /// `clock`: an operation for the blocking executor. Like
    /// [`wrap`](Self::wrap), it borrows the chaos.
    pub fn wrap_blocking<C: Clock>(
        &self,
        mut f: impl FnMut(Attempt) -> Result<T, E>,
        clock: C,
    ) -> impl FnMut(Attempt) -> Result<T, E> {
        move |attempt| self.inject_blocking(&clock, || f(attempt))
    }
}

/// An operation whose attempts run under a [`Chaos`]: [`Chaos::wrap`].
///
/// It borrows the chaos, so wrapping an operation per call costs no
/// reference count (a chaos switched off then costs one relaxed load per
/// attempt). A future that must be `'static` (a spawned task) wraps inside
/// the task, borrowing a clone of the chaos it owns.
#[derive(Debug, Clone)]
pub struct Chaotic<'a, Op, C, T, E> {
    op: Op,
    clock: C,
    chaos: &'a Chaos<T, E>,
}

impl<Op, C, T, E> Operation for Chaotic<'_, Op, C, T, E>
where
    Op: Operation,
    Op::Future: Future<Output = Result<T, E>>,
    C: AsyncClock,
{
    type Future = ChaosFuture<Op::Future, C::Sleep, T, E>;

    #[inline]
    fn attempt(&mut self, attempt: Attempt) -> Self::Future {
        let op = &mut self.op;
        self.chaos.inject(&self.clock, || op.attempt(attempt))
    }
}
