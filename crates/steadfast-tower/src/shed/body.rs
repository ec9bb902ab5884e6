//! [`ShedBody`]: a response body that holds its request's slot until it
//! has been sent.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use steadfast::limit::{Permit, Signal};

use super::Shedding;
use crate::body::OptionBody;

/// A held slot: its permit, the signal the response's head gave, and the
/// protocol that reads the trailers.
struct Slot<P> {
    permit: Permit,
    signal: Option<Signal>,
    protocol: P,
}

pin_project! {
    /// The body of a response through a [`Shed`](super::Shed) service: the
    /// service's own body, holding the request's slot of the limit until
    /// its end (then the slot goes back with the protocol's signal, see the
    /// [module docs](super)) or until it is dropped unfinished (the slot
    /// goes back as [`Signal::Ignored`]); or the empty body of a refusal.
    pub struct ShedBody<B, P> {
        #[pin]
        inner: OptionBody<B>,
        slot: Option<Slot<P>>,
    }
}

impl<B: Body, P: Shedding> ShedBody<B, P> {
    /// `body`, holding `permit` until it ends, with the head's `signal`; a
    /// body with nothing to send gives the slot back now.
    pub(super) fn holding(body: B, permit: Permit, signal: Option<Signal>, protocol: P) -> Self {
        let end = body.is_end_stream();
        let mut this = Self {
            inner: OptionBody::new(body),
            slot: Some(Slot {
                permit,
                signal,
                protocol,
            }),
        };
        if end {
            release(&mut this.slot, None);
        }
        this
    }
}

impl<B, P> ShedBody<B, P> {
    /// The empty body of a refusal.
    pub(super) fn empty() -> Self {
        Self {
            inner: OptionBody::empty(),
            slot: None,
        }
    }

    /// Whether it still holds its request's slot.
    #[must_use]
    pub fn holds_slot(&self) -> bool {
        self.slot.is_some()
    }
}

/// Gives the slot back with the trailers' signal, else the head's, else
/// as nothing.
fn release<P>(slot: &mut Option<Slot<P>>, trailers: Option<Signal>) {
    if let Some(slot) = slot.take() {
        let signal = trailers.or(slot.signal).unwrap_or(Signal::Ignored);
        slot.permit.finish(signal);
    }
}

impl<B: Body, P: Shedding> Body for ShedBody<B, P> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.inner.as_mut().poll_frame(cx));
        match &frame {
            // The end (at once for the empty body of a refusal, which holds
            // no slot).
            None => release(this.slot, None),
            // The body failed: the response is cut short, and says nothing
            // of the server's capacity.
            Some(Err(_)) => drop(this.slot.take()),
            // Trailers are a body's last frame, and may say how it ended.
            Some(Ok(frame)) if frame.is_trailers() => {
                let signal = match (frame.trailers_ref(), this.slot.as_ref()) {
                    (Some(trailers), Some(slot)) => slot.protocol.on_trailers(trailers),
                    _ => None,
                };
                release(this.slot, signal);
            }
            Some(Ok(_)) => {
                if this.inner.is_end_stream() {
                    release(this.slot, None);
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B, P> fmt::Debug for ShedBody<B, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedBody")
            .field("shed", &self.inner.is_empty())
            .field("holds_slot", &self.slot.is_some())
            .finish_non_exhaustive()
    }
}
