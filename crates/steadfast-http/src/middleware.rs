//! The same policy as a [`reqwest_middleware::Middleware`], for users
//! already on that stack.
//!
//! [`RetryMiddleware`] runs the engine that [`Client`](crate::Client) runs
//! (`steadfast-tower`'s retry or hedge layer over one attempt service)
//! with the rest of the middleware stack as the service each attempt is
//! sent on. Unlike `reqwest-retry`, it sees every response, so it honours
//! `Retry-After`; it does not retry POST or 501 by default; a streaming
//! body is sent (once) instead of failing; and the response says how many
//! attempts it took (the core's [`Ending`](steadfast::call::Ending) in its extensions).
//! The response is reqwest's own, so reading its body is **not** bounded by
//! the call's deadline (as [`Client`](crate::Client)'s
//! [`Response`](crate::Response) bounds it): the deadline rides in its
//! extensions too (a [`Deadline`](steadfast::Deadline), when the call had
//! one), for `steadfast::deadline::timeout_at`.
//!
//! ```no_run
//! use std::time::Duration;
//! use reqwest_middleware::ClientBuilder;
//!
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let retry = steadfast_http::Client::builder()
//!     .attempts(4)
//!     .deadline(Duration::from_secs(10))
//!     .build_middleware()?;
//! let inner = reqwest::Client::builder().retry(reqwest::retry::never()).build()?;
//! let client = ClientBuilder::new(inner).with(retry).build();
//! let response = client.get("http://127.0.0.1:8080/users/7").send().await?;
//! let attempts = response.extensions().get::<steadfast::call::Ending>().map(|e| e.attempts);
//! # let _ = attempts;
//! # Ok(())
//! # }
//! ```
//!
//! When the call gives up on a response (a 503 after the last attempt), the
//! middleware returns that response, as the stack expects, with the
//! [`Ending`](steadfast::call::Ending) and a [`GaveUp`] in its extensions; a call that ends without
//! a response returns `reqwest_middleware::Error::Middleware` wrapping an
//! [`Error`](crate::Error) (downcast it for the reason, attempts and the
//! transport error).
//!
//! A [`fallback`](crate::ClientBuilder::fallback) on the builder applies
//! here too, as the middleware's outermost step: its answer is the
//! response the middleware returns (its [`Ending`](steadfast::call::Ending)
//! in the extensions says `fell_back`, and no deadline rides with it); a
//! fallback that declines leaves the call to end as above.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Extensions;
use reqwest_middleware::{Middleware, Next};
use steadfast::StopReason;
use tower_service::Service;

use crate::attempt::TransportError;
use crate::engine::Layers;
use crate::error::{Last, NotRetried};

/// A request extension that opts one request in (`Retryable(true)`) or
/// out (`Retryable(false)`) of retries, whatever its method; set it with
/// `reqwest_middleware::RequestBuilder::with_extension`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retryable(pub bool);

/// A response extension saying the call gave up on this response (its
/// status was retryable, but the engine stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GaveUp {
    /// Why the engine stopped.
    pub reason: StopReason,
    /// Time from the call's start to its end.
    pub elapsed: Duration,
}

/// Retries, hedges and deadlines for a `reqwest-middleware` stack, with the
/// same policy as [`Client`](crate::Client); built by
/// [`ClientBuilder::build_middleware`](crate::ClientBuilder::build_middleware).
/// See the [module docs](self).
#[derive(Debug, Clone)]
pub struct RetryMiddleware {
    layers: Layers,
}

impl RetryMiddleware {
    pub(crate) fn new(layers: Layers) -> Self {
        Self { layers }
    }
}

#[async_trait::async_trait]
impl Middleware for RetryMiddleware {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        let retry_anyway = extensions.get::<Retryable>().map(|r| r.0);
        let engine = self.layers.engine(Rest {
            next,
            extensions: extensions.clone(),
        });
        let mut outcome = engine
            .run(
                &self.layers.rules,
                request,
                retry_anyway,
                NotRetried::StreamingBody,
            )
            .await;
        if let Some(fallback) = &self.layers.fallback
            && outcome.is_err()
        {
            outcome = fallback.after(outcome).await;
        }
        match outcome {
            Ok((mut response, ending, deadline)) => {
                response.extensions_mut().insert(ending);
                // reqwest-middleware hands back reqwest's own response, whose
                // body reads know nothing of the call's deadline: it rides
                // in the extensions for the caller to bound them.
                if let Some(deadline) = deadline {
                    response.extensions_mut().insert(deadline);
                }
                Ok(response)
            }
            Err(error) => {
                let reason = error.reason();
                let elapsed = error.elapsed();
                let ending = error.ending();
                if error.status().is_some() {
                    if let Some(mut response) = error.into_response() {
                        response.extensions_mut().insert(ending);
                        response.extensions_mut().insert(GaveUp { reason, elapsed });
                        return Ok(response);
                    }
                    unreachable!("an error with a status holds its response");
                }
                Err(reqwest_middleware::Error::Middleware(anyhow::Error::new(
                    error,
                )))
            }
        }
    }
}

/// The rest of the middleware stack as the service attempts are sent on:
/// each attempt runs it with its own copy of the call's extensions.
struct Rest<'a> {
    next: Next<'a>,
    extensions: Extensions,
}

impl Clone for Rest<'_> {
    fn clone(&self) -> Self {
        Self {
            next: self.next.clone(),
            extensions: self.extensions.clone(),
        }
    }
}

impl fmt::Debug for Rest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rest").finish_non_exhaustive()
    }
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl<'a> Service<reqwest::Request> for Rest<'a> {
    type Response = reqwest::Response;
    type Error = reqwest_middleware::Error;
    type Future = BoxFuture<'a, reqwest_middleware::Result<reqwest::Response>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: reqwest::Request) -> Self::Future {
        let next = self.next.clone();
        let mut extensions = self.extensions.clone();
        Box::pin(async move { next.run(request, &mut extensions).await })
    }
}

impl TransportError for reqwest_middleware::Error {
    fn into_reqwest(self) -> Result<reqwest::Error, Self> {
        match self {
            Self::Reqwest(e) => Ok(e),
            other => Err(other),
        }
    }

    fn from_reqwest(error: reqwest::Error) -> Self {
        Self::Reqwest(error)
    }
}

impl From<reqwest_middleware::Error> for Last {
    fn from(error: reqwest_middleware::Error) -> Self {
        match error {
            reqwest_middleware::Error::Reqwest(e) => Self::Transport(e),
            reqwest_middleware::Error::Middleware(e) => Self::Other(e.into()),
        }
    }
}
