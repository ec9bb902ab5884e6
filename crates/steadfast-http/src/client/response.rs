use std::future::Future;
use std::ops::Deref;

use steadfast::Deadline;
use steadfast::call::Ending;
use steadfast::clock::DefaultClock;

use super::body_error::BodyError;

/// A response, and how the call went ([`ending`](Self::ending)).
///
/// It derefs to the `reqwest::Response` for its status, headers and URL;
/// the body methods that consume it are here, and
/// [`into_inner`](Self::into_inner) gives the reqwest response back.
///
/// **The call's deadline covers the body.** The body methods here read it
/// within the deadline the call ran under (its own, the ambient one, the
/// policy's `max_elapsed`), as reqwest's own `timeout` covers its body: a
/// body that trickles in past it ends in [`BodyError::DeadlineExceeded`].
/// The reqwest response from [`into_inner`](Self::into_inner) knows
/// nothing of it: read [`deadline`](Self::deadline) to bound it yourself.
#[derive(Debug)]
pub struct Response {
    inner: reqwest::Response,
    ending: Ending,
    deadline: Option<Deadline>,
}

impl Response {
    pub(super) fn new(
        inner: reqwest::Response,
        ending: Ending,
        deadline: Option<Deadline>,
    ) -> Self {
        Self {
            inner,
            ending,
            deadline,
        }
    }

    /// The deadline the call ran under, which bounds reading the body.
    #[must_use]
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// How the call went: attempts made (with hedging, copies sent), the
    /// time spent waiting between attempts, and a hedged call's copies (the
    /// core's [`Ending`]). `stop` is `None` for a success; it is `Some` only
    /// for a fallback's answer (a response the engine gave up on, such as a
    /// retried 503 that ran out of attempts, is an [`Error`](crate::Error)
    /// unless the client's fallback answers it), which also says
    /// [`fell_back`](Ending::fell_back).
    #[must_use]
    pub fn ending(&self) -> Ending {
        self.ending
    }

    /// The reqwest response, whose body reads are no longer bounded by the
    /// call's deadline ([`deadline`](Self::deadline) says what it was).
    #[must_use]
    pub fn into_inner(self) -> reqwest::Response {
        self.inner
    }

    /// The whole body, read within the call's deadline.
    ///
    /// # Errors
    /// [`BodyError`]: the transport's error, or the deadline passed first.
    pub async fn bytes(self) -> Result<bytes::Bytes, BodyError> {
        within(self.deadline, self.inner.bytes()).await
    }

    /// The whole body as text (UTF-8, lossy), read within the call's
    /// deadline.
    ///
    /// # Errors
    /// [`BodyError`]: the transport's error, or the deadline passed first.
    pub async fn text(self) -> Result<String, BodyError> {
        let bytes = within(self.deadline, self.inner.bytes()).await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The next chunk of the body, `None` at its end, read within the
    /// call's deadline.
    ///
    /// # Errors
    /// [`BodyError`]: the transport's error, or the deadline passed first.
    pub async fn chunk(&mut self) -> Result<Option<bytes::Bytes>, BodyError> {
        within(self.deadline, self.inner.chunk()).await
    }

    /// The response, or an error if its status is 4xx or 5xx.
    ///
    /// # Errors
    /// reqwest's status error.
    pub fn error_for_status(self) -> reqwest::Result<Self> {
        let (ending, deadline) = (self.ending, self.deadline);
        self.inner.error_for_status().map(|inner| Self {
            inner,
            ending,
            deadline,
        })
    }
}

/// `read`, cut off at `deadline` if there is one.
async fn within<T>(
    deadline: Option<Deadline>,
    read: impl Future<Output = reqwest::Result<T>>,
) -> Result<T, BodyError> {
    match deadline {
        None => read.await.map_err(BodyError::Transport),
        Some(d) => match steadfast::deadline::timeout_at(DefaultClock::default(), d, read).await {
            Ok(read) => read.map_err(BodyError::Transport),
            Err(_) => Err(BodyError::DeadlineExceeded),
        },
    }
}

impl Deref for Response {
    type Target = reqwest::Response;

    fn deref(&self) -> &reqwest::Response {
        &self.inner
    }
}
