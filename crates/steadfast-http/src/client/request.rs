use std::fmt;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};

use super::{Client, Response};
use crate::error::Error;

/// A request being built, with reqwest's builder methods and the retry
/// opt-in; [`send`](Self::send) runs it under the client's policy.
///
/// ```no_run
/// # async fn f(client: steadfast_http::Client) -> Result<(), Box<dyn std::error::Error>> {
/// // A POST is not retried unless the caller says it is safe to.
/// let response = client
///     .post("http://127.0.0.1:8080/payments")
///     .header("idempotency-key", "7f3a9c") // (this alone opts in too)
///     .body(r#"{"amount": 42}"#)
///     .retry_non_idempotent()
///     .send()
///     .await?;
/// # let _ = response;
/// # Ok(())
/// # }
/// ```
#[must_use = "a request does nothing until sent"]
pub struct RequestBuilder {
    client: Client,
    inner: reqwest::RequestBuilder,
    retry_anyway: Option<bool>,
    buffer_limit: Option<usize>,
}

impl fmt::Debug for RequestBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("retry_anyway", &self.retry_anyway)
            .field("buffer_limit", &self.buffer_limit)
            .finish_non_exhaustive()
    }
}

impl RequestBuilder {
    pub(super) fn new(client: Client, inner: reqwest::RequestBuilder) -> Self {
        Self {
            client,
            inner,
            retry_anyway: None,
            buffer_limit: None,
        }
    }

    /// Adds a header.
    pub fn header<K, V>(self, key: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.map(|b| b.header(key, value))
    }

    /// Adds headers.
    pub fn headers(self, headers: HeaderMap) -> Self {
        self.map(|b| b.headers(headers))
    }

    /// HTTP basic authentication (the header is never logged).
    pub fn basic_auth<U: fmt::Display, P: fmt::Display>(
        self,
        user: U,
        password: Option<P>,
    ) -> Self {
        self.map(|b| b.basic_auth(user, password))
    }

    /// Bearer authentication (the header is never logged).
    pub fn bearer_auth<T: fmt::Display>(self, token: T) -> Self {
        self.map(|b| b.bearer_auth(token))
    }

    /// The body. Bytes, text and vectors are buffered and replayed on every
    /// attempt; a streaming `reqwest::Body` is sent once and never retried.
    pub fn body<T: Into<reqwest::Body>>(self, body: T) -> Self {
        self.map(|b| b.body(body))
    }

    /// reqwest's own timeout for the whole request. Prefer the client's
    /// [`attempt_timeout`](crate::ClientBuilder::attempt_timeout), which
    /// the engine retries; this one surfaces as a timeout error, retried
    /// like any other.
    pub fn timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.timeout(timeout))
    }

    /// The HTTP version.
    pub fn version(self, version: http::Version) -> Self {
        self.map(|b| b.version(version))
    }

    /// Retries (and hedges, if the method is idempotent) this request even
    /// if its method is not idempotent: the caller vouches that sending it
    /// twice is safe.
    pub fn retry_non_idempotent(mut self) -> Self {
        self.retry_anyway = Some(true);
        self
    }

    /// Reads a streaming body into memory before the first attempt, up to
    /// `limit` bytes, so it can be replayed. A stream longer than that is
    /// still sent whole, once ([`NotRetried::BodyTooLarge`](crate::NotRetried::BodyTooLarge)
    /// says why it was not retried). Bodies that are bytes already are not
    /// copied.
    pub fn buffer_body(mut self, limit: usize) -> Self {
        self.buffer_limit = Some(limit);
        self
    }

    /// Never retries this request, whatever its method.
    pub fn no_retry(mut self) -> Self {
        self.retry_anyway = Some(false);
        self
    }

    /// The `reqwest::Request` this builds, for [`Client::execute`].
    ///
    /// # Errors
    /// reqwest's builder error (a bad URL or header).
    pub fn build(self) -> reqwest::Result<reqwest::Request> {
        self.inner.build()
    }

    /// Sends the request under the client's policy.
    ///
    /// # Errors
    /// An [`Error`] when the call did not succeed, or could not be built
    /// (reason `Permanent`, no attempt, the builder error as the source).
    pub async fn send(self) -> Result<Response, Error> {
        let Self {
            client,
            inner,
            retry_anyway,
            buffer_limit,
        } = self;
        match inner.build() {
            Ok(request) => {
                client
                    .execute_with(request, retry_anyway, buffer_limit)
                    .await
            }
            Err(e) => Err(Error::not_built(e)),
        }
    }

    fn map(mut self, f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder) -> Self {
        self.inner = f(self.inner);
        self
    }
}
