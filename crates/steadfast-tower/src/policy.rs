//! The policy a layer's call runs under: the layer's own, or a one-attempt
//! copy of it for a request that cannot be sent again.

use std::fmt;

use steadfast::RetryPolicy;
use steadfast::retry::AsPolicy;

/// A layer's policy for one call.
pub(crate) enum CallPolicy<P: AsPolicy> {
    /// The layer's policy, shared.
    Shared(P),
    /// The same limits, deadline and control, with one attempt: for a
    /// request that cannot be replayed.
    Once(RetryPolicy<P::Schedule>),
}

impl<P: AsPolicy> CallPolicy<P>
where
    P::Schedule: Clone,
{
    /// The one-attempt policy derived from `policy`.
    pub(crate) fn once(policy: &P) -> Self {
        let policy = policy.as_policy();
        match policy.to_builder().max_attempts(1).build() {
            Ok(once) => Self::Once(once),
            // A policy that built once builds again with one attempt (1 is
            // always valid); keep the policy itself should that ever change.
            Err(_) => Self::Once(policy.clone()),
        }
    }
}

impl<P: AsPolicy> fmt::Debug for CallPolicy<P>
where
    P::Schedule: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Shared(p) => f.debug_tuple("Shared").field(p.as_policy()).finish(),
            Self::Once(p) => f.debug_tuple("Once").field(p).finish(),
        }
    }
}

impl<P: AsPolicy> AsPolicy for CallPolicy<P> {
    type Schedule = P::Schedule;

    #[inline]
    fn as_policy(&self) -> &RetryPolicy<P::Schedule> {
        match self {
            Self::Shared(p) => p.as_policy(),
            Self::Once(p) => p,
        }
    }
}
