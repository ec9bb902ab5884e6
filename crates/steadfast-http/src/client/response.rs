use std::ops::Deref;

use crate::report::Report;

/// A response, and how the call went ([`report`](Self::report)).
///
/// It derefs to the `reqwest::Response` for its status, headers and URL;
/// the body methods that consume it are here, and
/// [`into_inner`](Self::into_inner) gives the reqwest response back.
#[derive(Debug)]
pub struct Response {
    inner: reqwest::Response,
    report: Report,
}

impl Response {
    pub(super) fn new(inner: reqwest::Response, report: Report) -> Self {
        Self { inner, report }
    }

    /// Attempts made, hedges sent, and the time spent waiting between
    /// attempts.
    #[must_use]
    pub fn report(&self) -> Report {
        self.report
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
        let report = self.report;
        self.inner
            .error_for_status()
            .map(|inner| Self { inner, report })
    }
}

impl Deref for Response {
    type Target = reqwest::Response;

    fn deref(&self) -> &reqwest::Response {
        &self.inner
    }
}
