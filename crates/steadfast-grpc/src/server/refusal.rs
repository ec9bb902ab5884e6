//! [`GrpcShedding`]: what gRPC adds to steadfast-tower's shedding.

use http::{HeaderMap, HeaderValue, Response, response::Parts};
use steadfast::limit::{LimitRefused, Signal};
use steadfast_tower::shed::Shedding;

use super::status_signal;
use crate::Code;
use crate::trailers_only::trailers_only;

/// What gRPC adds to steadfast-tower's shedding: a shed call is answered
/// with a Trailers-Only `RESOURCE_EXHAUSTED` naming the limit (and
/// `grpc-retry-pushback-ms`, if set), and a call tells the limit what its
/// `grpc-status` says, in the head of a Trailers-Only response or else in
/// the trailers (see the [module docs](super)). [`ShedLayer`](super::ShedLayer)
/// is the layer with it.
///
/// ```
/// use steadfast::limit::ConcurrencyLimit;
/// use steadfast_grpc::server::GrpcShedding;
/// use steadfast_tower::shed::ShedLayer;
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// // The same layer as `steadfast_grpc::server::ShedLayer::new(limit)`.
/// let layer = ShedLayer::new(ConcurrencyLimit::fixed(64).build()?, GrpcShedding::default());
/// assert!(layer.protocol().pushback_header().is_none());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct GrpcShedding {
    pub(super) pushback: Option<HeaderValue>,
}

impl GrpcShedding {
    /// The `grpc-retry-pushback-ms` value a refusal carries, if any.
    #[must_use]
    pub fn pushback_header(&self) -> Option<&HeaderValue> {
        self.pushback.as_ref()
    }
}

impl Shedding for GrpcShedding {
    /// A Trailers-Only `RESOURCE_EXHAUSTED` naming the limit, with the
    /// pushback if set.
    fn refused(&self, refused: &LimitRefused) -> Response<()> {
        trailers_only(
            u32::from(Code::ResourceExhausted.number()),
            &refused.to_string(),
            self.pushback.as_ref(),
        )
    }

    /// A Trailers-Only head says how the call ended.
    fn on_head(&self, head: &Parts) -> Option<Signal> {
        status_signal(&head.headers)
    }

    /// The trailers of a call that streamed its response carry its status.
    fn on_trailers(&self, trailers: &HeaderMap) -> Option<Signal> {
        status_signal(trailers)
    }
}
