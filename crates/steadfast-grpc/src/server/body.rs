//! [`ShedBody`]: a gRPC response body that holds its call's slot until the
//! call is done.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use steadfast::limit::{Permit, Signal};

use super::status_signal;

pin_project! {
    /// The body of a response through a [`Shed`](super::Shed) service: the
    /// service's own body, holding the call's slot of the limit until its
    /// end (then the slot goes back with what the call's `grpc-status`
    /// says, see the [module docs](super)) or until it is dropped
    /// unfinished ([`Signal::Ignored`]); or the empty body of a shed call.
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_grpc::server::ShedLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limit = ConcurrencyLimit::fixed(4).build()?;
    /// let handler = service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("message")))
    /// });
    /// let response = ShedLayer::new(limit).layer(handler).oneshot(http::Request::new(())).await?;
    /// assert!(response.body().holds_slot());
    /// # Ok(()) }
    /// ```
    pub struct ShedBody<B> {
        #[pin]
        inner: Option<B>,
        slot: Option<Permit>,
        // The call's signal, once its status is known.
        signal: Option<Signal>,
    }
}

impl<B: Body> ShedBody<B> {
    /// `body`, holding `permit` until it ends, the call's signal already
    /// known if its head carried the status (Trailers-Only); a body with
    /// nothing to send gives the slot back now.
    pub(super) fn holding(body: B, permit: Option<Permit>, signal: Option<Signal>) -> Self {
        let mut this = Self {
            inner: Some(body),
            slot: permit,
            signal,
        };
        if this.inner.as_ref().is_some_and(Body::is_end_stream) {
            release(&mut this.slot, this.signal);
        }
        this
    }
}

impl<B> ShedBody<B> {
    /// The empty body of a shed call.
    pub(super) fn empty() -> Self {
        Self {
            inner: None,
            slot: None,
            signal: None,
        }
    }

    /// Whether it still holds its call's slot.
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_grpc::server::ShedLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limit = ConcurrencyLimit::fixed(4).build()?;
    /// let handler = service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// });
    /// let response = ShedLayer::new(limit).layer(handler).oneshot(http::Request::new(())).await?;
    /// assert!(!response.body().holds_slot()); // nothing to send: given back
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn holds_slot(&self) -> bool {
        self.slot.is_some()
    }
}

/// Gives the slot back with the call's signal (none known: ignored).
fn release(slot: &mut Option<Permit>, signal: Option<Signal>) {
    if let Some(permit) = slot.take() {
        permit.finish(signal.unwrap_or(Signal::Ignored));
    }
}

impl<B: Body> Body for ShedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return Poll::Ready(None);
        };
        let frame = ready!(inner.poll_frame(cx));
        match &frame {
            None => release(this.slot, *this.signal),
            // The body failed: the call is cut short, and says nothing of
            // the server's capacity.
            Some(Err(_)) => drop(this.slot.take()),
            // Trailers end a response: the call's status is in them.
            Some(Ok(frame)) if frame.is_trailers() => {
                let status = frame.trailers_ref().and_then(status_signal);
                release(this.slot, status.or(*this.signal));
            }
            Some(Ok(_)) => {
                if this
                    .inner
                    .as_ref()
                    .get_ref()
                    .as_ref()
                    .is_some_and(Body::is_end_stream)
                {
                    release(this.slot, *this.signal);
                }
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl<B> fmt::Debug for ShedBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedBody")
            .field("shed", &self.inner.is_none())
            .field("holds_slot", &self.slot.is_some())
            .finish_non_exhaustive()
    }
}
