//! Client-side fault injection (gRFC A33) for [`GrpcLayer`](crate::GrpcLayer):
//! the status a chaos substitutes for an attempt ([`ChaosStatus`],
//! [`chaos_status`]) and the attempt service that injects it under the
//! retry and hedge executors.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Response;
use pin_project_lite::pin_project;
use steadfast::chaos::{Chaos, ChaosFuture, FaultKind};
use steadfast::clock::AsyncClock;
use tower_service::Service;

use crate::Code;
use crate::trailers_only::{pushback_value, trailers_only};

/// The `grpc-message` of an injected status that was given none.
const DEFAULT_MESSAGE: &str = "fault injected by steadfast chaos";

/// A gRPC status a client's chaos substitutes for an attempt
/// ([`GrpcLayerBuilder::chaos`](crate::GrpcLayerBuilder::chaos)): its
/// code, its `grpc-message` and an optional `grpc-retry-pushback-ms`. The
/// layer answers the attempt with it as a Trailers-Only response, without
/// sending anything, and classifies it as it would the server's: an
/// `UNAVAILABLE` the method's retry policy lists is retried (after the
/// pushback, if there is one), a code it does not list ends the call.
/// Made by [`chaos_status`].
///
/// ```
/// use std::time::Duration;
/// use steadfast_grpc::{Code, chaos_status};
///
/// let status = chaos_status(Code::Unavailable, Some(Duration::from_micros(1500)))
///     .with_message("the injected outage");
/// assert_eq!(status.code(), Code::Unavailable);
/// assert_eq!(status.message(), "the injected outage");
/// let response: http::Response<()> = status.to_response();
/// assert_eq!(response.headers()["grpc-status"], "14");
/// assert_eq!(response.headers()["grpc-retry-pushback-ms"], "2"); // rounded up
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChaosStatus {
    code: Code,
    message: Cow<'static, str>,
    pushback: Option<Duration>,
}

/// The status `code` (with `grpc-retry-pushback-ms` set to `pushback`, in
/// whole milliseconds rounded up, if given) for a client's chaos to
/// substitute for an attempt: what
/// [`Chaos::builder().outcome(rate, ..)`](steadfast::chaos::ChaosBuilder::outcome)
/// makes for [`GrpcLayerBuilder::chaos`](crate::GrpcLayerBuilder::chaos).
///
/// ```
/// use std::time::Duration;
/// use steadfast::chaos::Chaos;
/// use steadfast_grpc::{ChaosStatus, Code, chaos_status};
///
/// let chaos: Chaos<ChaosStatus> = Chaos::builder()
///     .outcome(0.1, || chaos_status(Code::Unavailable, None))
///     .build()?;
/// # let _ = chaos;
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[must_use]
pub fn chaos_status(code: Code, pushback: Option<Duration>) -> ChaosStatus {
    ChaosStatus {
        code,
        message: Cow::Borrowed(DEFAULT_MESSAGE),
        pushback,
    }
}

impl ChaosStatus {
    /// The same status with `message` as its `grpc-message` (percent-encoded
    /// on the wire as gRPC says).
    #[must_use]
    pub fn with_message(mut self, message: impl Into<Cow<'static, str>>) -> Self {
        self.message = message.into();
        self
    }

    /// Its code.
    #[must_use]
    pub fn code(&self) -> Code {
        self.code
    }

    /// Its `grpc-message`.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Its pushback, if it has one.
    #[must_use]
    pub fn pushback(&self) -> Option<Duration> {
        self.pushback
    }

    /// The Trailers-Only response it is: `grpc-status`, `grpc-message`,
    /// `grpc-retry-pushback-ms` if set, and an empty body.
    #[must_use]
    pub fn to_response<T: Default>(&self) -> Response<T> {
        let pushback = self.pushback.map(pushback_value);
        trailers_only(
            u32::from(self.code.number()),
            &self.message,
            pushback.as_ref(),
        )
    }
}

/// A response the client's chaos can answer an attempt with: an
/// `http::Response` whose body has an empty `Default` (tonic's `Body`,
/// `()`), written Trailers-Only from a [`ChaosStatus`]. The bound the
/// layer's types name; there is nothing to implement for tonic.
pub trait StatusResponse {
    /// The Trailers-Only response of `status`.
    fn from_status(status: &ChaosStatus) -> Self;
}

impl<T: Default> StatusResponse for Response<T> {
    fn from_status(status: &ChaosStatus) -> Self {
        status.to_response()
    }
}

/// The attempt service of a [`GrpcLayer`](crate::GrpcLayer): each attempt
/// (the first, a retry, a hedged copy) draws the layer's chaos, if it has
/// one. An injected latency is slept on the layer's clock *before* the
/// attempt is made (the inner service is called after it, so nothing is
/// sent during it, and its `grpc-timeout` is the time left after it); an
/// injected status answers the attempt without calling the inner service.
pub(crate) struct ChaosAttempt<S, C> {
    inner: S,
    chaos: Option<Chaos<ChaosStatus>>,
    clock: C,
}

impl<S, C> ChaosAttempt<S, C> {
    pub(crate) fn new(inner: S, chaos: Option<Chaos<ChaosStatus>>, clock: C) -> Self {
        Self {
            inner,
            chaos,
            clock,
        }
    }
}

impl<S: Clone, C: Clone> Clone for ChaosAttempt<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            chaos: self.chaos.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl<S: fmt::Debug, C> fmt::Debug for ChaosAttempt<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChaosAttempt")
            .field("inner", &self.inner)
            .field("chaos", &self.chaos)
            .finish_non_exhaustive()
    }
}

/// The future of one attempt under the layer's chaos.
pub(crate) type AttemptFuture<S, Req, Sl> =
    ChaosFuture<Deferred<S, Req>, Sl, <S as Service<Req>>::Response, <S as Service<Req>>::Error>;

impl<S, C, Req> Service<Req> for ChaosAttempt<S, C>
where
    S: Service<Req> + Clone,
    S::Response: StatusResponse,
    C: AsyncClock,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = AttemptFuture<S, Req, C::Sleep>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, request: Req) -> Self::Future {
        // No chaos, or one switched off: one check (and one relaxed load).
        let Some((chaos, injection)) = self
            .chaos
            .as_ref()
            .and_then(|chaos| chaos.draw().map(|i| (chaos, i)))
        else {
            return ChaosFuture::passing(Deferred::called(&mut self.inner, request));
        };
        let replacement = match injection.fault {
            Some(FaultKind::Outcome) => chaos
                .make_outcome()
                .map(|status| Ok(S::Response::from_status(&status))),
            // Error faults are refused when the layer is built.
            _ => None,
        };
        if replacement.is_some() {
            return ChaosFuture::new(injection, &self.clock, replacement, || Deferred::Done);
        }
        // The readied service goes with the attempt, to be called once the
        // latency is over; a clone (to be readied again) stays.
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        ChaosFuture::new(injection, &self.clock, None, || Deferred::Waiting {
            call: Some((ready, request)),
        })
    }
}

pin_project! {
    /// An attempt whose call is made on its first poll (after an injected
    /// latency), or was made already.
    #[project = DeferredProj]
    pub(crate) enum Deferred<S, Req>
    where
        S: Service<Req>,
    {
        Waiting { call: Option<(S, Req)> },
        Called { #[pin] future: S::Future },
        // Never polled: the attempt was answered by an injected status.
        Done,
    }
}

impl<S: Service<Req>, Req> Deferred<S, Req> {
    #[inline]
    fn called(service: &mut S, request: Req) -> Self {
        Self::Called {
            future: service.call(request),
        }
    }
}

impl<S: Service<Req>, Req> Future for Deferred<S, Req> {
    type Output = Result<S::Response, S::Error>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.as_mut().project() {
                DeferredProj::Called { future } => return future.poll(cx),
                DeferredProj::Waiting { call } => match call.take() {
                    Some((mut service, request)) => {
                        let future = service.call(request);
                        self.set(Self::Called { future });
                    }
                    None => unreachable!("a deferred attempt is called once"),
                },
                DeferredProj::Done => unreachable!("an answered attempt is never polled"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use steadfast::clock::{Clock, VirtualClock};
    use tower::ServiceExt;

    use super::*;

    type Calls = Arc<AtomicU32>;

    /// A service answering OK, counting its calls and recording the clock's
    /// time when it was called.
    fn ok_service(
        calls: &Calls,
        clock: &VirtualClock,
        called_at: &Arc<std::sync::Mutex<Vec<Duration>>>,
    ) -> impl Service<
        (),
        Response = Response<()>,
        Error = std::io::Error,
        Future = impl Future<Output = Result<Response<()>, std::io::Error>>,
    > + Clone {
        let (calls, clock, called_at) = (calls.clone(), clock.clone(), called_at.clone());
        tower::service_fn(move |()| {
            calls.fetch_add(1, Ordering::SeqCst);
            called_at
                .lock()
                .expect("lock")
                .push(clock.now() - clock.start());
            std::future::ready(Ok(trailers_only(0, "", None)))
        })
    }

    fn code(response: &Response<()>) -> Option<Code> {
        crate::head_status(response.headers())
    }

    #[tokio::test]
    async fn an_injected_status_answers_without_calling_and_a_latency_comes_before_the_call() {
        let clock = VirtualClock::new();
        let calls = Calls::default();
        let called_at = Arc::default();
        let chaos = Chaos::builder()
            .enabled(true)
            .seed(9)
            .latency(1.0, Duration::from_millis(300))
            .outcome(1.0, || {
                chaos_status(Code::Unavailable, Some(Duration::from_millis(20)))
            })
            .build()
            .expect("valid chaos");
        let service = ChaosAttempt::new(
            ok_service(&calls, &clock, &called_at),
            Some(chaos.clone()),
            clock.clone(),
        );
        let response = service.clone().oneshot(()).await.expect("answered");
        assert_eq!(code(&response), Some(Code::Unavailable));
        assert_eq!(response.headers()["grpc-retry-pushback-ms"], "20");
        assert_eq!(calls.load(Ordering::SeqCst), 0, "never sent");
        assert_eq!(clock.elapsed(), Duration::from_millis(300));

        // Latency only: the call is made after it, on the clock.
        chaos.switch().turn_off();
        let latency_only = Chaos::builder()
            .enabled(true)
            .latency(1.0, Duration::from_millis(50))
            .build()
            .expect("valid chaos");
        let service = ChaosAttempt::new(
            ok_service(&calls, &clock, &called_at),
            Some(latency_only.clone()),
            clock.clone(),
        );
        let response = service.oneshot(()).await.expect("answered");
        assert_eq!(code(&response), Some(Code::Ok));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(
            called_at.lock().expect("lock").as_slice(),
            [Duration::from_millis(350)]
        );
        assert_eq!(latency_only.stats().latencies, 1);
        assert_eq!(latency_only.stats().active, 0, "the slot is given back");
    }

    #[tokio::test]
    async fn chaos_off_or_none_is_a_plain_call() {
        let clock = VirtualClock::new();
        let calls = Calls::default();
        let called_at = Arc::default();
        let off = Chaos::builder()
            .outcome(1.0, || chaos_status(Code::Unavailable, None))
            .build()
            .expect("valid chaos");
        for chaos in [None, Some(off.clone())] {
            let service =
                ChaosAttempt::new(ok_service(&calls, &clock, &called_at), chaos, clock.clone());
            let response = service.oneshot(()).await.expect("answered");
            assert_eq!(code(&response), Some(Code::Ok));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(off.stats().drawn, 0, "off draws nothing");
        assert_eq!(clock.elapsed(), Duration::ZERO);
    }

    #[test]
    fn messages_are_percent_encoded_and_pushback_rounds_up() {
        let status =
            chaos_status(Code::Internal, Some(Duration::from_nanos(1))).with_message("100% down\n");
        let response: Response<()> = status.to_response();
        assert_eq!(response.headers()["grpc-message"], "100%25 down%0A");
        assert_eq!(response.headers()["grpc-retry-pushback-ms"], "1");
        assert_eq!(response.headers()["content-type"], "application/grpc");
        let none: Response<()> = chaos_status(Code::Unavailable, None).to_response();
        assert!(none.headers().get("grpc-retry-pushback-ms").is_none());
        assert_eq!(pushback_value(Duration::from_millis(7)), "7");
        assert_eq!(pushback_value(Duration::MAX), u64::MAX.to_string().as_str());
    }
}
