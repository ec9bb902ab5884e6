//! How an executor holds the policy it runs under.

use std::rc::Rc;
use std::sync::Arc;

/// Anything that lends a policy to an executor: the policy itself, a
/// reference to it, or an `Arc` (for futures that must be `'static`).
///
/// One trait for every policy: a [`RetryPolicy`](crate::policy::RetryPolicy) and a
/// [`HedgePolicy`](crate::policy::HedgePolicy) each lend themselves, and so does
/// anything that wraps one (`&P`, `Arc<P>`, `Rc<P>`, or a type of an
/// integration's that picks a policy per call). The executors ask for
/// `P: Lend<Policy = RetryPolicy<S>>` or `P: Lend<Policy = HedgePolicy>`.
///
/// ```
/// use std::sync::Arc;
/// use steadfast::call::Lend;
/// use steadfast::RetryPolicy;
///
/// fn attempts<P: Lend<Policy = RetryPolicy>>(lent: &P) -> u32 {
///     lent.policy().max_attempts()
/// }
/// let policy = RetryPolicy::builder().max_attempts(4).build()?;
/// assert_eq!(attempts(&&policy), 4);
/// assert_eq!(attempts(&Arc::new(policy.clone())), 4);
/// assert_eq!(attempts(&policy), 4);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub trait Lend {
    /// The policy lent.
    type Policy;

    /// The policy.
    fn policy(&self) -> &Self::Policy;
}

impl<T: Lend + ?Sized> Lend for &T {
    type Policy = T::Policy;
    #[inline]
    fn policy(&self) -> &T::Policy {
        (**self).policy()
    }
}

impl<T: Lend + ?Sized> Lend for Arc<T> {
    type Policy = T::Policy;
    #[inline]
    fn policy(&self) -> &T::Policy {
        (**self).policy()
    }
}

impl<T: Lend + ?Sized> Lend for Rc<T> {
    type Policy = T::Policy;
    #[inline]
    fn policy(&self) -> &T::Policy {
        (**self).policy()
    }
}
