//! Replay of HTTP requests, as properties over any body split into any
//! frames and any limit: a body within the limit is buffered and every
//! attempt gets exactly its bytes (and trailers); a larger one is sent once
//! with exactly its bytes, in order; a failing body is sent once and ends in
//! its error; a body known to be too large is not read at all.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::stream;
use http::{HeaderMap, HeaderValue, Request};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, StreamBody};
use proptest::prelude::*;
use steadfast_tower::replay::{
    CloneReplay, HttpReplay, NotReplayable, Prepared, Preparing, Replay, ReplayBody,
};

type Frames = StreamBody<stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>>;

fn body(chunks: &[Vec<u8>], trailers: bool, fail: bool) -> Frames {
    let mut frames: Vec<Result<Frame<Bytes>, std::io::Error>> = chunks
        .iter()
        .map(|c| Ok(Frame::data(Bytes::from(c.clone()))))
        .collect();
    if fail {
        frames.push(Err(std::io::Error::other("client went away")));
    }
    if trailers {
        let mut t = HeaderMap::new();
        t.insert("x-checksum", HeaderValue::from_static("abc"));
        frames.push(Ok(Frame::trailers(t)));
    }
    StreamBody::new(stream::iter(frames))
}

fn prepare<B>(
    replay: HttpReplay,
    request: Request<B>,
) -> Prepared<steadfast_tower::replay::BufferedRequest, Request<ReplayBody<B>>>
where
    B: Body<Data = Bytes> + Unpin,
{
    match replay.prepare(request) {
        Preparing::Done(p) => p,
        Preparing::Reading(f) => futures::executor::block_on(f),
    }
}

/// Everything a body yields: its bytes, its trailers, and whether it ended
/// in an error.
fn drain<B: Body<Data = Bytes> + Unpin>(body: B) -> (Vec<u8>, Option<HeaderMap>, bool)
where
    B::Error: std::fmt::Debug,
{
    futures::executor::block_on(async {
        let mut body = body;
        let mut bytes = Vec::new();
        let mut trailers = None;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => match frame.into_data() {
                    Ok(d) => bytes.extend_from_slice(&d),
                    Err(frame) => trailers = frame.into_trailers().ok(),
                },
                Err(_) => return (bytes, trailers, true),
            }
        }
        (bytes, trailers, false)
    })
}

proptest! {
    #[test]
    fn any_body_within_the_limit_replays_exactly_and_a_larger_one_is_sent_once_intact(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..12),
        limit in 0usize..512,
        trailers in any::<bool>(),
    ) {
        let all: Vec<u8> = chunks.concat();
        let request = Request::post("http://svc.test/items")
            .header("x-request-id", "42")
            .body(body(&chunks, trailers, false))
            .expect("valid request");
        let replay = HttpReplay::new(limit);
        match prepare(replay, request) {
            Prepared::Replayable(kept) => {
                prop_assert!(all.len() <= limit);
                for _ in 0..3 {
                    let copy: Request<ReplayBody<Frames>> = replay.replay(&kept, &steadfast::Attempt::new(2));
                    prop_assert_eq!(copy.headers()["x-request-id"].as_bytes(), b"42");
                    prop_assert_eq!(copy.body().size_hint().exact(), Some(all.len() as u64));
                    let (bytes, got_trailers, failed) = drain(copy.into_body());
                    prop_assert_eq!(&bytes, &all);
                    prop_assert_eq!(got_trailers.is_some(), trailers);
                    prop_assert!(!failed);
                }
            }
            Prepared::Once(request, why) => {
                prop_assert!(all.len() > limit);
                prop_assert_eq!(why, NotReplayable::BodyTooLarge { limit });
                prop_assert_eq!(request.headers()["x-request-id"].as_bytes(), b"42");
                let (bytes, got_trailers, failed) = drain(request.into_body());
                prop_assert_eq!(&bytes, &all);
                prop_assert_eq!(got_trailers.is_some(), trailers);
                prop_assert!(!failed);
            }
        }
    }

    #[test]
    fn a_body_that_fails_while_buffered_is_sent_once_and_ends_in_its_error(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..32), 0..6),
    ) {
        let request = Request::put("http://svc.test/").body(body(&chunks, false, true)).expect("valid request");
        match prepare(HttpReplay::new(1 << 20), request) {
            Prepared::Once(request, why) => {
                prop_assert_eq!(why, NotReplayable::BodyError);
                let (bytes, _, failed) = drain(request.into_body());
                prop_assert_eq!(bytes, chunks.concat());
                prop_assert!(failed);
            }
            Prepared::Replayable(_) => prop_assert!(false, "a failed body cannot be replayed"),
        }
    }
}

/// A body that says it is large and must never be read.
struct Huge;

impl Body for Huge {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        panic!("a body known to be over the limit must not be read before it is sent");
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(10 << 20)
    }
}

#[test]
fn a_body_known_to_be_too_large_is_not_read_before_it_is_sent() {
    let request = Request::post("http://svc.test/upload")
        .body(Huge)
        .expect("valid request");
    let Preparing::Done(Prepared::Once(request, why)) = HttpReplay::default().prepare(request)
    else {
        panic!("expected to be sent once, at once");
    };
    assert_eq!(why, NotReplayable::BodyTooLarge { limit: 64 * 1024 });
    assert_eq!(request.body().size_hint().exact(), Some(10 << 20));
}

#[test]
fn a_request_without_a_body_is_replayable_at_once() {
    let request = Request::get("http://svc.test/")
        .body(http_body_util::Empty::<Bytes>::new())
        .expect("valid request");
    let Preparing::Done(Prepared::Replayable(kept)) = HttpReplay::new(0).prepare(request) else {
        panic!("an empty body needs no buffering");
    };
    assert!(kept.body().is_empty());
}

#[test]
fn a_clone_request_is_cloned_for_every_attempt() {
    let Preparing::Done(Prepared::Replayable(kept)) = CloneReplay.prepare(vec![1, 2, 3]) else {
        panic!("Clone requests replay");
    };
    assert_eq!(
        CloneReplay.replay(&kept, &steadfast::Attempt::new(2)),
        vec![1, 2, 3]
    );
}

/// The crate README shows `examples/hyper_stack.rs` verbatim; this keeps
/// the two from drifting apart.
#[test]
fn the_readme_shows_the_example_program() {
    let readme = include_str!("../README.md");
    let example = include_str!("../examples/hyper_stack.rs");
    assert!(
        readme.contains(example),
        "README.md no longer shows examples/hyper_stack.rs"
    );
}

/// A body whose writer has not finished is not waited for by a replay that
/// does not wait: it is sent once, at once, with what was read and the rest.
#[test]
fn a_streaming_body_is_not_waited_for_without_waiting() {
    let (mut tx, body) = {
        let (tx, rx) = futures::channel::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
        (tx, StreamBody::new(rx))
    };
    tx.try_send(Ok(Frame::data(Bytes::from_static(b"first"))))
        .expect("room");
    let request = Request::post("http://svc.test/stream")
        .body(body)
        .expect("valid request");
    let prepared = match HttpReplay::default().without_waiting().prepare(request) {
        Preparing::Done(p) => p,
        Preparing::Reading(f) => futures::executor::block_on(f),
    };
    let Prepared::Once(request, why) = prepared else {
        panic!("a body still being written must not be waited for");
    };
    assert_eq!(why, NotReplayable::BodyStreaming);
    // The writer goes on; the request carries all of it, in order.
    tx.try_send(Ok(Frame::data(Bytes::from_static(b" second"))))
        .expect("room");
    drop(tx);
    let (bytes, _, failed) = drain(request.into_body());
    assert_eq!(bytes, b"first second");
    assert!(!failed);
}
