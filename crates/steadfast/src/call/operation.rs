//! What an async executor runs: something that makes one attempt's future.

use std::future::Future;

use super::Attempt;

/// Makes the future of one attempt: what the async executors (the retry
/// future and the hedger) run, once per attempt.
///
/// Every closure `FnMut(Attempt) -> impl Future` is an `Operation`, so most
/// code never names this trait. Implement it for a type of your own when the
/// executor's future must be nameable, for example as a `tower::Service`'s
/// `Future` type, where a closure's type cannot be written down.
///
/// ```
/// use std::future::{Ready, ready};
/// use steadfast::call::Operation;
/// use steadfast::retry::Retryable;
/// use steadfast::{Attempt, RetryPolicy};
///
/// /// Fails its first attempt, then answers with the attempt's number.
/// struct FlakyOnce;
///
/// impl Operation for FlakyOnce {
///     type Future = Ready<Result<u32, &'static str>>;
///     fn attempt(&mut self, attempt: Attempt) -> Self::Future {
///         ready(if attempt.is_first() { Err("reset") } else { Ok(attempt.number) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::builder().max_attempts(2).build()?;
/// assert_eq!(FlakyOnce.retry(&policy).await, Ok(2));
/// # Ok(())
/// # }
/// ```
pub trait Operation {
    /// The future of one attempt.
    type Future: Future;

    /// Starts attempt `attempt.number` (from 1). The executor polls the
    /// future it returns with `attempt.deadline` as the ambient deadline.
    fn attempt(&mut self, attempt: Attempt) -> Self::Future;
}

impl<F, Fut> Operation for F
where
    F: FnMut(Attempt) -> Fut,
    Fut: Future,
{
    type Future = Fut;

    #[inline]
    fn attempt(&mut self, attempt: Attempt) -> Fut {
        self(attempt)
    }
}

/// An [`Operation`] whose attempts end in a `Result`: it names the two
/// sides, so an executor's type needs no more parameters than the
/// operation's own. Every operation whose future gives a `Result` is one;
/// nothing to implement.
///
/// ```
/// use steadfast::Attempt;
/// use steadfast::call::TryOperation;
///
/// fn sides<F: TryOperation>(_: &F) -> (&'static str, &'static str) {
///     (std::any::type_name::<F::Ok>(), std::any::type_name::<F::Error>())
/// }
/// let op = |_: Attempt| async { Ok::<u32, std::io::Error>(7) };
/// assert_eq!(sides(&op), ("u32", "std::io::error::Error"));
/// ```
pub trait TryOperation: Operation<Future = <Self as TryOperation>::TryFuture> {
    /// The attempt's future (the operation's [`Future`](Operation::Future)).
    type TryFuture: Future<
        Output = Result<<Self as TryOperation>::Ok, <Self as TryOperation>::Error>,
    >;
    /// What a successful attempt gives.
    type Ok;
    /// What a failed attempt gives.
    type Error;
}

impl<F, T, E> TryOperation for F
where
    F: Operation,
    F::Future: Future<Output = Result<T, E>>,
{
    type TryFuture = F::Future;
    type Ok = T;
    type Error = E;
}
