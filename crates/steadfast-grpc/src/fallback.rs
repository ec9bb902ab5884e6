//! The fallback of a [`GrpcLayer`](crate::GrpcLayer): what a call that
//! failed sees ([`GrpcFailure`]), what it may answer instead
//! ([`FallbackAnswer`]: a status, or a unary reply message), and the body
//! a reply message is sent in ([`FallbackBody`]).

use std::convert::Infallible;
use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Response};
use http_body::{Body, Frame, SizeHint};
use steadfast::StopReason;
use steadfast::call::Ending;
use steadfast::fallback::{fires, record_fired};

use crate::Code;
use crate::layer::BoxError;

/// A layer's fallback, as the builder stores it: one that answers at once
/// ([`GrpcLayerBuilder::fallback`](crate::GrpcLayerBuilder::fallback)) or
/// one whose answer is a future, a backup service's reply
/// ([`GrpcLayerBuilder::fallback_async`](crate::GrpcLayerBuilder::fallback_async)).
pub(crate) type FallbackFn = dyn Fn(&GrpcFailure<'_>) -> Answering + Send + Sync;

/// The answer of an async fallback, boxed: made only when it is asked.
pub(crate) type LaterAnswer = Pin<Box<dyn Future<Output = Option<FallbackAnswer>> + Send>>;

/// What a fallback answers: at once, or later.
pub(crate) enum Answering {
    /// An answer (or `None`: hand the failure on), now.
    Now(Option<FallbackAnswer>),
    /// A future of one.
    Later(LaterAnswer),
}

/// A fallback that answers at once, as stored.
pub(crate) fn answering_now<F>(f: F) -> Arc<FallbackFn>
where
    F: Fn(&GrpcFailure<'_>) -> Option<FallbackAnswer> + Send + Sync + 'static,
{
    Arc::new(move |failure: &GrpcFailure<'_>| Answering::Now(f(failure)))
}

/// A fallback whose answer is a future, as stored.
pub(crate) fn answering_later<F, Fut>(f: F) -> Arc<FallbackFn>
where
    F: Fn(&GrpcFailure<'_>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<FallbackAnswer>> + Send + 'static,
{
    Arc::new(move |failure: &GrpcFailure<'_>| Answering::Later(Box::pin(f(failure))))
}

/// Where a call with a fallback is once its own answer is in.
pub(crate) enum Finished<T> {
    /// Its result (the call's, or the fallback's answer).
    Done(Result<Response<T>, BoxError>),
    /// Its fallback is answering; `out` is the call's result, returned if
    /// the fallback declines.
    Answering {
        out: Result<Response<T>, BoxError>,
        answer: LaterAnswer,
    },
}

/// The result of a call whose async fallback answered `answer` (`None`:
/// declined, so `out`, the call's own).
pub(crate) fn answered<T: Default + From<FallbackBody>>(
    out: Result<Response<T>, BoxError>,
    answer: Option<FallbackAnswer>,
) -> Result<Response<T>, BoxError> {
    match answer {
        Some(answer) => Ok(answer.into_response()),
        None => out,
    }
}

/// The name a gRPC call's fallback is recorded under (the
/// `steadfast.fallback` counter's `call`, the event's `call`); the event
/// is inside the call's `grpc call` span, which names the method.
const CALL_NAME: &str = "grpc";

/// A call that failed, as its fallback sees it: the method, the status
/// the caller would get (a Trailers-Only failure after the retries and
/// hedges, `DEADLINE_EXCEEDED` for a call out of time, or the error of
/// the transport, counted as `UNAVAILABLE`), and how the call ended (the
/// core's [`Ending`]: the stop reason, the attempts, the waits).
pub struct GrpcFailure<'a> {
    method: &'a str,
    code: Code,
    message: Option<&'a str>,
    headers: Option<&'a HeaderMap>,
    error: Option<&'a (dyn Error + Send + Sync + 'static)>,
    ending: &'a Ending,
}

impl fmt::Debug for GrpcFailure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcFailure")
            .field("method", &self.method)
            .field("code", &self.code)
            .field("message", &self.message)
            .field("error", &self.error.map(ToString::to_string))
            .field("ending", &self.ending)
            .finish_non_exhaustive()
    }
}

impl<'a> GrpcFailure<'a> {
    /// The method's path, `/package.Service/Method`.
    #[must_use]
    pub fn method(&self) -> &'a str {
        self.method
    }

    /// The status the call failed with (`UNAVAILABLE` for an error of the
    /// transport, or any other error the layer returns).
    #[must_use]
    pub fn code(&self) -> Code {
        self.code
    }

    /// The failed response's `grpc-message`, as sent (percent-encoded),
    /// if it has one.
    #[must_use]
    pub fn message(&self) -> Option<&'a str> {
        self.message
    }

    /// The failed response's headers (its metadata), when the call ended
    /// with a response rather than an error.
    #[must_use]
    pub fn headers(&self) -> Option<&'a HeaderMap> {
        self.headers
    }

    /// The error the call ended with, when it ended with one.
    #[must_use]
    pub fn error(&self) -> Option<&'a (dyn Error + Send + Sync + 'static)> {
        self.error
    }

    /// Why the retry or hedge executor stopped.
    #[must_use]
    pub fn reason(&self) -> StopReason {
        self.ending.stop.unwrap_or(StopReason::Exhausted)
    }

    /// Attempts made, counting the first (0 when a limit refused the call).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.ending.attempts
    }

    /// How the call ended.
    #[must_use]
    pub fn ending(&self) -> &'a Ending {
        self.ending
    }
}

/// What a fallback answers a failed call with: a status (Trailers-Only:
/// `grpc-status`, `grpc-message`, and the metadata given) or a unary reply
/// message (the encoded protobuf message, sent as one gRPC frame, then
/// `grpc-status: 0` in the trailers), which the generated client decodes
/// as it would the server's reply.
///
/// ```
/// use steadfast_grpc::{Code, FallbackAnswer};
///
/// let cached = FallbackAnswer::message(vec![0x0a, 0x02, b'h', b'i']); // prost's encode_to_vec()
/// let refusal = FallbackAnswer::status(Code::Unavailable, "the inventory is down; try later")
///     .header(http::HeaderName::from_static("x-served-by"), http::HeaderValue::from_static("fallback"));
/// # let _ = (cached, refusal);
/// ```
#[derive(Debug, Clone)]
pub struct FallbackAnswer {
    kind: AnswerKind,
    headers: HeaderMap,
}

#[derive(Debug, Clone)]
enum AnswerKind {
    Status { code: Code, message: String },
    Message(Bytes),
}

impl FallbackAnswer {
    /// Answers with the status `code` and `message` (percent-encoded on the
    /// wire, as gRPC says).
    #[must_use]
    pub fn status(code: Code, message: &str) -> Self {
        Self {
            kind: AnswerKind::Status {
                code,
                message: message.to_owned(),
            },
            headers: HeaderMap::new(),
        }
    }

    /// Answers with the reply message `encoded` (a protobuf message's bytes,
    /// as prost's `Message::encode_to_vec` makes them), framed as gRPC
    /// sends it: a 0 byte (not compressed), its length as 4 bytes big
    /// endian, the message. A message longer than a frame can say (4 GiB)
    /// is answered `INTERNAL` instead, saying so.
    #[must_use]
    pub fn message(encoded: impl Into<Bytes>) -> Self {
        let encoded = encoded.into();
        let Ok(len) = u32::try_from(encoded.len()) else {
            let message = format!(
                "the fallback's reply of {} bytes does not fit a gRPC frame",
                encoded.len()
            );
            return Self::status(Code::Internal, &message);
        };
        let mut frame = BytesMut::with_capacity(encoded.len() + 5);
        frame.put_u8(0);
        frame.put_u32(len);
        frame.put_slice(&encoded);
        Self {
            kind: AnswerKind::Message(frame.freeze()),
            headers: HeaderMap::new(),
        }
    }

    /// Adds the metadata `name: value` to the answer's headers (gRPC's own
    /// `content-type`, `grpc-status` and `grpc-message` are the layer's and
    /// win over these).
    #[must_use]
    pub fn header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.append(name, value);
        self
    }

    /// The response it is.
    fn into_response<T: Default + From<FallbackBody>>(self) -> Response<T> {
        let Self { kind, headers } = self;
        let mut response = match kind {
            AnswerKind::Status { code, message } => {
                let mut response = Response::new(T::default());
                *response.headers_mut() = headers;
                crate::trailers_only::set_status(
                    response.headers_mut(),
                    u32::from(code.number()),
                    &message,
                );
                return response;
            }
            AnswerKind::Message(frame) => {
                let mut trailers = HeaderMap::new();
                crate::trailers_only::set_status(&mut trailers, 0, "");
                trailers.remove(http::header::CONTENT_TYPE);
                Response::new(T::from(FallbackBody {
                    data: Some(frame),
                    trailers: Some(trailers),
                }))
            }
        };
        *response.headers_mut() = headers;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/grpc"),
        );
        response.headers_mut().remove("grpc-status");
        response.headers_mut().remove("grpc-message");
        response
    }
}

/// The body of a fallback's reply message: its one gRPC frame, then the
/// trailers (`grpc-status: 0`). A response body type the layer answers a
/// fallback's message in converts from it: tonic's `Body` does, here.
#[derive(Debug, Default)]
pub struct FallbackBody {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Body for FallbackBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let len = self.data.as_ref().map_or(0, Bytes::len);
        SizeHint::with_exact(u64::try_from(len).unwrap_or(u64::MAX))
    }
}

impl From<FallbackBody> for tonic::body::Body {
    fn from(body: FallbackBody) -> Self {
        tonic::body::Body::new(body)
    }
}

/// The last step of a call with a fallback: `out` (what the call would
/// return, after the layer's own answer) unless the call failed and its
/// fallback fires ([`fires`]: it stopped for any reason but a
/// cancellation) and answers. A success never falls back; a committed
/// response (a head without `grpc-status`) is a success.
pub(crate) fn finish<T: Default + From<FallbackBody>>(
    out: Result<Response<T>, BoxError>,
    ending: &Ending,
    fallback: Option<&Arc<FallbackFn>>,
    method: &str,
) -> Finished<T> {
    let Some(fallback) = fallback else {
        return Finished::Done(out);
    };
    if !fires(ending.stop) {
        return Finished::Done(out);
    }
    let answer = {
        let failure = match &out {
            Ok(response) => {
                let headers = response.headers();
                let code = match crate::head_status(headers) {
                    Some(Code::Ok) | None => return Finished::Done(out),
                    Some(code) => code,
                };
                GrpcFailure {
                    method,
                    code,
                    message: headers.get("grpc-message").and_then(|v| v.to_str().ok()),
                    headers: Some(headers),
                    error: None,
                    ending,
                }
            }
            Err(error) => GrpcFailure {
                method,
                code: Code::Unavailable,
                message: None,
                headers: None,
                error: Some(&**error),
                ending,
            },
        };
        record_fired(Some(CALL_NAME), ending);
        fallback(&failure)
    };
    match answer {
        Answering::Now(answer) => Finished::Done(answered(out, answer)),
        Answering::Later(answer) => Finished::Answering { out, answer },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use http_body_util::BodyExt;

    use super::*;

    fn ending(stop: Option<StopReason>, attempts: u32) -> Ending {
        let mut ending = Ending::default();
        ending.stop = stop;
        ending.attempts = attempts;
        ending
    }

    fn failed(code: Code) -> Result<Response<tonic::body::Body>, BoxError> {
        Ok(crate::trailers_only::trailers_only(
            u32::from(code.number()),
            "down",
            None,
        ))
    }

    /// A fallback answering a cached status, counting its calls.
    fn counting(calls: &Arc<AtomicU32>) -> Arc<FallbackFn> {
        let calls = calls.clone();
        answering_now(move |f: &GrpcFailure<'_>| {
            calls.fetch_add(1, Ordering::SeqCst);
            assert_eq!(f.method(), "/steadfast.test.Echo/Say");
            Some(FallbackAnswer::status(Code::Ok, ""))
        })
    }

    fn code<T>(out: &Result<Response<T>, BoxError>) -> Option<Code> {
        out.as_ref()
            .ok()
            .and_then(|r| crate::head_status(r.headers()))
    }

    const SAY: &str = "/steadfast.test.Echo/Say";

    /// The result of a call whose fallback (if any) answered at once.
    fn now<T>(finished: Finished<T>) -> Result<Response<T>, BoxError> {
        match finished {
            Finished::Done(out) => out,
            Finished::Answering { .. } => panic!("an async answer from a sync fallback"),
        }
    }

    #[tokio::test]
    async fn an_async_fallback_answers_later_or_declines() {
        let backup = answering_later(|f: &GrpcFailure<'_>| {
            let unavailable = f.code() == Code::Unavailable;
            async move { unavailable.then(|| FallbackAnswer::status(Code::NotFound, "from the backup")) }
        });
        let exhausted = ending(Some(StopReason::Exhausted), 3);
        let Finished::Answering { out, answer } =
            finish(failed(Code::Unavailable), &exhausted, Some(&backup), SAY)
        else {
            panic!("answered at once");
        };
        let result = answered(out, answer.await);
        assert_eq!(code(&result), Some(Code::NotFound));
        // Declined: the call's own result.
        let permanent = ending(Some(StopReason::Permanent), 1);
        let Finished::Answering { out, answer } = finish(
            failed(Code::InvalidArgument),
            &permanent,
            Some(&backup),
            SAY,
        ) else {
            panic!("answered at once");
        };
        assert_eq!(
            code(&answered(out, answer.await)),
            Some(Code::InvalidArgument)
        );
        // Never asked for a cancellation or a success.
        let cancelled = ending(Some(StopReason::Cancelled), 1);
        let out = now(finish(
            failed(Code::Unavailable),
            &cancelled,
            Some(&backup),
            SAY,
        ));
        assert_eq!(code(&out), Some(Code::Unavailable));
        let out = now(finish(
            failed(Code::Ok),
            &ending(None, 1),
            Some(&backup),
            SAY,
        ));
        assert_eq!(code(&out), Some(Code::Ok));
    }

    #[test]
    fn a_cancelled_call_never_falls_back() {
        let calls = Arc::new(AtomicU32::new(0));
        let fallback = counting(&calls);
        let cancelled = ending(Some(StopReason::Cancelled), 2);
        let out = now(finish(
            failed(Code::Cancelled),
            &cancelled,
            Some(&fallback),
            SAY,
        ));
        assert_eq!(code(&out), Some(Code::Cancelled));
        let out = now(finish(
            Err::<Response<tonic::body::Body>, BoxError>("dropped".into()),
            &cancelled,
            Some(&fallback),
            SAY,
        ));
        assert!(out.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_success_never_falls_back() {
        let calls = Arc::new(AtomicU32::new(0));
        let fallback = counting(&calls);
        // A success (no stop), a Trailers-Only OK, a committed head.
        let out = now(finish(
            failed(Code::Ok),
            &ending(None, 1),
            Some(&fallback),
            SAY,
        ));
        assert_eq!(code(&out), Some(Code::Ok));
        let committed = Ok(Response::new(tonic::body::Body::empty()));
        let out = now(finish(
            committed,
            &ending(Some(StopReason::Exhausted), 3),
            Some(&fallback),
            SAY,
        ));
        assert!(out.is_ok_and(|r| crate::head_status(r.headers()).is_none()));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_failure_falls_back_once_and_sees_how_it_ended() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let fallback: Arc<FallbackFn> = {
            let seen = seen.clone();
            answering_now(move |f: &GrpcFailure<'_>| {
                seen.lock().expect("lock").push((
                    f.code(),
                    f.reason(),
                    f.attempts(),
                    f.message().map(str::to_owned),
                    f.error().map(ToString::to_string),
                ));
                (f.code() == Code::Unavailable)
                    .then(|| FallbackAnswer::status(Code::NotFound, "from the fallback"))
            })
        };
        let exhausted = ending(Some(StopReason::Exhausted), 4);
        let out = now(finish(
            failed(Code::Unavailable),
            &exhausted,
            Some(&fallback),
            SAY,
        ));
        assert_eq!(code(&out), Some(Code::NotFound));
        let headers = out.as_ref().map(Response::headers).expect("a response");
        assert_eq!(headers["grpc-message"], "from the fallback");
        // A fallback that declines hands the failure on.
        let permanent = ending(Some(StopReason::Permanent), 1);
        let out = now(finish(
            failed(Code::InvalidArgument),
            &permanent,
            Some(&fallback),
            SAY,
        ));
        assert_eq!(code(&out), Some(Code::InvalidArgument));
        // An error counts as UNAVAILABLE.
        let out = now(finish(
            Err::<Response<tonic::body::Body>, BoxError>("connection refused".into()),
            &exhausted,
            Some(&fallback),
            SAY,
        ));
        assert_eq!(code(&out), Some(Code::NotFound));
        // No fallback: the outcome as it was.
        assert_eq!(
            code(&now(finish(
                failed(Code::Unavailable),
                &exhausted,
                None,
                SAY
            ))),
            Some(Code::Unavailable)
        );
        let seen = seen.lock().expect("lock");
        assert_eq!(
            *seen,
            [
                (
                    Code::Unavailable,
                    StopReason::Exhausted,
                    4,
                    Some("down".to_owned()),
                    None
                ),
                (
                    Code::InvalidArgument,
                    StopReason::Permanent,
                    1,
                    Some("down".to_owned()),
                    None
                ),
                (
                    Code::Unavailable,
                    StopReason::Exhausted,
                    4,
                    None,
                    Some("connection refused".to_owned())
                ),
            ]
        );
    }

    #[tokio::test]
    async fn a_message_answer_is_one_grpc_frame_then_ok_trailers() {
        let answer = FallbackAnswer::message(Bytes::from_static(b"\x0a\x02hi")).header(
            HeaderName::from_static("x-served-by"),
            HeaderValue::from_static("fallback"),
        );
        let response: Response<FallbackBody> = answer.into_response();
        let (parts, body) = response.into_parts();
        assert_eq!(parts.headers["content-type"], "application/grpc");
        assert_eq!(parts.headers["x-served-by"], "fallback");
        assert!(
            parts.headers.get("grpc-status").is_none(),
            "not Trailers-Only"
        );
        assert_eq!(body.size_hint().exact(), Some(9));
        let collected = body.collect().await.expect("infallible");
        let trailers = collected.trailers().cloned().expect("trailers");
        assert_eq!(trailers["grpc-status"], "0");
        assert_eq!(
            collected.to_bytes().as_ref(),
            b"\x00\x00\x00\x00\x04\x0a\x02hi"
        );
        // A status answer keeps its metadata, and gRPC's headers are the layer's.
        let answer = FallbackAnswer::status(Code::Unavailable, "try later").header(
            HeaderName::from_static("grpc-status"),
            HeaderValue::from_static("0"),
        );
        let response: Response<FallbackBody> = answer.into_response();
        assert_eq!(response.headers()["grpc-status"], "14");
        assert!(response.body().is_end_stream());
    }
}
