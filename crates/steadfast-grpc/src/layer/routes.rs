//! The per-method routes of a [`GrpcLayer`](super::GrpcLayer): which methods retry, which hedge,
//! which run once.

use std::sync::Arc;
use std::time::Duration;

use steadfast::chaos::Chaos;
use steadfast::limit::ConcurrencyLimit;
use steadfast::{Backoff, HedgePolicy, RetryPolicy};
use steadfast_tower::{HedgeLayer, RetryLayer};

use crate::chaos::ChaosStatus;
use crate::config::ServiceConfig;
use crate::fallback::FallbackFn;
use crate::{GrpcClassify, GrpcReplay};

pub(super) type RetryRoute<C> = RetryLayer<Arc<RetryPolicy<Backoff>>, GrpcClassify, GrpcReplay, C>;
pub(super) type HedgeRoute<C> = HedgeLayer<Arc<HedgePolicy>, GrpcClassify, GrpcReplay, C>;

/// What a method's calls go through.
pub(super) enum Route<C> {
    /// A retried method, and its config's timeout.
    Retry(RetryRoute<C>, Option<Duration>),
    /// A hedged method, and its config's timeout.
    Hedge(HedgeRoute<C>, Option<Duration>),
    Plain {
        timeout: Option<Duration>,
    },
}

/// The routes of a service config, one per method config, in its order.
pub(super) struct Routes<C> {
    pub(super) config: ServiceConfig,
    pub(super) routes: Vec<Route<C>>,
    /// The route of calls no method config names, when a concurrency limit
    /// holds their attempt.
    pub(super) unnamed: Option<Route<C>>,
    pub(super) concurrency: Option<ConcurrencyLimit>,
    /// Injected into every attempt ([`GrpcLayerBuilder::chaos`]).
    pub(super) chaos: Option<Chaos<ChaosStatus>>,
    /// Asked once a call has failed ([`GrpcLayerBuilder::fallback`]).
    pub(super) fallback: Option<Arc<FallbackFn>>,
    pub(super) clock: C,
    // The server name, as the metrics' `grpc.target`.
    pub(super) target: Arc<str>,
    /// The endpoints every attempt is sent to one of ([`GrpcLayerBuilder::endpoints`](super::GrpcLayerBuilder::endpoints)).
    pub(super) endpoints: Option<steadfast::endpoint::Endpoints>,
}

impl<C> Routes<C> {
    pub(super) fn route(&self, path: &str) -> Option<&Route<C>> {
        let Some(config) = self.config.method_config(path) else {
            return self.unnamed.as_ref();
        };
        let index = self
            .config
            .method_configs()
            .iter()
            .position(|c| std::ptr::eq(c, config))?;
        self.routes.get(index)
    }
}
