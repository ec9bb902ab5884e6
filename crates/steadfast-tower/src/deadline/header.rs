use std::task::{Context, Poll};

use http::{HeaderName, HeaderValue, Request};
use steadfast::clock::{Clock, DefaultClock};
use steadfast::deadline::DeadlineHeader;
use steadfast::{ConfigError, deadline};
use tower_layer::Layer;
use tower_service::Service;

/// Writes the time left of the ambient deadline into each outgoing HTTP
/// request's deadline header (replacing any value already there); a request
/// made with no ambient deadline is sent as it is.
///
/// Put it below a [`RetryLayer`](crate::RetryLayer) or a
/// [`DeadlineLayer`](super::DeadlineLayer): each attempt then sends the time
/// it has left, recomputed when it is sent.
///
/// ```
/// use std::time::Duration;
/// use steadfast::deadline::DeadlineHeader;
/// use steadfast_tower::deadline::SetDeadlineHeaderLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let echo = service_fn(|req: http::Request<()>| async move {
///     Ok::<_, std::io::Error>(req.headers().get("grpc-timeout").cloned())
/// });
/// let client = SetDeadlineHeaderLayer::new(DeadlineHeader::GRPC)?.layer(echo);
/// let d = steadfast::Deadline::after(tokio::time::Instant::now().into_std(), Duration::from_millis(250));
/// let sent = steadfast::deadline::scope_async(d, client.oneshot(http::Request::new(()))).await?;
/// assert_eq!(sent.unwrap(), "250000u");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SetDeadlineHeaderLayer<C = DefaultClock> {
    header: DeadlineHeader,
    name: HeaderName,
    clock: C,
}

impl SetDeadlineHeaderLayer {
    /// Writes `header` (for example [`DeadlineHeader::GRPC`], or the default
    /// `x-steadfast-timeout`).
    ///
    /// # Errors
    /// A [`ConfigError`] if the header's name is not a valid HTTP header name.
    pub fn new(header: DeadlineHeader) -> Result<Self, ConfigError> {
        let name = HeaderName::from_bytes(header.name().as_bytes()).map_err(|_| {
            ConfigError::new(
                "deadline header",
                "name",
                "must be a valid HTTP header name",
                header.name().to_owned(),
            )
        })?;
        Ok(Self {
            header,
            name,
            clock: DefaultClock::default(),
        })
    }
}

impl<C> SetDeadlineHeaderLayer<C> {
    /// Reads time on `clock`.
    pub fn clock<C2: Clock>(self, clock: C2) -> SetDeadlineHeaderLayer<C2> {
        SetDeadlineHeaderLayer {
            header: self.header,
            name: self.name,
            clock,
        }
    }
}

impl<S, C: Clone> Layer<S> for SetDeadlineHeaderLayer<C> {
    type Service = SetDeadlineHeader<S, C>;

    fn layer(&self, inner: S) -> Self::Service {
        SetDeadlineHeader {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service a [`SetDeadlineHeaderLayer`] makes.
#[derive(Debug, Clone)]
pub struct SetDeadlineHeader<S, C = DefaultClock> {
    inner: S,
    layer: SetDeadlineHeaderLayer<C>,
}

impl<S, C, B> Service<Request<B>> for SetDeadlineHeader<S, C>
where
    S: Service<Request<B>>,
    C: Clock,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if let Some(d) = deadline::current() {
            let text = self.layer.header.encode_deadline(d, self.layer.clock.now());
            // The encoders write ASCII digits and a unit letter only.
            if let Ok(value) = HeaderValue::from_str(text.as_str()) {
                request.headers_mut().insert(self.layer.name.clone(), value);
            }
        }
        self.inner.call(request)
    }
}
