use std::fmt;
use std::marker::PhantomData;

use super::{CallOptions, NotifyAsync, NotifyFn};
use crate::call::{Plain, Reported};
use crate::cancel::CancelToken;
use crate::classify::{AnyError, ClassifyFn, When};
#[cfg(doc)]
use crate::clock::SystemClock;
use crate::clock::{Clock, DefaultClock};
use crate::deadline::Deadline;
use crate::fallback::WithFallback;

/// A retried call being configured: made by
/// [`Retryable::retry`](super::Retryable::retry) (then `.await` it) or
/// [`BlockingRetryable::retry_blocking`](super::BlockingRetryable::retry_blocking)
/// (then [`call`](Self::call) it). Both executors share these options.
///
/// # A builder, not a future
/// `Retry` implements [`IntoFuture`](std::future::IntoFuture), so `.await`
/// takes it directly; where a `Future` value is needed (`join!`,
/// `select!`, `FuturesUnordered`, `spawn`), call `.into_future()`. It does
/// not implement `Future` itself because that has a cost: the builder would
/// have to carry the executor's state (the running-stage slot, the first
/// attempt's future) in every value, and check on every poll whether it was
/// still being configured. As it is, the builder is only its options, and
/// the [`RetryFuture`](super::RetryFuture) only what a call needs.
///
/// # Runtimes
/// The async executor sleeps on its clock only: the
/// [`DefaultClock`](crate::clock::DefaultClock) by default (`TokioClock` with
/// the default `tokio` feature),
/// or any [`AsyncClock`](crate::clock::AsyncClock) given with [`clock`](Self::clock)
/// (`FuturesTimerClock` and `AsyncIoClock` behind the features of those
/// names run on any executor). A clock that cannot sleep where the call runs
/// (`TokioClock` outside a tokio runtime) ends the call with
/// [`StopReason::NoTimer`](crate::call::StopReason::NoTimer), naming the features
/// to use instead, rather than letting tokio panic.
///
/// # Output
/// Awaited or called, a retry gives the call's `Result`; after
/// [`report`](Self::report) it gives a [`Report`](crate::call::Report), which
/// also says how many attempts were made, why retrying stopped (telling a
/// success from a retried `Ok` value that ran out of attempts) and how long
/// the call waited. `O` is [`Plain`] or [`Reported`].
#[must_use = "a retry does nothing until it is awaited or `.call()`ed"]
pub struct Retry<F, P, K = AnyError, N = (), C = DefaultClock, O = Plain> {
    pub(super) op: F,
    pub(super) policy: P,
    pub(super) classify: K,
    pub(super) notify: N,
    pub(super) clock: C,
    pub(super) options: CallOptions,
    pub(super) output: PhantomData<fn() -> O>,
}

impl<F, P: fmt::Debug, K: fmt::Debug, N, C: fmt::Debug, O> fmt::Debug for Retry<F, P, K, N, C, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("policy", &self.policy)
            .field("classify", &self.classify)
            .field("clock", &self.clock)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<F, P, C> Retry<F, P, AnyError, (), C> {
    pub(super) fn new(op: F, policy: P, clock: C) -> Self {
        Self {
            op,
            policy,
            classify: AnyError,
            notify: (),
            clock,
            options: CallOptions::default(),
            output: PhantomData,
        }
    }
}

impl<F, P, K, N, C, O> Retry<F, P, K, N, C, O> {
    /// Retries the errors for which `predicate` holds; any other error stops
    /// the call at once ([`StopReason::Permanent`](crate::call::StopReason::Permanent)).
    pub fn when<Pred>(self, predicate: Pred) -> Retry<F, P, When<Pred>, N, C, O> {
        self.with_classifier(When::new(predicate))
    }

    /// Classifies each whole outcome with `f`; can retry `Ok` values and
    /// honour server hints ([`Verdict::RetryAfter`](crate::call::Verdict::RetryAfter)).
    pub fn classify<G>(self, f: G) -> Retry<F, P, ClassifyFn<G>, N, C, O> {
        self.with_classifier(ClassifyFn::new(f))
    }

    /// Uses any [`Classify`](crate::classify::Classify) implementation.
    pub fn with_classifier<K2>(self, classify: K2) -> Retry<F, P, K2, N, C, O> {
        Retry {
            op: self.op,
            policy: self.policy,
            classify,
            notify: self.notify,
            clock: self.clock,
            options: self.options,
            output: PhantomData,
        }
    }

    /// Calls `hook(&notice)` before each wait, with a
    /// [`Notice`](super::Notice) of the attempt that failed, its error, the
    /// wait and the time the call has left.
    pub fn notify<H>(self, hook: H) -> Retry<F, P, K, NotifyFn<H>, C, O> {
        self.with_notify(NotifyFn::new(hook))
    }

    /// Calls `hook(&notice)` before each wait and awaits the future it
    /// returns (async executor only); see [`notify`](Self::notify).
    pub fn notify_async<H>(self, hook: H) -> Retry<F, P, K, NotifyAsync<H>, C, O> {
        self.with_notify(NotifyAsync::new(hook))
    }

    /// Uses any [`Notify`](super::Notify) implementation.
    pub fn with_notify<N2>(self, notify: N2) -> Retry<F, P, K, N2, C, O> {
        Retry {
            op: self.op,
            policy: self.policy,
            classify: self.classify,
            notify,
            clock: self.clock,
            options: self.options,
            output: PhantomData,
        }
    }

    /// Reads time and sleeps on `clock` (default: the
    /// [`DefaultClock`](crate::clock::DefaultClock), `TokioClock` with the
    /// default `tokio` feature, for the async executor, [`SystemClock`] for
    /// the blocking one).
    pub fn clock<C2: Clock>(self, clock: C2) -> Retry<F, P, K, N, C2, O> {
        Retry {
            op: self.op,
            policy: self.policy,
            classify: self.classify,
            notify: self.notify,
            clock,
            options: self.options,
            output: PhantomData,
        }
    }

    /// Stops the call promptly, even mid-wait, when `token` is cancelled.
    pub fn cancel_on(mut self, token: CancelToken) -> Self {
        self.options.cancel = Some(token);
        self
    }

    /// An overall deadline for this call (the earliest of it, the ambient
    /// deadline and the policy's `max_elapsed` holds).
    pub fn deadline(mut self, deadline: Deadline) -> Self {
        self.options.deadline = Some(deadline);
        self
    }

    /// Names the operation in errors and telemetry.
    pub fn name(mut self, name: &'static str) -> Self {
        self.options.name = Some(name);
        self
    }

    /// Gives a [`Report`](crate::call::Report) instead of the plain result: the
    /// result, the attempts made, why retrying stopped (`None` for a
    /// success, so a retried `Ok` value that ran out of attempts is told
    /// apart) and the time spent waiting. A call that succeeds at once
    /// costs the same as without it.
    ///
    /// ```
    /// use steadfast::{Attempt, RetryPolicy, Retryable, StopReason, Verdict};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), steadfast::ConfigError> {
    /// let policy = RetryPolicy::builder().max_attempts(2).build()?;
    /// let report = (|_: Attempt| async { Ok::<u16, ()>(503) })
    ///     .retry(&policy)
    ///     .classify(|r: &Result<u16, ()>| if r == &Ok(503) { Verdict::Retry } else { Verdict::Success })
    ///     .report()
    ///     .await;
    /// assert_eq!((report.attempts, report.stop), (2, Some(StopReason::Exhausted)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn report(self) -> Retry<F, P, K, N, C, Reported> {
        self.output()
    }

    /// Chooses the output form by type: [`Plain`] (the `Result`) or
    /// [`Reported`] (a [`Report`](crate::call::Report)); [`report`](Self::report)
    /// is `output::<Reported>()`. For code generic over the form, such as a
    /// tower layer that hands its caller the form the caller chose.
    ///
    /// ```
    /// use steadfast::call::Plain;
    /// use steadfast::retry::Retryable;
    /// use steadfast::{Attempt, RetryPolicy};
    /// # futures::executor::block_on(async {
    /// let policy = RetryPolicy::builder().build()?;
    /// let value = (|_: Attempt| async { Ok::<_, ()>(7) })
    ///     .retry(&policy)
    ///     .clock(steadfast::clock::VirtualClock::new())
    ///     .output::<Plain>()
    ///     .await;
    /// assert_eq!(value, Ok(7));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub fn output<O2>(self) -> Retry<F, P, K, N, C, O2> {
        Retry {
            op: self.op,
            policy: self.policy,
            classify: self.classify,
            notify: self.notify,
            clock: self.clock,
            options: self.options,
            output: PhantomData,
        }
    }

    /// Ends the call with `fallback` when it fails for any reason but a
    /// cancellation ([`fallback::fires`](crate::fallback::fires)): after
    /// the last attempt, whatever stopped the retries (attempts spent, the
    /// deadline, a breaker or a budget refusing, a permanent error). The
    /// fallback sees the final outcome and the reason
    /// ([`Failure`](crate::fallback::Failure)), and what it returns is the
    /// call's result. Give the other options first: this is the call's
    /// outermost step. The async executor takes any
    /// [`AsyncFallback`](crate::fallback::AsyncFallback) (a backup
    /// service: [`fallback::backup`](crate::fallback::backup)), the blocking
    /// one a [`Fallback`](crate::fallback::Fallback).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::fallback::{self, Failure};
    /// use steadfast::{Attempt, Backoff, RetryError, RetryPolicy, Retryable};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), steadfast::ConfigError> {
    /// let policy = RetryPolicy::builder()
    ///     .backoff(Backoff::constant(Duration::from_millis(100)).build()?)
    ///     .build()?;
    /// let price = (|_: Attempt| async { Err::<u32, _>("the primary is down") })
    ///     .retry(&policy)
    ///     .fallback(fallback::backup(|failure: Failure<u32, &'static str>| async move {
    ///         assert_eq!(failure.attempts(), 3);
    ///         Ok::<_, RetryError<&str>>(41) // from the replica
    ///     }))
    ///     .report()
    ///     .await;
    /// assert_eq!(price.result.unwrap(), 41);
    /// assert!(price.fell_back);
    /// # Ok(())
    /// # }
    /// ```
    pub fn fallback<Fb>(self, fallback: Fb) -> WithFallback<Retry<F, P, K, N, C, Reported>, Fb, O> {
        let name = self.options.name;
        WithFallback::new(self.output(), fallback, name)
    }
}
