//! [`OptionBody`]: a response body that is a service's own, or empty for
//! an answer a layer made itself (a shed request's 503, an injected fault).

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// A body that is `B`, or nothing: the body of a layer that either
    /// passes the service's response on or answers itself with an empty
    /// one. Empty, it ends at once with no frame and an exact size of 0.
    ///
    /// ```
    /// use http_body::Body;
    /// use steadfast_tower::body::OptionBody;
    ///
    /// let passed = OptionBody::new(String::from("ok"));
    /// assert_eq!(passed.size_hint().exact(), Some(2));
    /// let empty = OptionBody::<String>::empty();
    /// assert!(empty.is_empty() && empty.is_end_stream());
    /// assert_eq!(empty.size_hint().exact(), Some(0));
    /// ```
    #[derive(Debug, Clone, Default)]
    pub struct OptionBody<B> {
        #[pin]
        inner: Option<B>,
    }
}

impl<B> OptionBody<B> {
    /// The body `body`.
    #[must_use]
    pub fn new(body: B) -> Self {
        Self { inner: Some(body) }
    }

    /// An empty body.
    #[must_use]
    pub fn empty() -> Self {
        Self { inner: None }
    }

    /// Whether it is the empty body (not a service's body that is empty).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }

    /// The service's body, if it is one.
    #[must_use]
    pub fn into_inner(self) -> Option<B> {
        self.inner
    }
}

impl<B: Body> Body for OptionBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        match self.project().inner.as_pin_mut() {
            Some(body) => body.poll_frame(cx),
            None => Poll::Ready(None),
        }
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
