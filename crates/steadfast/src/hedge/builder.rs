use std::fmt;
use std::marker::PhantomData;

use crate::call::{HedgeStats, Lend, Operation, Plain, Reported};
use crate::cancel::CancelToken;
use crate::classify::{AnyError, ClassifyFn, When};
use crate::clock::{Clock, DefaultClock};
use crate::deadline::Deadline;
use crate::fallback::WithFallback;
use crate::policy::HedgePolicy;

/// A hook called once when a hedged call ends, with what it sent. `()` does
/// nothing; [`FinishFn`] wraps a closure (made by [`Hedge::on_finish`]).
pub trait OnFinish {
    /// Called once, when the call ends (success or not).
    fn on_finish(&mut self, stats: &HedgeStats);
}

impl OnFinish for () {
    #[inline]
    fn on_finish(&mut self, _: &HedgeStats) {}
}

/// An [`OnFinish`] hook from a closure.
///
/// ```
/// use steadfast::hedge::{FinishFn, OnFinish};
/// use steadfast::call::HedgeStats;
/// let mut sent = 0;
/// let mut hook = FinishFn::new(|s: &HedgeStats| sent += s.sent);
/// let mut stats = HedgeStats::default();
/// stats.sent = 2;
/// hook.on_finish(&stats);
/// drop(hook);
/// assert_eq!(sent, 2);
/// ```
#[derive(Clone, Copy)]
pub struct FinishFn<F>(F);

impl<F> FinishFn<F> {
    /// A hook that calls `f`.
    pub const fn new(f: F) -> Self {
        Self(f)
    }
}

impl<F> fmt::Debug for FinishFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FinishFn(..)")
    }
}

impl<F: FnMut(&HedgeStats)> OnFinish for FinishFn<F> {
    #[inline]
    fn on_finish(&mut self, stats: &HedgeStats) {
        (self.0)(stats);
    }
}

/// A hedged call being configured: made by [`Hedgeable::hedge`], then
/// `.await`ed (it becomes a [`HedgeFuture`](super::HedgeFuture)).
///
/// `P` is anything that [lends](Lend) a [`HedgePolicy`]: the policy, a
/// reference or an `Arc`.
#[must_use = "a hedged call does nothing until it is awaited"]
///
/// Awaited, it gives the call's `Result`; after [`report`](Self::report), a
/// [`Report`](crate::call::Report) (the result, why the call stopped, and
/// the copies' [`HedgeStats`]). `O` is [`Plain`] or [`Reported`].
pub struct Hedge<F, P, K = AnyError, H = (), C = DefaultClock, O = Plain> {
    pub(super) output: PhantomData<fn() -> O>,
    pub(super) op: F,
    pub(super) policy: P,
    pub(super) classify: K,
    pub(super) clock: C,
    pub(super) on_finish: H,
    pub(super) cancel: Option<CancelToken>,
    pub(super) deadline: Option<Deadline>,
    pub(super) name: Option<&'static str>,
}

impl<F, P: fmt::Debug, K: fmt::Debug, H, C: fmt::Debug, O> fmt::Debug for Hedge<F, P, K, H, C, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedge")
            .field("policy", &self.policy)
            .field("classify", &self.classify)
            .field("clock", &self.clock)
            .field("cancel", &self.cancel)
            .field("deadline", &self.deadline)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<F, P, K, H, C, O> Hedge<F, P, K, H, C, O> {
    /// Treats the errors for which `predicate` holds as non-fatal (the next
    /// copy goes at once); any other error is fatal and ends the call.
    pub fn when<Pred>(self, predicate: Pred) -> Hedge<F, P, When<Pred>, H, C, O> {
        self.with_classifier(When::new(predicate))
    }

    /// Classifies each copy's whole outcome with `f`: `Success` wins,
    /// `Retry` is non-fatal, `RetryAfter(d)` is pushback, `Stop` is fatal.
    pub fn classify<G>(self, f: G) -> Hedge<F, P, ClassifyFn<G>, H, C, O> {
        self.with_classifier(ClassifyFn::new(f))
    }

    /// Uses any [`Classify`](crate::classify::Classify) implementation.
    pub fn with_classifier<K2>(self, classify: K2) -> Hedge<F, P, K2, H, C, O> {
        Hedge {
            output: PhantomData,
            op: self.op,
            policy: self.policy,
            classify,
            clock: self.clock,
            on_finish: self.on_finish,
            cancel: self.cancel,
            deadline: self.deadline,
            name: self.name,
        }
    }

    /// Reads time and sleeps on `clock` (default the
    /// [`DefaultClock`](crate::clock::DefaultClock): `TokioClock` with the
    /// default `tokio` feature).
    pub fn clock<C2: Clock>(self, clock: C2) -> Hedge<F, P, K, H, C2, O> {
        Hedge {
            output: PhantomData,
            op: self.op,
            policy: self.policy,
            classify: self.classify,
            clock,
            on_finish: self.on_finish,
            cancel: self.cancel,
            deadline: self.deadline,
            name: self.name,
        }
    }

    /// Calls `hook` once when the call ends, with its [`HedgeStats`]
    /// (copies sent, failed, cancelled, the winner).
    pub fn on_finish<G: FnMut(&HedgeStats)>(self, hook: G) -> Hedge<F, P, K, FinishFn<G>, C, O> {
        Hedge {
            output: PhantomData,
            op: self.op,
            policy: self.policy,
            classify: self.classify,
            clock: self.clock,
            on_finish: FinishFn::new(hook),
            cancel: self.cancel,
            deadline: self.deadline,
            name: self.name,
        }
    }

    /// Stops the call promptly, dropping every copy, when `token` is cancelled.
    pub fn cancel_on(mut self, token: CancelToken) -> Self {
        self.cancel = Some(token);
        self
    }

    /// An overall deadline for this call (the earlier of it and the
    /// policy's `max_elapsed` holds).
    pub fn deadline(mut self, deadline: Deadline) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Names the operation in errors and telemetry.
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = Some(name);
        self
    }

    /// Gives a [`Report`](crate::call::Report) instead of the plain result:
    /// the result, why the call stopped (`None` for a success), the copies
    /// sent as its attempts, and their [`HedgeStats`] (on success too) as
    /// its `hedge`.
    pub fn report(self) -> Hedge<F, P, K, H, C, Reported> {
        self.output()
    }

    /// Chooses the output form by type: [`Plain`] (the `Result`) or
    /// [`Reported`] (a [`Report`](crate::call::Report)), as
    /// [`Retry::output`](crate::retry::Retry::output) does; [`report`](Self::report)
    /// is `output::<Reported>()`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::call::Plain;
    /// use steadfast::{Attempt, HedgePolicy, Hedgeable};
    /// # futures::executor::block_on(async {
    /// let policy = HedgePolicy::builder(Duration::from_millis(5)).build()?;
    /// let value = (|_: Attempt| async { Ok::<_, ()>(7) })
    ///     .hedge(&policy)
    ///     .clock(steadfast::clock::VirtualClock::new())
    ///     .output::<Plain>()
    ///     .await;
    /// assert_eq!(value, Ok(7));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// # }).unwrap();
    /// ```
    pub fn output<O2>(self) -> Hedge<F, P, K, H, C, O2> {
        Hedge {
            output: PhantomData,
            op: self.op,
            policy: self.policy,
            classify: self.classify,
            clock: self.clock,
            on_finish: self.on_finish,
            cancel: self.cancel,
            deadline: self.deadline,
            name: self.name,
        }
    }

    /// Ends the call with `fallback` when it fails for any reason but a
    /// cancellation, as [`Retry::fallback`](crate::retry::Retry::fallback)
    /// does: once no copy can succeed, the fallback sees the last copy's
    /// outcome and the reason, and what it returns is the call's result.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::fallback;
    /// use steadfast::{Attempt, HedgePolicy, Hedgeable};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), steadfast::ConfigError> {
    /// let policy = HedgePolicy::builder(Duration::from_millis(50)).max_attempts(2).build()?;
    /// let value = (|_: Attempt| async { Err::<&str, _>("unavailable") })
    ///     .hedge(&policy)
    ///     .fallback(fallback::value("stale but there"))
    ///     .await;
    /// assert_eq!(value.unwrap(), "stale but there");
    /// # Ok(())
    /// # }
    /// ```
    pub fn fallback<Fb>(self, fallback: Fb) -> WithFallback<Hedge<F, P, K, H, C, Reported>, Fb, O> {
        let name = self.name;
        WithFallback::new(self.output(), fallback, name)
    }
}

/// Adds [`hedge`](Hedgeable::hedge) to closures that return futures, and to
/// every other [`Operation`].
///
/// ```
/// use std::time::Duration;
/// use steadfast::{Attempt, HedgePolicy, Hedgeable};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = HedgePolicy::builder(Duration::from_millis(50)).max_attempts(2).build()?;
/// let reply = (|attempt: Attempt| async move {
///     // The first copy is stuck; the hedge sent at 50 ms answers at once.
///     if attempt.is_first() {
///         tokio::time::sleep(Duration::from_secs(10)).await;
///     }
///     Ok::<_, std::io::Error>(attempt.number)
/// })
/// .hedge(&policy)
/// .name("lookup")
/// .await?;
/// assert_eq!(reply, 2);
/// # Ok(())
/// # }
/// ```
pub trait Hedgeable<Fut>: Sized {
    /// Hedges this operation under `policy`; configure, then `.await`.
    fn hedge<P: Lend<Policy = HedgePolicy>>(self, policy: P) -> Hedge<Self, P>;
}

impl<F> Hedgeable<F::Future> for F
where
    F: Operation,
{
    #[inline]
    fn hedge<P: Lend<Policy = HedgePolicy>>(self, policy: P) -> Hedge<Self, P> {
        Hedge {
            output: PhantomData,
            op: self,
            policy,
            classify: AnyError,
            clock: DefaultClock::default(),
            on_finish: (),
            cancel: None,
            deadline: None,
            name: None,
        }
    }
}
