//! [`GrpcShedding`]: what gRPC adds to steadfast-tower's shedding.

use http::{HeaderMap, HeaderValue, Response, response::Parts};
use steadfast::limit::{LimitRefused, Signal};
use steadfast_tower::shed::Shedding;

use super::status_signal;
use crate::Code;

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
        let mut response = Response::new(());
        let headers = response.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        headers.insert(
            "grpc-status",
            HeaderValue::from(u16::from(Code::ResourceExhausted.number())),
        );
        if let Ok(message) = HeaderValue::try_from(percent_encode(&refused.to_string())) {
            headers.insert("grpc-message", message);
        }
        if let Some(value) = &self.pushback {
            headers.insert(crate::PUSHBACK_HEADER, value.clone());
        }
        response
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

/// `grpc-message` encoding: the printable ASCII bytes but `%` as they are,
/// every other byte as `%XX` (the gRPC HTTP/2 protocol's rule).
pub(crate) fn percent_encode(message: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(message.len());
    for byte in message.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn grpc_message_is_percent_encoded() {
        assert_eq!(
            super::percent_encode("full: 4 in flight"),
            "full: 4 in flight"
        );
        assert_eq!(super::percent_encode("100% \u{fc}\n"), "100%25 %C3%BC%0A");
    }
}
