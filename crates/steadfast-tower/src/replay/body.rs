//! The body every attempt of an HTTP request is sent with.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

/// The body of one attempt of an HTTP request sent through
/// [`HttpReplay`](super::HttpReplay): the buffered bytes (shared by every
/// attempt, never copied), or, for a request sent once, the part already
/// read followed by the rest of the original body.
///
/// ```
/// use bytes::Bytes;
/// use http_body::Body;
/// use steadfast_tower::replay::ReplayBody;
///
/// let body = ReplayBody::<String>::full(Bytes::from_static(b"hello"));
/// assert_eq!(body.size_hint().exact(), Some(5));
/// ```
pub struct ReplayBody<B: Body> {
    kind: Kind<B>,
}

// Nothing in a `ReplayBody` is ever pinned: the inner body must be `Unpin`
// to be polled, and a stored error is only moved out.
impl<B: Body + Unpin> Unpin for ReplayBody<B> {}

enum Kind<B: Body> {
    /// Buffered: the bytes, then the trailers, if any.
    Full {
        data: Option<Bytes>,
        trailers: Option<HeaderMap>,
    },
    /// Sent once: the frames already read, then the rest of the body.
    Partial { read: VecDeque<Bytes>, rest: B },
    /// Sent once: the frames read before the body failed, then its error.
    Failed {
        read: VecDeque<Bytes>,
        error: Option<B::Error>,
    },
}

impl<B: Body> ReplayBody<B> {
    /// A buffered body of `data`.
    #[must_use]
    pub fn full(data: Bytes) -> Self {
        Self::full_with_trailers(data, None)
    }

    pub(crate) fn full_with_trailers(data: Bytes, trailers: Option<HeaderMap>) -> Self {
        let data = (!data.is_empty()).then_some(data);
        Self {
            kind: Kind::Full { data, trailers },
        }
    }

    /// `body` as it is, not buffered: for a request that is sent once
    /// through a stack whose other requests are replayed.
    #[must_use]
    pub fn streaming(body: B) -> Self {
        Self::partial(VecDeque::new(), body)
    }

    pub(crate) fn partial(read: VecDeque<Bytes>, rest: B) -> Self {
        Self {
            kind: Kind::Partial { read, rest },
        }
    }

    pub(crate) fn failed(read: VecDeque<Bytes>, error: B::Error) -> Self {
        Self {
            kind: Kind::Failed {
                read,
                error: Some(error),
            },
        }
    }

    /// Whether this is a buffered body that every attempt can send again.
    #[must_use]
    pub fn is_replayable(&self) -> bool {
        matches!(self.kind, Kind::Full { .. })
    }
}

impl<B: Body> fmt::Debug for ReplayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Full { data, .. } => {
                return f
                    .debug_struct("ReplayBody::Full")
                    .field("len", &data.as_ref().map_or(0, Bytes::len))
                    .finish();
            }
            Kind::Partial { .. } => "ReplayBody::Partial",
            Kind::Failed { .. } => "ReplayBody::Failed",
        };
        f.debug_struct(kind).finish_non_exhaustive()
    }
}

impl<B> Body for ReplayBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match &mut self.get_mut().kind {
            Kind::Full { data, trailers } => Poll::Ready(match data.take() {
                Some(data) => Some(Ok(Frame::data(data))),
                None => trailers.take().map(|t| Ok(Frame::trailers(t))),
            }),
            Kind::Partial { read, rest } => match read.pop_front() {
                Some(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                None => Pin::new(rest).poll_frame(cx),
            },
            Kind::Failed { read, error } => Poll::Ready(match read.pop_front() {
                Some(data) => Some(Ok(Frame::data(data))),
                None => error.take().map(Err),
            }),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full { data, trailers } => data.is_none() && trailers.is_none(),
            Kind::Partial { read, rest } => read.is_empty() && rest.is_end_stream(),
            Kind::Failed { read, error } => read.is_empty() && error.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        let read = |r: &VecDeque<Bytes>| r.iter().map(|b| b.len() as u64).sum::<u64>();
        match &self.kind {
            Kind::Full { data, .. } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Kind::Partial { read: r, rest } => {
                let before = read(r);
                let rest = rest.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(before.saturating_add(rest.lower()));
                if let Some(upper) = rest.upper() {
                    hint.set_upper(before.saturating_add(upper));
                }
                hint
            }
            Kind::Failed { read: r, .. } => SizeHint::with_exact(read(r)),
        }
    }
}
