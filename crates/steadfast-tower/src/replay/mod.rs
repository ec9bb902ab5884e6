//! Replay: can this request be sent again, and how?
//!
//! The retry and hedge layers ask one question of every request before its
//! first attempt: can it be sent more than once? A [`Replay`] answers it and
//! keeps what is needed to make each attempt's copy:
//!
//! - [`CloneReplay`] (the default) keeps a `Clone` request and clones it for
//!   every attempt;
//! - [`HttpReplay`] buffers an `http::Request`'s body, up to a limit
//!   (64 KiB by default), into shared [`Bytes`](bytes::Bytes): every attempt
//!   gets the same bytes, never a copy. A body over the limit is sent once,
//!   as it streams, and never retried.
//!
//! A request that cannot be replayed is sent exactly once. If that attempt
//! fails in a way that would have been retried, the error says why it was
//! not: [`StopReason::NotReplayable`](steadfast::StopReason::NotReplayable).

mod body;
mod http;

use std::fmt;
use std::future::Pending;

use steadfast::Attempt;

pub use self::body::ReplayBody;
pub use self::http::{BufferBody, BufferedRequest, DEFAULT_REPLAY_LIMIT, HttpReplay};

/// Says whether a request can be sent again, and makes each attempt's copy.
///
/// [`prepare`](Replay::prepare) runs once per call, before the first
/// attempt: it answers at once when it can (a `Clone` request, a body-less
/// HTTP request), or with a future that reads what it needs (a body to
/// buffer). [`replay`](Replay::replay) makes the request of every attempt
/// from what it kept.
///
/// ```
/// use steadfast::Attempt;
/// use steadfast_tower::replay::{CloneReplay, Prepared, Preparing, Replay};
///
/// let Preparing::Done(Prepared::Replayable(kept)) = CloneReplay.prepare("GET /users/7".to_string()) else {
///     unreachable!("a Clone request can always be replayed, at once");
/// };
/// assert_eq!(CloneReplay.replay(&kept, &Attempt::new(1)), "GET /users/7");
/// ```
pub trait Replay<Req> {
    /// The request the inner service receives.
    type Request;
    /// What is kept between attempts to make the next copy.
    type Source;
    /// The future of a [`prepare`](Replay::prepare) that must read first.
    type Prepare: Future<Output = Prepared<Self::Source, Self::Request>>;

    /// Readies `request` for attempts: keeps it for replay, or, when it
    /// cannot be replayed, hands it back to be sent once; at once, or
    /// through a future when something must be read first.
    fn prepare(&self, request: Req) -> Preparing<Self::Prepare, Self::Source, Self::Request>;

    /// The request for `attempt`, made from what [`prepare`](Replay::prepare)
    /// kept. The attempt's number lets a protocol mark retries (gRPC's
    /// `grpc-previous-rpc-attempts`); for a hedge it is the copy's number.
    fn replay(&self, source: &Self::Source, attempt: &Attempt) -> Self::Request;

    /// The request that can be sent only once, as [`prepare`](Replay::prepare)
    /// handed it back, readied for `attempt` (the only one): a protocol
    /// that routes by [`Attempt::endpoint`] sets it here. Unchanged by
    /// default.
    fn once(&self, request: Self::Request, attempt: &Attempt) -> Self::Request {
        let _ = attempt;
        request
    }
}

/// What [`Replay::prepare`] answers: the prepared request, or the future
/// that prepares it.
#[derive(Debug)]
pub enum Preparing<F, S, R> {
    /// Prepared at once.
    Done(Prepared<S, R>),
    /// Being prepared (a body being read).
    Reading(F),
}

/// What [`Replay::prepare`] made of a request.
#[derive(Debug)]
pub enum Prepared<S, R> {
    /// It can be sent as often as needed; this is what makes each copy.
    Replayable(S),
    /// It can be sent only once, for this reason.
    Once(R, NotReplayable),
}

/// Why a request can be sent only once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NotReplayable {
    /// The body is larger than the replay buffer.
    BodyTooLarge {
        /// The buffer's limit, in bytes.
        limit: usize,
    },
    /// Reading the body failed before it was all buffered; the request is
    /// sent with what was read and the error, which the inner service sees.
    BodyError,
    /// The body was not all there when the call started (a stream still
    /// being written, such as a client-streaming gRPC call), and the replay
    /// does not wait for it ([`HttpReplay::without_waiting`]).
    BodyStreaming,
    /// The body is a stream that the request type cannot copy (a
    /// `reqwest::Body` made from a stream, say); it is sent as it is.
    Streaming,
}

impl fmt::Display for NotReplayable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BodyTooLarge { limit } => {
                write!(f, "the body is larger than the {limit}-byte replay buffer")
            }
            Self::BodyError => f.write_str("reading the body failed before it was buffered"),
            Self::BodyStreaming => {
                f.write_str("the body was still streaming when the call started")
            }
            Self::Streaming => f.write_str("the body is a stream that cannot be copied"),
        }
    }
}

/// Replays a `Clone` request by cloning it for every attempt (the default).
///
/// ```
/// use steadfast::Attempt;
/// use steadfast_tower::replay::{CloneReplay, Replay};
/// assert_eq!(CloneReplay.replay(&42_u32, &Attempt::new(2)), 42);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CloneReplay;

impl<Req: Clone> Replay<Req> for CloneReplay {
    type Request = Req;
    type Source = Req;
    type Prepare = Pending<Prepared<Req, Req>>;

    #[inline]
    fn prepare(&self, request: Req) -> Preparing<Self::Prepare, Req, Req> {
        Preparing::Done(Prepared::Replayable(request))
    }

    #[inline]
    fn replay(&self, source: &Req, _: &Attempt) -> Req {
        source.clone()
    }
}
