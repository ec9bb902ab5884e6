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
