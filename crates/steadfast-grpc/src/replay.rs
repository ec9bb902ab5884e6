//! Replay of gRPC requests: the encoded messages buffered once, and every
//! attempt after the first marked with `grpc-previous-rpc-attempts`.

use bytes::Bytes;
use http::{HeaderValue, Request};
use http_body::Body;
use steadfast::Attempt;
use steadfast_tower::replay::{BufferedRequest, HttpReplay, Preparing, Replay, ReplayBody};

/// The default per-call replay buffer for gRPC requests: 256 KiB.
pub const DEFAULT_GRPC_REPLAY_LIMIT: usize = 256 * 1024;

/// The header that tells the server how many attempts of this call came
/// before this one (gRFC A6).
pub const PREVIOUS_ATTEMPTS_HEADER: &str = "grpc-previous-rpc-attempts";

/// Buffers a gRPC request's encoded messages (up to a limit, 256 KiB by
/// default) and sends them again on every attempt, with
/// `grpc-previous-rpc-attempts` on every attempt after the first. A request
/// larger than the limit is sent once, and never retried or hedged; so is a
/// request stream still being written when the call starts (client or bidi
/// streaming): it is never waited for, so an interactive stream cannot
/// stall.
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use steadfast::Attempt;
/// use steadfast_grpc::GrpcReplay;
/// use steadfast_tower::replay::{Prepared, Preparing, Replay, ReplayBody};
///
/// # futures::executor::block_on(async {
/// let replay = GrpcReplay::default();
/// let request = http::Request::post("/pkg.Svc/Get").body(Full::new(Bytes::from_static(b"\0\0\0\0\x01A"))).unwrap();
/// let prepared = match replay.prepare(request) {
///     Preparing::Done(p) => p,
///     Preparing::Reading(buffering) => buffering.await,
/// };
/// let Prepared::Replayable(kept) = prepared else { unreachable!() };
/// let third: http::Request<ReplayBody<Full<Bytes>>> = replay.replay(&kept, &Attempt::new(3));
/// assert_eq!(third.headers()["grpc-previous-rpc-attempts"], "2");
/// # });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrpcReplay {
    http: HttpReplay,
}

impl Default for GrpcReplay {
    fn default() -> Self {
        Self::new(DEFAULT_GRPC_REPLAY_LIMIT)
    }
}

impl GrpcReplay {
    /// Buffers requests of up to `limit` bytes.
    #[must_use]
    pub const fn new(limit: usize) -> Self {
        Self {
            http: HttpReplay::new(limit).without_waiting(),
        }
    }
}

impl<B> Replay<Request<B>> for GrpcReplay
where
    B: Body<Data = Bytes> + Unpin,
{
    type Request = Request<ReplayBody<B>>;
    type Source = BufferedRequest;
    type Prepare = <HttpReplay as Replay<Request<B>>>::Prepare;

    fn prepare(
        &self,
        request: Request<B>,
    ) -> Preparing<Self::Prepare, BufferedRequest, Self::Request> {
        self.http.prepare(request)
    }

    fn replay(&self, source: &BufferedRequest, attempt: &Attempt) -> Self::Request {
        let mut request: Self::Request = self.http.replay(source, attempt);
        tracing::trace!(
            attempt = attempt.number,
            in_flight = attempt.in_flight.len(),
            "steadfast: gRPC attempt sent"
        );
        if attempt.number > 1 {
            request.headers_mut().insert(
                PREVIOUS_ATTEMPTS_HEADER,
                HeaderValue::from(attempt.number - 1),
            );
        }
        mark_endpoint(&mut request, attempt);
        request
    }

    fn once(&self, mut request: Self::Request, attempt: &Attempt) -> Self::Request {
        mark_endpoint(&mut request, attempt);
        request
    }
}

/// Marks `request` with the endpoint the gate picked for `attempt`, if it
/// picked one, for the service below to send it there
/// ([`Replicas`](crate::Replicas)).
fn mark_endpoint<B>(request: &mut Request<B>, attempt: &Attempt) {
    if let Some(id) = attempt.endpoint {
        request.extensions_mut().insert(id);
    }
}
