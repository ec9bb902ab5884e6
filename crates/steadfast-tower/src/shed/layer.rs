//! [`ShedLayer`]: the layer, and its settings.

use std::fmt;

use steadfast::clock::{AsyncClock, DefaultClock};
use steadfast::limit::ConcurrencyLimit;
use tower_layer::Layer;

use super::service::Shed;

/// Sheds the requests a [`ConcurrencyLimit`] has no slot for: they are
/// answered at once with the refusal of the protocol `P`
/// ([`Shedding::refused`](super::Shedding::refused)) and never reach the
/// service. See the [module docs](super) for when a slot is taken, given
/// back, and what an adaptive limit learns.
#[derive(Clone)]
pub struct ShedLayer<P, C = DefaultClock> {
    limit: ConcurrencyLimit,
    protocol: P,
    clock: C,
}

impl<P: fmt::Debug, C> fmt::Debug for ShedLayer<P, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedLayer")
            .field("limit", &self.limit)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl<P> ShedLayer<P> {
    /// Sheds what `limit` has no slot for, answering as `protocol` says; a
    /// queue on the limit is waited in on the default clock (tokio's).
    #[must_use]
    pub fn new(limit: ConcurrencyLimit, protocol: P) -> Self {
        Self {
            limit,
            protocol,
            clock: DefaultClock::default(),
        }
    }
}

impl<P, C> ShedLayer<P, C> {
    /// Waits in the limit's queue on `clock` (a paused tokio clock or a
    /// [`VirtualClock`](steadfast::clock::VirtualClock) in tests).
    #[must_use]
    pub fn clock<C2: AsyncClock>(self, clock: C2) -> ShedLayer<P, C2> {
        ShedLayer {
            limit: self.limit,
            protocol: self.protocol,
            clock,
        }
    }

    /// The limit the layer takes its slots of (shared with every service
    /// it makes).
    #[must_use]
    pub fn limit(&self) -> &ConcurrencyLimit {
        &self.limit
    }

    /// The protocol's refusal and signals.
    #[must_use]
    pub fn protocol(&self) -> &P {
        &self.protocol
    }

    /// The protocol's refusal and signals, to change.
    pub fn protocol_mut(&mut self) -> &mut P {
        &mut self.protocol
    }
}

impl<S, P: Clone, C: Clone> Layer<S> for ShedLayer<P, C> {
    type Service = Shed<S, P, C>;

    fn layer(&self, inner: S) -> Self::Service {
        Shed::new(
            inner,
            self.limit.clone(),
            self.protocol.clone(),
            self.clock.clone(),
        )
    }
}
