//! [`RateShedLayer`]: the server side of a rate limit over any `http`
//! service, written once for every protocol: a request the limit has no
//! room for is answered at once with the protocol's refusal
//! ([`RateRefusal`]), which carries the limit's own wait.

use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use pin_project_lite::pin_project;
use steadfast::rate::{KeyedRateLimit, RateLimit, RateRefused};
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

/// What admits a request: one [`RateLimit`] for the whole server, or a
/// [`KeyedRateLimit`] with the key drawn from each request ([`PerKey`]).
pub trait RequestAdmission<B>: Clone {
    /// Admits `request` now, or refuses it with the limit's wait.
    ///
    /// # Errors
    /// [`RateRefused`] when the limit has no room for it now.
    fn admit(&self, request: &Request<B>) -> Result<(), RateRefused>;
}

impl<B> RequestAdmission<B> for RateLimit {
    #[inline]
    fn admit(&self, _: &Request<B>) -> Result<(), RateRefused> {
        self.check()
    }
}

/// A [`KeyedRateLimit`] whose key a function draws from each request (an
/// API key header, a tenant in the path, the client's address from the
/// request's extensions): each key has quotas of its own, in the limit's
/// bounded key set. Made by [`RateShedLayer::per_key`].
#[derive(Clone)]
pub struct PerKey<K, F> {
    limit: KeyedRateLimit<K>,
    key: F,
}

impl<K, F> fmt::Debug for PerKey<K, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PerKey")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl<B, K, F> RequestAdmission<B> for PerKey<K, F>
where
    K: Hash + Eq + Clone,
    F: Fn(&Request<B>) -> K + Clone,
{
    #[inline]
    fn admit(&self, request: &Request<B>) -> Result<(), RateRefused> {
        self.limit.check(&(self.key)(request))
    }
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
///
/// A limit per key instead: [`per_key`](Self::per_key).
#[derive(Clone)]
pub struct RateShedLayer<P, A = RateLimit> {
    limit: A,
    refusal: P,
}

impl<P: fmt::Debug, A: fmt::Debug> fmt::Debug for RateShedLayer<P, A> {
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

    /// Admits each request through `limit` under the key `key` draws from
    /// it, refusing the rest with `refusal`: every key has quotas of its own.
    ///
    /// ```
    /// use http::{Request, Response, StatusCode};
    /// use steadfast::rate::{KeyedRateLimit, Quota, RateRefused};
    /// use steadfast_tower::shed::{RateRefusal, RateShedLayer};
    /// use tower::{Layer, ServiceExt, service_fn};
    ///
    /// #[derive(Clone, Debug)]
    /// struct TooMany;
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
    /// let per_tenant = KeyedRateLimit::builder().quota(Quota::per_minute(1)?).build()?;
    /// let tenant = |r: &Request<()>| r.headers().get("x-tenant").map(|v| v.as_bytes().to_vec());
    /// let handler = service_fn(|_: Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
    /// });
    /// let server = RateShedLayer::per_key(per_tenant, tenant, TooMany).layer(handler);
    /// let from = |t: &str| Request::builder().header("x-tenant", t).body(()).unwrap();
    /// assert_eq!(server.clone().oneshot(from("acme")).await?.status(), StatusCode::OK);
    /// assert_eq!(server.clone().oneshot(from("globex")).await?.status(), StatusCode::OK);
    /// assert_eq!(server.oneshot(from("acme")).await?.status(), StatusCode::TOO_MANY_REQUESTS);
    /// # Ok(()) }
    /// ```
    pub fn per_key<K, F>(
        limit: KeyedRateLimit<K>,
        key: F,
        refusal: P,
    ) -> RateShedLayer<P, PerKey<K, F>> {
        RateShedLayer {
            limit: PerKey { limit, key },
            refusal,
        }
    }
}

impl<S, P: Clone, A: Clone> Layer<S> for RateShedLayer<P, A> {
    type Service = RateShed<S, P, A>;

    fn layer(&self, inner: S) -> RateShed<S, P, A> {
        RateShed {
            inner,
            limit: self.limit.clone(),
            refusal: self.refusal.clone(),
        }
    }
}

/// The service [`RateShedLayer`] makes.
#[derive(Clone)]
pub struct RateShed<S, P, A = RateLimit> {
    inner: S,
    limit: A,
    refusal: P,
}

impl<S, P: fmt::Debug, A: fmt::Debug> fmt::Debug for RateShed<S, P, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateShed")
            .field("limit", &self.limit)
            .field("refusal", &self.refusal)
            .finish_non_exhaustive()
    }
}

impl<S, P, A, ReqBody, ResBody> Service<Request<ReqBody>> for RateShed<S, P, A>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    P: RateRefusal,
    A: RequestAdmission<ReqBody>,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = RateShedFuture<S::Future, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        match self.limit.admit(&request) {
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
