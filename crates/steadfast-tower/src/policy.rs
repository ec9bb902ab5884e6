//! The policy a layer's call runs under: the layer's own, or its
//! one-attempt twin for a request that cannot be sent again. Both are kept
//! behind `Arc`s made when the layer is, so a call copies two pointers, not
//! a policy.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use steadfast::retry::AsPolicy;
use steadfast::{HedgePolicy, RetryPolicy};

use crate::replay::{Prepared, Preparing};

/// A layer's retry policy, and its one-attempt twin behind an `Arc` (made
/// once, when the layer is).
pub(crate) struct RetryPolicies<P: AsPolicy> {
    shared: P,
    once: Arc<RetryPolicy<P::Schedule>>,
    /// `shared.as_policy().is_lean()`, kept here (a policy does not change
    /// once built), so the hot path reads it without following the pointer.
    lean: bool,
}

impl<P: AsPolicy> RetryPolicies<P>
where
    P::Schedule: Clone,
{
    pub(crate) fn new(policy: P) -> Self {
        let once = {
            let p = policy.as_policy();
            // One attempt is always a valid setting; keep the policy as it
            // is should that ever change.
            p.to_builder()
                .max_attempts(1)
                .build()
                .unwrap_or_else(|_| p.clone())
        };
        Self {
            lean: policy.as_policy().is_lean(),
            shared: policy,
            once: Arc::new(once),
        }
    }
}

impl<P: AsPolicy> RetryPolicies<P> {
    /// Whether a replayable request's call is lean (see
    /// [`RetryPolicy::is_lean`]).
    #[inline]
    pub(crate) fn is_lean(&self) -> bool {
        self.lean
    }

    /// The policy for calls whose request is replayable.
    #[inline]
    pub(crate) fn shared(&self) -> &P {
        &self.shared
    }
}

impl<P: AsPolicy + Clone> RetryPolicies<P> {
    /// What a call takes along: the policy it needs if its request is
    /// prepared already, both if that is still to be seen.
    #[inline]
    pub(crate) fn for_call<S, R>(&self, preparing: &Preparing<impl Sized, S, R>) -> PolicyFor<P> {
        match preparing {
            Preparing::Done(Prepared::Replayable(_)) => {
                PolicyFor::Decided(CallPolicy::Shared(self.shared.clone()))
            }
            Preparing::Done(Prepared::Once(..)) => {
                PolicyFor::Decided(CallPolicy::Once(Arc::clone(&self.once)))
            }
            Preparing::Reading(_) => PolicyFor::Undecided(self.clone()),
        }
    }
}

impl<P: AsPolicy + Clone> Clone for RetryPolicies<P> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            once: Arc::clone(&self.once),
            lean: self.lean,
        }
    }
}

impl<P: AsPolicy> fmt::Debug for RetryPolicies<P>
where
    P::Schedule: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.shared.as_policy(), f)
    }
}

/// The policy a call carries until its request is prepared.
pub(crate) enum PolicyFor<P: AsPolicy> {
    /// Known: the request was prepared when the call was made.
    Decided(CallPolicy<P>),
    /// Both, until the request is prepared.
    Undecided(RetryPolicies<P>),
}

impl<P: AsPolicy> PolicyFor<P> {
    /// The policy for a request that is (`true`) or is not replayable.
    #[inline]
    pub(crate) fn decide(self, replayable: bool) -> CallPolicy<P> {
        match self {
            Self::Decided(policy) => policy,
            Self::Undecided(both) if replayable => CallPolicy::Shared(both.shared),
            Self::Undecided(both) => CallPolicy::Once(both.once),
        }
    }
}

/// A layer's retry policy for one call.
pub(crate) enum CallPolicy<P: AsPolicy> {
    /// The layer's policy.
    Shared(P),
    /// Its one-attempt twin, for a request that cannot be replayed.
    Once(Arc<RetryPolicy<P::Schedule>>),
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

/// A layer's hedge policy and its single-copy twin.
pub(crate) struct HedgePolicies<P> {
    pub(crate) shared: Arc<P>,
    pub(crate) single: Arc<HedgePolicy>,
}

impl<P: Borrow<HedgePolicy>> HedgePolicies<P> {
    pub(crate) fn new(policy: P) -> Self {
        let single = {
            let p: &HedgePolicy = policy.borrow();
            p.to_builder()
                .max_attempts(1)
                .build()
                .unwrap_or_else(|_| p.clone())
        };
        Self {
            shared: Arc::new(policy),
            single: Arc::new(single),
        }
    }
}

impl<P> HedgePolicies<P> {
    /// The policy for a request that is (`true`) or is not replayable.
    #[inline]
    pub(crate) fn for_call(self, replayable: bool) -> HedgeCallPolicy<P> {
        if replayable {
            HedgeCallPolicy::Shared(self.shared)
        } else {
            HedgeCallPolicy::Single(self.single)
        }
    }
}

impl<P> Clone for HedgePolicies<P> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            single: Arc::clone(&self.single),
        }
    }
}

impl<P: Borrow<HedgePolicy>> fmt::Debug for HedgePolicies<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(Borrow::<HedgePolicy>::borrow(&*self.shared), f)
    }
}

/// A layer's hedge policy for one call.
pub(crate) enum HedgeCallPolicy<P> {
    /// The layer's policy.
    Shared(Arc<P>),
    /// Its single-copy twin, for a request that cannot be replayed.
    Single(Arc<HedgePolicy>),
}

impl<P: Borrow<HedgePolicy>> Borrow<HedgePolicy> for HedgeCallPolicy<P> {
    #[inline]
    fn borrow(&self) -> &HedgePolicy {
        match self {
            Self::Shared(p) => (**p).borrow(),
            Self::Single(p) => p,
        }
    }
}
