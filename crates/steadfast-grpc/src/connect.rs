//! Connection backoff: connecting and reconnecting a channel follow the
//! gRPC connection backoff (1 s, ×1.6, ±20 %, at most 120 s, each attempt
//! given at least 20 s), failing fast inside the backoff window.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::Uri;
use pin_project_lite::pin_project;
use steadfast::backoff::{ConnectionBackoff, GrpcConnectionBackoff, Rng};
use steadfast::clock::{AsyncClock, DefaultClock};
use tower_service::Service;

/// A connector (a `tower::Service<Uri>`, such as hyper's `HttpConnector`)
/// whose connection attempts follow the gRPC connection backoff: attempt
/// `n + 1` may start only once attempt `n`'s backoff has passed (1 s, then
/// ×1.6 with ±20 % jitter, at most 120 s); each attempt is given
/// `max(backoff, 20 s)` to connect; a connection that is made starts the
/// curve over.
///
/// Inside the backoff window a connection attempt fails **at once** with
/// [`ConnectError::InBackoff`] (a tonic channel reports `UNAVAILABLE`), as
/// gRPC's fail-fast calls do, instead of sleeping where the channel polls
/// for readiness; [`wait_for_ready`](Self::wait_for_ready) makes it wait for
/// the window to pass instead (grpc-go's `WithBlock`, for channels whose
/// calls should wait rather than fail).
///
/// Give it to tonic with `Endpoint::connect_with_connector_lazy`. Clones
/// share one backoff state: one connector, one curve.
///
/// ```
/// use steadfast_grpc::BackoffConnector;
/// use hyper_util::client::legacy::connect::HttpConnector;
///
/// let mut http = HttpConnector::new();
/// http.set_nodelay(true); // as tonic's own connector does
/// let connector = BackoffConnector::new(http);
/// // let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
/// //     .connect_with_connector_lazy(connector);
/// # let _ = connector;
/// ```
#[derive(Debug)]
pub struct BackoffConnector<M, C = DefaultClock> {
    inner: M,
    state: Arc<Mutex<State>>,
    clock: C,
    wait_for_ready: bool,
}

impl<M: Clone, C: Clone> Clone for BackoffConnector<M, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            state: Arc::clone(&self.state),
            clock: self.clock.clone(),
            wait_for_ready: self.wait_for_ready,
        }
    }
}

#[derive(Debug)]
struct State {
    backoff: ConnectionBackoff,
    /// The earliest instant the next attempt may start, after a failure.
    retry_at: Option<Instant>,
}

impl<M> BackoffConnector<M> {
    /// `inner` under the gRPC connection backoff's defaults, on tokio's
    /// clock, failing fast inside the backoff window.
    pub fn new(inner: M) -> Self {
        Self::with_backoff(
            inner,
            GrpcConnectionBackoff::default(),
            DefaultClock::default(),
        )
    }
}

impl<M, C> BackoffConnector<M, C> {
    /// `inner` under `backoff` (its parameters and seed), on `clock`.
    pub fn with_backoff(inner: M, backoff: GrpcConnectionBackoff, clock: C) -> Self {
        let rng = Rng::seeded_or_entropy(steadfast::backoff::Schedule::seed(&backoff));
        Self {
            inner,
            state: Arc::new(Mutex::new(State {
                backoff: backoff.connection(rng),
                retry_at: None,
            })),
            clock,
            wait_for_ready: false,
        }
    }

    /// Waits for the backoff window to pass instead of failing at once.
    #[must_use]
    pub fn wait_for_ready(mut self) -> Self {
        self.wait_for_ready = true;
        self
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<M, C> Service<Uri> for BackoffConnector<M, C>
where
    M: Service<Uri> + Clone,
    M::Error: Into<Box<dyn Error + Send + Sync>>,
    C: AsyncClock,
{
    type Response = M::Response;
    type Error = ConnectError;
    type Future = ConnectFuture<M, C>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        self.inner
            .poll_ready(cx)
            .map_err(|e| ConnectError::Connect(e.into()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let now = self.clock.now();
        let wait = self
            .state()
            .retry_at
            .and_then(|at| at.checked_duration_since(now))
            .filter(|w| !w.is_zero());
        let stage = match wait {
            Some(retry_in) if !self.wait_for_ready => {
                tracing::debug!(
                    ?retry_in,
                    "steadfast: connection attempt refused inside the backoff window"
                );
                Stage::Failed {
                    error: Some(ConnectError::InBackoff { retry_in }),
                }
            }
            Some(wait) => Stage::Waiting {
                sleep: self.clock.sleep(wait),
                uri: Some(uri),
            },
            None => self.attempt(uri, now),
        };
        ConnectFuture {
            stage,
            connector: Connector {
                inner: self.inner.clone(),
                state: Arc::clone(&self.state),
                clock: self.clock.clone(),
            },
        }
    }
}

impl<M, C> BackoffConnector<M, C>
where
    M: Service<Uri> + Clone,
    C: AsyncClock,
{
    fn attempt(&mut self, uri: Uri, now: Instant) -> Stage<M, C> {
        let attempt = {
            let mut state = self.state();
            let attempt = state.backoff.next_attempt(now);
            state.retry_at = Some(attempt.retry_at);
            attempt
        };
        let timeout = attempt.connect_deadline.saturating_duration_since(now);
        Stage::Connecting {
            future: self.inner.call(uri),
            timeout: self.clock.sleep(timeout),
            after: timeout,
        }
    }
}

/// What a waiting [`ConnectFuture`] needs to make its attempt.
struct Connector<M, C> {
    inner: M,
    state: Arc<Mutex<State>>,
    clock: C,
}

pin_project! {
    /// The future of a [`BackoffConnector`] call.
    #[must_use = "futures do nothing unless polled"]
    pub struct ConnectFuture<M: Service<Uri>, C: AsyncClock> {
        #[pin]
        stage: Stage<M, C>,
        connector: Connector<M, C>,
    }
}

pin_project! {
    #[project = StageProj]
    enum Stage<M: Service<Uri>, C: AsyncClock> {
        Failed { error: Option<ConnectError> },
        Waiting { #[pin] sleep: C::Sleep, uri: Option<Uri> },
        Connecting { #[pin] future: M::Future, #[pin] timeout: C::Sleep, after: Duration },
    }
}

impl<M: Service<Uri>, C: AsyncClock> fmt::Debug for ConnectFuture<M, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.stage {
            Stage::Failed { .. } => "ConnectFuture(in backoff)",
            Stage::Waiting { .. } => "ConnectFuture(waiting for the backoff)",
            Stage::Connecting { .. } => "ConnectFuture(connecting)",
        })
    }
}

impl<M, C> Future for ConnectFuture<M, C>
where
    M: Service<Uri> + Clone,
    M::Error: Into<Box<dyn Error + Send + Sync>>,
    C: AsyncClock,
{
    type Output = Result<M::Response, ConnectError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.stage.as_mut().project() {
                StageProj::Failed { error } => {
                    return Poll::Ready(Err(error.take().unwrap_or(ConnectError::InBackoff {
                        retry_in: Duration::ZERO,
                    })));
                }
                StageProj::Waiting { sleep, uri } => {
                    std::task::ready!(sleep.poll(cx));
                    let Some(uri) = uri.take() else {
                        unreachable!("a waiting attempt holds its URI until it starts");
                    };
                    let c = &mut *this.connector;
                    let now = c.clock.now();
                    let attempt = {
                        let mut state = c.state.lock().unwrap_or_else(PoisonError::into_inner);
                        let attempt = state.backoff.next_attempt(now);
                        state.retry_at = Some(attempt.retry_at);
                        attempt
                    };
                    let timeout = attempt.connect_deadline.saturating_duration_since(now);
                    let next = Stage::Connecting {
                        future: c.inner.call(uri),
                        timeout: c.clock.sleep(timeout),
                        after: timeout,
                    };
                    this.stage.set(next);
                }
                StageProj::Connecting {
                    future,
                    timeout,
                    after,
                } => {
                    if let Poll::Ready(out) = future.poll(cx) {
                        return Poll::Ready(match out {
                            Ok(connection) => {
                                // Connected: the next attempt starts the curve over.
                                let mut state = this
                                    .connector
                                    .state
                                    .lock()
                                    .unwrap_or_else(PoisonError::into_inner);
                                state.backoff.reset();
                                state.retry_at = None;
                                Ok(connection)
                            }
                            Err(e) => Err(ConnectError::Connect(e.into())),
                        });
                    }
                    std::task::ready!(timeout.poll(cx));
                    return Poll::Ready(Err(ConnectError::TimedOut { after: *after }));
                }
            }
        }
    }
}

/// Why a [`BackoffConnector`] made no connection.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// An attempt failed a moment ago and its backoff has not passed: no
    /// attempt was made (gRPC's fail-fast: `UNAVAILABLE`).
    InBackoff {
        /// When the next attempt may start.
        retry_in: Duration,
    },
    /// The attempt did not connect within its connect timeout.
    TimedOut {
        /// The timeout it had.
        after: Duration,
    },
    /// The connector failed.
    Connect(Box<dyn Error + Send + Sync>),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InBackoff { retry_in } => write!(
                f,
                "not connecting: backing off after a failed attempt, {:.3}s to go",
                retry_in.as_secs_f64()
            ),
            Self::TimedOut { after } => {
                write!(f, "connect timed out after {:.3}s", after.as_secs_f64())
            }
            Self::Connect(e) => write!(f, "connect failed: {e}"),
        }
    }
}

impl Error for ConnectError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Connect(e) => Some(&**e),
            _ => None,
        }
    }
}
