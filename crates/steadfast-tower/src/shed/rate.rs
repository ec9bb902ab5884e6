//! [`RateShedLayer`]: the server side of a rate limit over any `http`
//! service, written once for every protocol: a request the limit has no
//! room for is answered at once with the protocol's refusal
//! ([`RateRefusal`]), which carries the limit's own wait.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use steadfast::rate::{RateLimit, RateRefused};
use tower_layer::Layer;
use tower_service::Service;

/// What a protocol answers a request its rate limit refused: the head of
/// its refusal (status and headers; the body is empty), made from the
/// refusal, whose `retry_after` is the exact time until a request would be
/// admitted.
pub trait RateRefusal: Clone {
    /// The answer to a request `refused` by the limit.
    fn refused(&self, refused: &RateRefused) -> Response<()>;
}

/// Admits each request through a shared [`RateLimit`] before the service
/// sees it, and answers the rest at once with `P`'s refusal. Every
/// connection's copy of the stack shares the limit.
///
/// ```
/// use http::{Response, StatusCode};
/// use steadfast::rate::{Quota, RateLimit, RateRefused};
/// use steadfast_tower::shed::{RateRefusal, RateShedLayer};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// #[derive(Clone, Debug)]
/// struct TooMany;
///
/// impl RateRefusal for TooMany {
///     fn refused(&self, _: &RateRefused) -> Response<()> {
///         let mut response = Response::new(());
///         *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
///         response
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = RateLimit::new(Quota::per_minute(1)?);
/// let handler = service_fn(|_: http::Request<()>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(String::from("done")))
/// });
/// let server = RateShedLayer::new(limit, TooMany).layer(handler);
/// assert_eq!(server.clone().oneshot(http::Request::new(())).await?.status(), StatusCode::OK);
/// assert_eq!(server.oneshot(http::Request::new(())).await?.status(), StatusCode::TOO_MANY_REQUESTS);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateShedLayer<P> {
    limit: RateLimit,
    refusal: P,
}

impl<P: fmt::Debug> fmt::Debug for RateShedLayer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateShedLayer")
            .field("limit", &self.limit)
            .field("refusal", &self.refusal)
            .finish()
    }
}

impl<P> RateShedLayer<P> {
    /// Admits requests through `limit`, refusing the rest with `refusal`.
    pub fn new(limit: RateLimit, refusal: P) -> Self {
        Self { limit, refusal }
    }

    /// The limit requests are admitted by.
    pub fn limit(&self) -> &RateLimit {
        &self.limit
    }
}

impl<S, P: Clone> Layer<S> for RateShedLayer<P> {
    type Service = RateShed<S, P>;

    fn layer(&self, inner: S) -> RateShed<S, P> {
        RateShed {
            inner,
            limit: self.limit.clone(),
            refusal: self.refusal.clone(),
        }
    }
}

/// The service [`RateShedLayer`] makes.
#[derive(Clone)]
pub struct RateShed<S, P> {
    inner: S,
    limit: RateLimit,
    refusal: P,
}

impl<S, P: fmt::Debug> fmt::Debug for RateShed<S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateShed")
            .field("limit", &self.limit)
            .field("refusal", &self.refusal)
            .finish_non_exhaustive()
    }
}

impl<S, P, ReqBody, ResBody> Service<Request<ReqBody>> for RateShed<S, P>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    P: RateRefusal,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RateShedFuture<S::Future, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        match self.limit.check() {
            Ok(()) => RateShedFuture {
                state: State::Admitted {
                    future: self.inner.call(request),
                },
            },
            Err(refused) => {
                tracing::debug!(
                    limit = refused.by,
                    retry_after_ms = refused.retry_after.map(|d| d.as_millis()),
                    "steadfast: request refused by the server's rate limit"
                );
                let answer = self.refusal.refused(&refused).map(|()| ResBody::default());
                RateShedFuture {
                    state: State::Refused {
                        answer: Some(answer),
                    },
                }
            }
        }
    }
}

pin_project! {
    /// The future of a [`RateShed`] call: the refusal, or the service's
    /// own future.
    #[must_use = "futures do nothing unless polled"]
    pub struct RateShedFuture<F, B> {
        #[pin]
        state: State<F, B>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B> {
        Admitted { #[pin] future: F },
        Refused { answer: Option<Response<B>> },
    }
}

impl<F, B> fmt::Debug for RateShedFuture<F, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.state {
            State::Admitted { .. } => "RateShedFuture(admitted)",
            State::Refused { .. } => "RateShedFuture(refused)",
        })
    }
}

impl<F, B, E> Future for RateShedFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Admitted { future } => future.poll(cx),
            StateProj::Refused { answer } => match answer.take() {
                Some(a) => Poll::Ready(Ok(a)),
                None => panic!("a refused request's future was polled after it completed"),
            },
        }
    }
}
