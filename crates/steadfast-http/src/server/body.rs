//! [`ShedBody`]: a response body that holds its request's slot until it
//! has been sent.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use steadfast::limit::{Permit, Signal};

pin_project! {
    /// The body of a response through a [`Shed`](super::Shed) service: the
    /// service's own body, holding the request's slot of the limit until
    /// its last frame has been read (then the slot goes back with what the
    /// response's status says, see the [module docs](super)) or until it is
    /// dropped unfinished (the slot goes back as
    /// [`Signal::Ignored`]); or the empty body of a shed request.
    ///
    /// ```
    /// use http_body_util::BodyExt;
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_http::server::ShedLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limit = ConcurrencyLimit::fixed(4).build()?;
    /// let handler = service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("report")))
    /// });
    /// let response = ShedLayer::new(limit.clone()).layer(handler).oneshot(http::Request::new(())).await?;
    /// assert_eq!(limit.in_flight(), 1); // the body is not sent yet
    /// let body = response.into_body().collect().await?.to_bytes();
    /// assert_eq!((&body[..], limit.in_flight()), (&b"report"[..], 0));
    /// # Ok(()) }
    /// ```
    pub struct ShedBody<B> {
        #[pin]
        inner: Option<B>,
        slot: Option<(Permit, Signal)>,
    }
}

impl<B: Body> ShedBody<B> {
    /// `body`, holding `permit` until it ends; a body that has nothing to
    /// send gives the slot back now.
    pub(super) fn holding(body: B, permit: Option<Permit>, signal: Signal) -> Self {
        let slot = permit.map(|p| (p, signal));
        let mut this = Self {
            inner: Some(body),
            slot,
        };
        if this.inner.as_ref().is_some_and(Body::is_end_stream) {
            release(&mut this.slot);
        }
        this
    }
}

impl<B> ShedBody<B> {
    /// The empty body of a shed request.
    pub(super) fn empty() -> Self {
        Self {
            inner: None,
            slot: None,
        }
    }

    /// Whether it still holds its request's slot.
    ///
    /// ```
    /// use steadfast::limit::ConcurrencyLimit;
    /// use steadfast_http::server::ShedLayer;
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limit = ConcurrencyLimit::fixed(4).build()?;
    /// let handler = service_fn(|_: http::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("x")))
    /// });
    /// let response = ShedLayer::new(limit).layer(handler).oneshot(http::Request::new(())).await?;
    /// assert!(response.body().holds_slot());
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn holds_slot(&self) -> bool {
        self.slot.is_some()
    }
}

/// Gives the slot back with the response's signal.
fn release(slot: &mut Option<(Permit, Signal)>) {
    if let Some((permit, signal)) = slot.take() {
        permit.finish(signal);
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
            None => release(this.slot),
            // The body failed: the response is cut short, and says nothing
            // of the server's capacity.
            Some(Err(_)) => drop(this.slot.take()),
            // Trailers are a body's last frame.
            Some(Ok(frame)) if frame.is_trailers() => release(this.slot),
            Some(Ok(_)) => {
                if this
                    .inner
                    .as_ref()
                    .get_ref()
                    .as_ref()
                    .is_some_and(Body::is_end_stream)
                {
                    release(this.slot);
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
            .finish()
    }
}
