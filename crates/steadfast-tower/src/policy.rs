//! The policy a layer's call runs under: the layer's own, or its
//! one-attempt twin for a request that cannot be sent again. The twin is
//! made once, when the layer is, and kept behind an `Arc`, so a call copies
//! a pointer, not a policy. One set of types for retry and hedge alike.

use std::fmt;
use std::sync::Arc;

use steadfast::call::Lend;
use steadfast::policy::Policy;

use crate::replay::{Prepared, Preparing};

/// A layer's policy, and its one-attempt twin behind an `Arc`.
pub(crate) struct Policies<P: Lend> {
    shared: P,
    single: Arc<P::Policy>,
    /// `shared.policy().is_lean()`, kept here (a policy does not change
    /// once built), so the hot path reads it without following the pointer.
    lean: bool,
}

impl<P: Lend> Policies<P>
where
    P::Policy: Policy,
{
    pub(crate) fn new(policy: P) -> Self {
        Self {
            lean: policy.policy().is_lean(),
            single: Arc::new(policy.policy().single_attempt()),
            shared: policy,
        }
    }
}

impl<P: Lend> Policies<P> {
    /// Whether a replayable request's call is lean.
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

impl<P: Lend + Clone> Policies<P> {
    /// What a call takes along: the policy it needs if its request is
    /// prepared already, both if that is still to be seen.
    #[inline]
    pub(crate) fn for_call<S, R>(&self, preparing: &Preparing<impl Sized, S, R>) -> PolicyFor<P> {
        match preparing {
            Preparing::Done(Prepared::Replayable(_)) => {
                PolicyFor::Decided(CallPolicy::Shared(self.shared.clone()))
            }
            Preparing::Done(Prepared::Once(..)) => {
                PolicyFor::Decided(CallPolicy::Single(Arc::clone(&self.single)))
            }
            Preparing::Reading(_) => PolicyFor::Undecided(self.clone()),
        }
    }
}

impl<P: Lend + Clone> Clone for Policies<P> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            single: Arc::clone(&self.single),
            lean: self.lean,
        }
    }
}

impl<P: Lend> fmt::Debug for Policies<P>
where
    P::Policy: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.shared.policy(), f)
    }
}

/// The policy a call carries until its request is prepared.
pub(crate) enum PolicyFor<P: Lend> {
    /// Known: the request was prepared when the call was made.
    Decided(CallPolicy<P>),
    /// Both, until the request is prepared.
    Undecided(Policies<P>),
}

impl<P: Lend> PolicyFor<P> {
    /// The policy for a request that is (`true`) or is not replayable.
    #[inline]
    pub(crate) fn decide(self, replayable: bool) -> CallPolicy<P> {
        match self {
            Self::Decided(policy) => policy,
            Self::Undecided(both) if replayable => CallPolicy::Shared(both.shared),
            Self::Undecided(both) => CallPolicy::Single(both.single),
        }
    }
}

/// A layer's policy for one call.
pub(crate) enum CallPolicy<P: Lend> {
    /// The layer's policy.
    Shared(P),
    /// Its one-attempt twin, for a request that cannot be replayed.
    Single(Arc<P::Policy>),
}

impl<P: Lend> Lend for CallPolicy<P> {
    type Policy = P::Policy;

    #[inline]
    fn policy(&self) -> &P::Policy {
        match self {
            Self::Shared(p) => p.policy(),
            Self::Single(p) => p,
        }
    }
}
