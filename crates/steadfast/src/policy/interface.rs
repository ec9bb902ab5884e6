//! [`Policy`]: what every policy is to the code that runs calls under it,
//! retried or hedged.

use super::{HedgePolicy, Limits, RetryPolicy};
use crate::backoff::Schedule;
use crate::call::Lend;

/// What both policies are to an integration that runs calls under either:
/// their shared [`Limits`], their attempt limit, the one-attempt form for a
/// request that cannot be sent twice, and whether a call's first attempt
/// can run with no per-call state. Implemented by [`RetryPolicy`] and
/// [`HedgePolicy`]; sealed. A program rarely names it: the methods are the
/// policies' own, too.
///
/// ```
/// use std::time::Duration;
/// use steadfast::policy::Policy;
/// use steadfast::{HedgePolicy, RetryPolicy};
///
/// /// What a layer keeps for requests it can send only once.
/// fn for_one_send<P: Policy>(policy: &P) -> P {
///     policy.single_attempt()
/// }
/// let retry = RetryPolicy::builder().max_attempts(4).build()?;
/// let hedge = HedgePolicy::builder(Duration::from_millis(5)).max_attempts(3).build()?;
/// assert_eq!(for_one_send(&retry).max_attempts(), 1);
/// assert_eq!(Policy::max_attempts(&for_one_send(&hedge)), 1);
/// assert!(Policy::is_lean(&retry) && !Policy::is_lean(&hedge));
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub trait Policy: Sized + Lend<Policy = Self> + sealed::Sealed {
    /// The limits every policy shares.
    fn limits(&self) -> &Limits;

    /// The most attempts (or copies) a call makes, counting the first.
    fn max_attempts(&self) -> u32;

    /// The same policy with one attempt.
    #[must_use]
    fn single_attempt(&self) -> Self;

    /// Whether a call's first attempt can run with no per-call state (see
    /// [`RetryPolicy::is_lean`]). Never for a hedge, whose timer must run
    /// while its first copy is out.
    fn is_lean(&self) -> bool;
}

mod sealed {
    pub trait Sealed {}
    impl<S> Sealed for super::RetryPolicy<S> {}
    impl Sealed for super::HedgePolicy {}
}

impl<S: Schedule + Clone> Policy for RetryPolicy<S> {
    fn limits(&self) -> &Limits {
        RetryPolicy::limits(self)
    }

    fn max_attempts(&self) -> u32 {
        RetryPolicy::max_attempts(self)
    }

    fn single_attempt(&self) -> Self {
        RetryPolicy::single_attempt(self)
    }

    fn is_lean(&self) -> bool {
        RetryPolicy::is_lean(self)
    }
}

impl Policy for HedgePolicy {
    fn limits(&self) -> &Limits {
        HedgePolicy::limits(self)
    }

    fn max_attempts(&self) -> u32 {
        HedgePolicy::max_attempts(self)
    }

    fn single_attempt(&self) -> Self {
        HedgePolicy::single_attempt(self)
    }

    fn is_lean(&self) -> bool {
        false
    }
}
