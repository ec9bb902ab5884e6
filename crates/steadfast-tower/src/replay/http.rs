//! Replay of `http::Request`s: the body buffered once, shared by every attempt.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{Extensions, HeaderMap, Method, Request, Uri, Version};
use http_body::Body;
use steadfast::Attempt;

use super::{NotReplayable, Prepared, Preparing, Replay, ReplayBody};

/// The default replay buffer of [`HttpReplay`]: 64 KiB.
pub const DEFAULT_REPLAY_LIMIT: usize = 64 * 1024;

/// Replays `http::Request<B>`s by buffering their body, up to a limit.
///
/// The body is read into one [`Bytes`] before the first attempt; each
/// attempt gets a request with the same head and a [`ReplayBody`] over those
/// bytes (a reference count, not a copy). A body whose size hint is already
/// over the limit is not read at all; one that turns out larger is sent once
/// with what was read followed by the rest, and never retried. A body whose
/// read fails before it is buffered is sent once too, ending in that error.
///
/// The body must be `Unpin` (hyper's `Incoming`, axum's `Body`,
/// `http_body_util::Full`, `String` and boxed bodies are); pin a body of
/// your own in a `Box` first.
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Full};
/// use steadfast_tower::replay::{HttpReplay, Prepared, Preparing, Replay, ReplayBody};
///
/// # futures::executor::block_on(async {
/// let replay = HttpReplay::new(1024);
/// let request = http::Request::put("/users/7").body(Full::new(Bytes::from("{\"name\":\"Ada\"}"))).unwrap();
/// let prepared = match replay.prepare(request) {
///     Preparing::Done(prepared) => prepared,
///     Preparing::Reading(buffering) => buffering.await,
/// };
/// let Prepared::Replayable(kept) = prepared else { unreachable!() };
/// let copy: http::Request<ReplayBody<Full<Bytes>>> = replay.replay(&kept, &steadfast::Attempt::new(2));
/// assert_eq!(copy.method(), http::Method::PUT);
/// assert_eq!(copy.into_body().collect().await.unwrap().to_bytes(), "{\"name\":\"Ada\"}");
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpReplay {
    limit: usize,
    wait: bool,
}

impl Default for HttpReplay {
    fn default() -> Self {
        Self::new(DEFAULT_REPLAY_LIMIT)
    }
}

impl HttpReplay {
    /// Buffers bodies of up to `limit` bytes (0: only empty bodies replay).
    #[must_use]
    pub const fn new(limit: usize) -> Self {
        Self { limit, wait: true }
    }

    /// Buffers only what the body has ready: a body that would make the
    /// call wait for more (a stream its writer is still filling, like a
    /// client-streaming or bidi gRPC call, whose writer may wait for the
    /// server's replies) is sent once, at once, with what was read followed
    /// by the rest, and never retried
    /// ([`NotReplayable::BodyStreaming`]). A body that is all there (a
    /// unary gRPC request, a buffered upload) replays as before.
    #[must_use]
    pub const fn without_waiting(mut self) -> Self {
        self.wait = false;
        self
    }

    /// The largest body that is buffered for replay.
    #[must_use]
    pub const fn limit(&self) -> usize {
        self.limit
    }
}

/// A buffered request: its head and its body's bytes, from which every
/// attempt's request is made.
#[derive(Debug, Clone)]
pub struct BufferedRequest {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    extensions: Extensions,
    body: Bytes,
    trailers: Option<HeaderMap>,
}

impl BufferedRequest {
    /// The buffered body.
    #[must_use]
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The request's head (method, URI, headers).
    #[must_use]
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The request's URI.
    #[must_use]
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// The request's headers.
    #[must_use]
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The request itself, over `body`: for the one attempt of a request
    /// that is sent once.
    fn into_request<B>(self, body: B) -> Request<B> {
        let mut request = Request::new(body);
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers;
        *request.extensions_mut() = self.extensions;
        request
    }

    /// A fresh request for one attempt, over `body`.
    fn request<B>(&self, body: B) -> Request<B> {
        let mut request = Request::new(body);
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers.clone();
        *request.extensions_mut() = self.extensions.clone();
        request
    }
}

impl<B> Replay<Request<B>> for HttpReplay
where
    B: Body<Data = Bytes> + Unpin,
{
    type Request = Request<ReplayBody<B>>;
    type Source = BufferedRequest;
    type Prepare = BufferBody<B>;

    fn prepare(
        &self,
        request: Request<B>,
    ) -> Preparing<BufferBody<B>, BufferedRequest, Self::Request> {
        let (parts, body) = request.into_parts();
        let head = BufferedRequest {
            method: parts.method,
            uri: parts.uri,
            version: parts.version,
            headers: parts.headers,
            extensions: parts.extensions,
            body: Bytes::new(),
            trailers: None,
        };
        // Nothing to read (a GET, say): replayable at once.
        if body.is_end_stream() {
            return Preparing::Done(Prepared::Replayable(head));
        }
        // Known to be too large: sent once, as it streams, unread.
        if body.size_hint().lower() > self.limit as u64 {
            let why = NotReplayable::BodyTooLarge { limit: self.limit };
            let body = ReplayBody::partial(VecDeque::new(), body);
            return Preparing::Done(Prepared::Once(head.into_request(body), why));
        }
        Preparing::Reading(BufferBody {
            head: Some(head),
            body: Some(body),
            read: VecDeque::new(),
            len: 0,
            limit: self.limit,
            wait: self.wait,
        })
    }

    fn replay(&self, source: &BufferedRequest, _: &Attempt) -> Request<ReplayBody<B>> {
        source.request(ReplayBody::full_with_trailers(
            source.body.clone(),
            source.trailers.clone(),
        ))
    }
}

/// The future of [`HttpReplay::prepare`]: reads the body into the buffer.
pub struct BufferBody<B> {
    head: Option<BufferedRequest>,
    body: Option<B>,
    read: VecDeque<Bytes>,
    len: usize,
    limit: usize,
    /// Whether to wait for a body that is not all there yet.
    wait: bool,
}

impl<B> fmt::Debug for BufferBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferBody")
            .field("read", &self.len)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

type Output<B> = Prepared<BufferedRequest, Request<ReplayBody<B>>>;

impl<B> BufferBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    /// The request sent once: what was read, then the rest of the body.
    fn once(&mut self, head: BufferedRequest, body: B, why: NotReplayable) -> Output<B> {
        let body = ReplayBody::partial(std::mem::take(&mut self.read), body);
        Prepared::Once(head.into_request(body), why)
    }
}

impl<B> Future for BufferBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Output = Output<B>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (Some(mut head), Some(mut body)) = (this.head.take(), this.body.take()) else {
            panic!("BufferBody polled after it completed");
        };
        let limit = this.limit as u64;
        if body.size_hint().lower() > limit.saturating_sub(this.len as u64) {
            return Poll::Ready(this.once(
                head,
                body,
                NotReplayable::BodyTooLarge { limit: this.limit },
            ));
        }
        loop {
            if body.is_end_stream() {
                break;
            }
            match Pin::new(&mut body).poll_frame(cx) {
                Poll::Pending if !this.wait => {
                    return Poll::Ready(this.once(head, body, NotReplayable::BodyStreaming));
                }
                Poll::Pending => {
                    this.head = Some(head);
                    this.body = Some(body);
                    return Poll::Pending;
                }
                Poll::Ready(None) => break,
                Poll::Ready(Some(Err(error))) => {
                    let body = ReplayBody::failed(std::mem::take(&mut this.read), error);
                    return Poll::Ready(Prepared::Once(
                        head.into_request(body),
                        NotReplayable::BodyError,
                    ));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.len = this.len.saturating_add(data.len());
                        this.read.push_back(data);
                        if this.len > this.limit {
                            return Poll::Ready(this.once(
                                head,
                                body,
                                NotReplayable::BodyTooLarge { limit: this.limit },
                            ));
                        }
                    }
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            match &mut head.trailers {
                                Some(all) => all.extend(trailers),
                                None => head.trailers = Some(trailers),
                            }
                        }
                    }
                },
            }
        }
        head.body = match this.read.len() {
            0 => Bytes::new(),
            1 => this.read.pop_front().unwrap_or_default(),
            _ => {
                let mut all = BytesMut::with_capacity(this.len);
                for chunk in this.read.drain(..) {
                    all.extend_from_slice(&chunk);
                }
                all.freeze()
            }
        };
        Poll::Ready(Prepared::Replayable(head))
    }
}
