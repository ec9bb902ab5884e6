use std::ops::Deref;

use steadfast::call::Ending;

/// A response, and how the call went ([`ending`](Self::ending)).
///
/// It derefs to the `reqwest::Response` for its status, headers and URL;
/// the body methods that consume it are here, and
/// [`into_inner`](Self::into_inner) gives the reqwest response back.
#[derive(Debug)]
pub struct Response {
    inner: reqwest::Response,
    ending: Ending,
}

impl Response {
    pub(super) fn new(inner: reqwest::Response, ending: Ending) -> Self {
        Self { inner, ending }
    }

    /// How the call went: attempts made (with hedging, copies sent), the
    /// time spent waiting between attempts, and a hedged call's copies (the
    /// core's [`Ending`]; `stop` is `Some` for a response the engine gave up
    /// on, such as a retried 503 that ran out of attempts).
    #[must_use]
    pub fn ending(&self) -> Ending {
        self.ending
    }

    /// The reqwest response.
    #[must_use]
    pub fn into_inner(self) -> reqwest::Response {
        self.inner
    }

    /// The whole body.
    ///
    /// # Errors
    /// reqwest's error if reading the body fails.
    pub async fn bytes(self) -> reqwest::Result<bytes::Bytes> {
        self.inner.bytes().await
    }

    /// The whole body as text (UTF-8, lossy).
    ///
    /// # Errors
    /// reqwest's error if reading the body fails.
    pub async fn text(self) -> reqwest::Result<String> {
        let bytes = self.inner.bytes().await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The next chunk of the body, `None` at its end.
    ///
    /// # Errors
    /// reqwest's error if reading the body fails.
    pub async fn chunk(&mut self) -> reqwest::Result<Option<bytes::Bytes>> {
        self.inner.chunk().await
    }

    /// The response, or an error if its status is 4xx or 5xx.
    ///
    /// # Errors
    /// reqwest's status error.
    pub fn error_for_status(self) -> reqwest::Result<Self> {
        let ending = self.ending;
        self.inner
            .error_for_status()
            .map(|inner| Self { inner, ending })
    }
}

impl Deref for Response {
    type Target = reqwest::Response;

    fn deref(&self) -> &reqwest::Response {
        &self.inner
    }
}
