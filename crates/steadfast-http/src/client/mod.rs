//! [`Client`]: a `reqwest::Client` whose calls survive flaky servers.

mod body_error;
mod builder;
mod request;
mod response;

use std::fmt;
use std::sync::Arc;

use http::Method;
use reqwest::IntoUrl;

pub use body_error::BodyError;
pub use builder::{BuildError, ClientBuilder};
pub use request::RequestBuilder;
pub use response::Response;

use crate::buffer::{Buffered, buffer};
use crate::engine::{Engine, Rules};
use crate::error::{Error, NotRetried};
use crate::fallback::ClientFallback;

struct Shared {
    engine: Engine<reqwest::Client>,
    rules: Rules,
    fallback: Option<ClientFallback>,
}

/// An HTTP client whose calls survive flaky servers: safe retries with
/// backoff, `Retry-After`, hedged requests, an overall deadline sent to
/// the server on every attempt, and a report of how each call went.
///
/// It is a thin executor over the steadfast engine: each call runs
/// `steadfast-tower`'s [`RetryLayer`](steadfast_tower::RetryLayer) (or
/// [`HedgeLayer`](steadfast_tower::HedgeLayer)) over a `reqwest::Client`
/// whose own retries are off, so attempts never multiply. Cloning is cheap
/// (one `Arc`); share one client.
///
/// By default: 3 attempts, exponential backoff with full jitter, only
/// idempotent methods retried, connection errors, timeouts, 408, 429,
/// 500, 502, 503 and 504 retried ([`DefaultClassifier`](crate::DefaultClassifier)),
/// `Retry-After` honoured (clamped to `max_delay` and the deadline), the
/// time left sent in `x-steadfast-timeout`.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let client = steadfast_http::Client::builder().attempts(4).build()?;
/// let response = client.get("http://127.0.0.1:8080/users/7").send().await?;
/// println!("{} after {} attempts", response.status(), response.ending().attempts);
/// let body = response.text().await?;
/// # let _ = body;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("hedging", &self.shared.engine.hedges())
            .field("rules", &self.shared.rules)
            .field("fallback", &self.shared.fallback.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for Client {
    fn default() -> Self {
        Self::new()
    }
}

impl Client {
    /// A client with the default settings.
    ///
    /// # Panics
    /// If reqwest cannot build its client (as `reqwest::Client::new` does,
    /// e.g. when TLS cannot be initialised); use [`Client::builder`] to get
    /// the error instead.
    #[must_use]
    pub fn new() -> Self {
        match Self::builder().build() {
            Ok(client) => client,
            Err(e) => panic!("steadfast_http::Client::new: {e}"),
        }
    }

    /// A builder with the default settings.
    ///
    /// ```
    /// let client = steadfast_http::Client::builder().attempts(5).build()?;
    /// # let _ = client;
    /// # Ok::<(), steadfast_http::BuildError>(())
    /// ```
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A GET request.
    pub fn get<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::GET, url)
    }

    /// A HEAD request.
    pub fn head<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::HEAD, url)
    }

    /// A POST request (not retried unless opted in).
    pub fn post<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::POST, url)
    }

    /// A PUT request.
    pub fn put<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::PUT, url)
    }

    /// A PATCH request (not retried unless opted in).
    pub fn patch<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::PATCH, url)
    }

    /// A DELETE request.
    pub fn delete<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::DELETE, url)
    }

    /// A request with any method.
    pub fn request<U: IntoUrl>(&self, method: Method, url: U) -> RequestBuilder {
        let inner = self.shared.engine.inner().request(method, url);
        RequestBuilder::new(self.clone(), inner)
    }

    /// Runs a request built elsewhere (with reqwest's builder, say) under
    /// the client's policy and rules.
    ///
    /// # Errors
    /// An [`Error`] when the call did not succeed: the engine's reason,
    /// attempts and time, and the last response or transport error.
    pub async fn execute(&self, request: reqwest::Request) -> Result<Response, Error> {
        self.execute_with(request, None, None).await
    }

    /// Runs `request`: `retry_anyway` overrides the idempotency rule;
    /// `buffer_limit` reads a streaming body into memory first.
    pub(crate) async fn execute_with(
        &self,
        mut request: reqwest::Request,
        retry_anyway: Option<bool>,
        buffer_limit: Option<usize>,
    ) -> Result<Response, Error> {
        let why_once = match buffer_limit {
            Some(limit) => match buffer(&mut request, limit).await {
                Buffered::Replayable => NotRetried::StreamingBody,
                Buffered::OverLimit => NotRetried::BodyTooLarge { limit },
            },
            None => NotRetried::StreamingBody,
        };
        let shared = &*self.shared;
        let mut outcome = shared
            .engine
            .run(&shared.rules, request, retry_anyway, why_once)
            .await;
        // A success goes straight on: the fallback is not even asked.
        if let Some(fallback) = &shared.fallback
            && outcome.is_err()
        {
            outcome = fallback.after(outcome).await;
        }
        let (response, ending, deadline) = outcome?;
        Ok(Response::new(response, ending, deadline))
    }

    /// The inner `reqwest::Client` (its retries off unless you gave one
    /// with them on).
    #[must_use]
    pub fn reqwest_client(&self) -> &reqwest::Client {
        self.shared.engine.inner()
    }

    /// The set of endpoints the client spreads its calls over
    /// ([`ClientBuilder::endpoints`]), to watch their load and health
    /// ([`Endpoints::snapshot`](steadfast::endpoint::Endpoints::snapshot));
    /// `None` for a client of one destination.
    #[must_use]
    pub fn endpoints(&self) -> Option<&steadfast::endpoint::Endpoints> {
        self.shared.engine.endpoints()
    }
}
