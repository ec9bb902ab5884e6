//! Trailers-Only gRPC responses, written once: the `grpc-status`, the
//! percent-encoded `grpc-message` and the `grpc-retry-pushback-ms` of every
//! answer the crate makes itself (the layer's `DEADLINE_EXCEEDED` and
//! `RESOURCE_EXHAUSTED`, the server layers' refusals, chaos's injected
//! statuses, a fallback's status).

use std::time::Duration;

use http::{HeaderMap, HeaderValue, Response};

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

/// Writes `content-type: application/grpc`, `grpc-status` and a
/// percent-encoded `grpc-message` (if not empty) into `headers`.
pub(crate) fn set_status(headers: &mut HeaderMap, status: u32, message: &str) {
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", HeaderValue::from(status));
    if !message.is_empty()
        && let Ok(v) = HeaderValue::try_from(percent_encode(message))
    {
        headers.insert("grpc-message", v);
    } else {
        headers.remove("grpc-message");
    }
}

/// A Trailers-Only gRPC response: `grpc-status` `status` (a number: a
/// server may answer codes gRPC does not define), `grpc-message`
/// percent-encoded, and `pushback` as `grpc-retry-pushback-ms`.
pub(crate) fn trailers_only<T: Default>(
    status: u32,
    message: &str,
    pushback: Option<&HeaderValue>,
) -> Response<T> {
    let mut response = Response::new(T::default());
    let headers = response.headers_mut();
    set_status(headers, status, message);
    if let Some(value) = pushback {
        headers.insert(crate::PUSHBACK_HEADER, value.clone());
    }
    response
}

/// `grpc-retry-pushback-ms` for `wait`: whole milliseconds, rounded up.
pub(crate) fn pushback_value(wait: Duration) -> HeaderValue {
    let ms = wait.as_millis() + u128::from(!wait.subsec_nanos().is_multiple_of(1_000_000));
    HeaderValue::from(u64::try_from(ms).unwrap_or(u64::MAX))
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
