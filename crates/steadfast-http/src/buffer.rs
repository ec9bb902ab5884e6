//! Buffering a streaming request body, up to a limit, so that it can be
//! replayed.

use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body as _, Frame, SizeHint};

/// What [`buffer`] made of a request's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Buffered {
    /// The body is in memory now (or was already, or there is none).
    Replayable,
    /// The stream is longer than the limit (or failed while being read): it
    /// is sent once, the bytes read first and then the rest.
    OverLimit,
}

/// Reads a streaming body into memory, up to `limit` bytes. A body that
/// ends within the limit is replaced by its bytes; one that goes past it
/// (or fails) is replaced by a stream of what was read, then the rest (or
/// the error), so nothing is lost and it is sent once. Trailers of a
/// streamed request body are not kept.
pub(crate) async fn buffer(request: &mut reqwest::Request, limit: usize) -> Buffered {
    let Some(mut body) = request.body_mut().take() else {
        return Buffered::Replayable;
    };
    if body.as_bytes().is_some() {
        *request.body_mut() = Some(body);
        return Buffered::Replayable;
    }
    let mut read = BytesMut::new();
    loop {
        match poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            None => {
                *request.body_mut() = Some(reqwest::Body::from(read.freeze()));
                return Buffered::Replayable;
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    read.extend_from_slice(&data);
                    if read.len() > limit {
                        *request.body_mut() = Some(prefixed(read.freeze(), body, None));
                        return Buffered::OverLimit;
                    }
                }
            }
            Some(Err(error)) => {
                *request.body_mut() = Some(prefixed(read.freeze(), body, Some(error)));
                return Buffered::OverLimit;
            }
        }
    }
}

fn prefixed(prefix: Bytes, rest: reqwest::Body, error: Option<reqwest::Error>) -> reqwest::Body {
    reqwest::Body::wrap(Prefixed {
        prefix: (!prefix.is_empty()).then_some(prefix),
        error,
        rest: Some(rest),
    })
}

/// The bytes read while trying to buffer, then the error met, or else the
/// rest of the stream.
struct Prefixed {
    prefix: Option<Bytes>,
    error: Option<reqwest::Error>,
    rest: Option<reqwest::Body>,
}

impl http_body::Body for Prefixed {
    type Data = Bytes;
    type Error = reqwest::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, reqwest::Error>>> {
        if let Some(prefix) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        if let Some(error) = self.error.take() {
            self.rest = None;
            return Poll::Ready(Some(Err(error)));
        }
        match self.rest.as_mut() {
            Some(rest) => Pin::new(rest).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streaming(chunks: &[&'static [u8]]) -> reqwest::Request {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::from_static(c))))
            .collect();
        let body = reqwest::Body::wrap(http_body_util::StreamBody::new(futures::stream::iter(
            frames,
        )));
        let mut request = reqwest::Request::new(
            reqwest::Method::PUT,
            "http://127.0.0.1/x".parse().expect("url"),
        );
        *request.body_mut() = Some(body);
        request
    }

    async fn all(mut request: reqwest::Request) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(mut b) = request.body_mut().take() {
            while let Some(frame) = poll_fn(|cx| Pin::new(&mut b).poll_frame(cx)).await {
                if let Ok(data) = frame.expect("a frame").into_data() {
                    out.extend_from_slice(&data);
                }
            }
        }
        out
    }

    #[tokio::test]
    async fn a_stream_within_the_limit_becomes_bytes() {
        let mut request = streaming(&[b"abc", b"def"]);
        assert!(request.try_clone().is_none());
        assert_eq!(buffer(&mut request, 6).await, Buffered::Replayable);
        let copy = request.try_clone().expect("replayable now");
        assert_eq!(all(copy).await, b"abcdef");
        assert_eq!(all(request).await, b"abcdef");
    }

    #[tokio::test]
    async fn a_stream_over_the_limit_is_sent_whole_once() {
        let mut request = streaming(&[b"abc", b"def", b"ghi"]);
        assert_eq!(buffer(&mut request, 4).await, Buffered::OverLimit);
        assert!(request.try_clone().is_none());
        assert_eq!(all(request).await, b"abcdefghi");
    }
}
