//! A hostile gRPC server on 127.0.0.1: HTTP/2 by hyper, with the gRPC
//! framing written by hand so that it can send a head and then fail, reset
//! a stream before or after its head, and send pushback no spec allows. It
//! serves the testkit's `steadfast.test.Echo/Say`; the request's `key`
//! names its call.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::Frame;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use steadfast::deadline::DeadlineHeader;
use steadfast_grpc_testkit::echo::{SayReply, SayRequest};
use tokio::runtime::Handle;

use crate::ledger::Ledger;
use crate::listener::Listening;
use crate::plan::{GrpcFault, PUSHBACKS, code};

/// How the server picks the fault of attempt `n` of a call.
pub type Decide = Arc<dyn Fn(u64, u32) -> GrpcFault + Send + Sync>;

/// How long a stream that is reset after its head waits before the reset,
/// so that the head is on the wire.
const RESET_PAUSE: Duration = Duration::from_millis(50);

/// Longest a stalled call waits for its client to go away.
const MAX_STALL: Duration = Duration::from_secs(30);

/// The error a handler or body fails with: hyper resets the stream.
#[derive(Debug)]
struct Reset;

impl std::fmt::Display for Reset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the soak server resets this stream")
    }
}

impl std::error::Error for Reset {}

/// A response body made of the frames it will send; an error (a reset)
/// waits for `pause` first, so that the frames before it are on the wire
/// (h2 drops a stream's queued frames when the stream is reset).
#[derive(Debug, Default)]
struct Frames {
    queue: VecDeque<Result<Frame<Bytes>, Reset>>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Frames {
    fn of(frames: impl IntoIterator<Item = Result<Frame<Bytes>, Reset>>) -> Self {
        Self {
            queue: frames.into_iter().collect(),
            pause: None,
        }
    }
}

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = Reset;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Reset>>> {
        if matches!(self.queue.front(), Some(Err(_)))
            && let Some(pause) = self.pause.as_mut()
        {
            std::task::ready!(pause.as_mut().poll(cx));
            self.pause = None;
        }
        Poll::Ready(self.queue.pop_front())
    }

    fn is_end_stream(&self) -> bool {
        self.queue.is_empty()
    }
}

/// What the server shares between its connections.
struct State {
    ledger: Arc<Ledger<GrpcFault>>,
    decide: Decide,
}

/// A running server.
#[derive(Debug)]
pub struct GrpcServer {
    pub ledger: Arc<Ledger<GrpcFault>>,
    pub listening: Listening,
}

impl GrpcServer {
    /// Binds 127.0.0.1 on a port the OS picks and serves on `runtime`.
    ///
    /// # Errors
    /// When the socket cannot be bound.
    pub fn start(runtime: &Handle, decide: Decide) -> std::io::Result<Self> {
        let ledger = Arc::new(Ledger::default());
        let state = Arc::new(State {
            ledger: Arc::clone(&ledger),
            decide,
        });
        let listening = Listening::start(runtime, move |stream| {
            let state = Arc::clone(&state);
            async move {
                let service = hyper::service::service_fn(move |request| {
                    let state = Arc::clone(&state);
                    async move { handle(request, &state).await }
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        })?;
        Ok(Self { ledger, listening })
    }

    /// The server's URL, for a tonic channel.
    pub fn url(&self) -> String {
        format!("http://{}", self.listening.addr)
    }
}

/// A gRPC message frame: uncompressed, its length, the message.
fn frame(message: &impl Message) -> Bytes {
    let body = message.encode_to_vec();
    let mut out = BytesMut::with_capacity(5 + body.len());
    out.put_u8(0);
    out.put_u32(u32::try_from(body.len()).unwrap_or(u32::MAX));
    out.put_slice(&body);
    out.freeze()
}

fn status_headers(map: &mut HeaderMap, status: i32, message: &str) {
    map.insert("grpc-status", HeaderValue::from(status));
    if let Ok(v) = HeaderValue::from_str(message) {
        map.insert("grpc-message", v);
    }
}

fn head(body: Frames) -> Response<Frames> {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    response
}

/// A Trailers-Only response: the status in the head, no body.
fn trailers_only(status: i32, message: &str, pushback: Option<&str>) -> Response<Frames> {
    let mut response = head(Frames::default());
    status_headers(response.headers_mut(), status, message);
    if let Some(p) = pushback.and_then(|p| HeaderValue::from_str(p).ok()) {
        response.headers_mut().insert("grpc-retry-pushback-ms", p);
    }
    response
}

async fn handle(request: Request<Incoming>, state: &State) -> Result<Response<Frames>, Reset> {
    let previous = request
        .headers()
        .get("grpc-previous-rpc-attempts")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let timeout = request
        .headers()
        .get("grpc-timeout")
        .and_then(|v| DeadlineHeader::GRPC.decode(v.as_bytes()).ok());
    let Ok(body) = request.into_body().collect().await else {
        return Err(Reset);
    };
    let body = body.to_bytes();
    let Some(message) = body.get(5..).and_then(|m| SayRequest::decode(m).ok()) else {
        return Ok(trailers_only(code::INTERNAL, "not a SayRequest", None));
    };
    let Ok(call) = message.key.parse::<u64>() else {
        return Ok(trailers_only(code::INTERNAL, "the key names no call", None));
    };
    let mut attempt = 0;
    let fault = state.ledger.receive(call, false, previous, |n| {
        attempt = n;
        (state.decide)(call, n)
    });
    let reply = || SayReply {
        text: message.text.clone(),
        attempts: attempt,
    };
    match fault {
        GrpcFault::None => {
            let mut trailers = HeaderMap::new();
            status_headers(&mut trailers, code::OK, "");
            Ok(head(Frames::of([
                Ok(Frame::data(frame(&reply()))),
                Ok(Frame::trailers(trailers)),
            ])))
        }
        GrpcFault::Status { code, pushback } => Ok(trailers_only(
            code,
            "the soak server fails this attempt",
            pushback.map(|i| PUSHBACKS[i]),
        )),
        GrpcFault::HeadThenFail { code } => {
            let mut trailers = HeaderMap::new();
            status_headers(&mut trailers, code, "failed after the head");
            Ok(head(Frames::of([Ok(Frame::trailers(trailers))])))
        }
        GrpcFault::ResetAfterHead => {
            // The head and the start of a message, then a reset.
            let mut body =
                Frames::of([Ok(Frame::data(Bytes::from_static(&[0, 0, 0]))), Err(Reset)]);
            body.pause = Some(Box::pin(tokio::time::sleep(RESET_PAUSE)));
            Ok(head(body))
        }
        GrpcFault::ResetBeforeHead => Err(Reset),
        GrpcFault::Stall => {
            tokio::time::sleep(MAX_STALL).await;
            Ok(trailers_only(code::INTERNAL, "stalled", None))
        }
        GrpcFault::EnforceTimeout => {
            tokio::time::sleep(timeout.unwrap_or(MAX_STALL)).await;
            Ok(trailers_only(code::CANCELLED, "Timeout expired", None))
        }
    }
}
