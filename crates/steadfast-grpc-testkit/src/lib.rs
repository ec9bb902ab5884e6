//! Test support for `steadfast-grpc`: the echo service generated from
//! `proto/echo.proto`, and a tonic server on 127.0.0.1 that fails, pushes
//! back or stalls per call as a test scripts it, and records what each
//! attempt carried; and an HTTP/2 server that turns every request away
//! unprocessed ([`nack`]).
#![allow(missing_docs, clippy::missing_panics_doc)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::{Request, Response, Status};

pub mod nack;

/// The generated echo service.
pub mod echo {
    tonic::include_proto!("steadfast.test");
}

use echo::echo_server::{Echo, EchoServer};
use echo::{SayReply, SayRequest};

/// What the server does with the calls of one key.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// The first `fail` attempts fail with `code`.
    pub fail: u32,
    /// These attempts fail too, whatever `fail` says.
    pub fail_attempts: Vec<u32>,
    pub code: Option<tonic::Code>,
    /// A `grpc-retry-pushback-ms` value sent with each failure.
    pub pushback: Option<String>,
    /// The first `stall` attempts wait this long before they answer.
    pub stall: u32,
    pub stall_for: Duration,
}

impl Script {
    /// The first `n` attempts fail with UNAVAILABLE.
    #[must_use]
    pub fn failing(n: u32) -> Self {
        Self {
            fail: n,
            ..Self::default()
        }
    }

    /// The failures carry this status instead of UNAVAILABLE.
    #[must_use]
    pub fn with_code(mut self, code: tonic::Code) -> Self {
        self.code = Some(code);
        self
    }

    /// The failures carry this `grpc-retry-pushback-ms` value.
    #[must_use]
    pub fn with_pushback(mut self, value: &str) -> Self {
        self.pushback = Some(value.to_owned());
        self
    }

    /// Only the attempts numbered in `numbers` fail (with UNAVAILABLE).
    #[must_use]
    pub fn failing_attempts(numbers: &[u32]) -> Self {
        Self {
            fail_attempts: numbers.to_vec(),
            ..Self::default()
        }
    }

    /// The first `n` attempts also wait `for_` before they answer.
    #[must_use]
    pub fn with_stall(mut self, n: u32, for_: Duration) -> Self {
        self.stall = n;
        self.stall_for = for_;
        self
    }

    /// The first `n` attempts wait `for_` before they answer.
    #[must_use]
    pub fn stalling(n: u32, for_: Duration) -> Self {
        Self {
            stall: n,
            stall_for: for_,
            ..Self::default()
        }
    }
}

/// What the server saw of one attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    pub previous_attempts: Option<String>,
    pub timeout: Option<String>,
    /// The time left of the handler's ambient deadline
    /// (`steadfast::deadline::current()`), when it started.
    pub ambient: Option<Duration>,
}

/// What a relay does with a call: forward it downstream.
pub type Forward = Box<
    dyn Fn(
            SayRequest,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<SayReply, Status>> + Send>>
        + Send
        + Sync,
>;

#[derive(Default)]
pub struct State {
    scripts: Mutex<HashMap<String, Script>>,
    forward: Mutex<Option<Arc<Forward>>>,
    seen: Mutex<HashMap<String, Vec<Seen>>>,
    /// Handlers dropped before they answered (their client went away).
    pub cancelled: AtomicUsize,
    pub in_flight: AtomicUsize,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("cancelled", &self.cancelled)
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

impl State {
    /// Makes this server a relay: each call, after its script, is answered
    /// by `forward` (a call to the next server).
    pub fn relay(&self, forward: Forward) {
        *self.forward.lock().expect("lock") = Some(Arc::new(forward));
    }

    pub fn script(&self, key: &str, script: Script) {
        self.scripts
            .lock()
            .expect("lock")
            .insert(key.to_owned(), script);
    }

    /// What every attempt of `key` carried, in order.
    pub fn seen(&self, key: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .expect("lock")
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    pub fn attempts(&self, key: &str) -> usize {
        self.seen(key).len()
    }
}

/// Counts a handler in flight; cancelled if dropped before it answers.
struct Handler<'a> {
    state: &'a State,
    done: bool,
}

impl Drop for Handler<'_> {
    fn drop(&mut self) {
        self.state.in_flight.fetch_sub(1, Ordering::SeqCst);
        if !self.done {
            self.state.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[derive(Debug, Clone)]
pub struct Service {
    pub state: Arc<State>,
}

#[tonic::async_trait]
impl Echo for Service {
    async fn say(&self, request: Request<SayRequest>) -> Result<Response<SayReply>, Status> {
        self.answer(request).await
    }

    async fn hedged(&self, request: Request<SayRequest>) -> Result<Response<SayReply>, Status> {
        self.answer(request).await
    }

    type StreamStream = std::pin::Pin<
        Box<dyn tokio_stream::Stream<Item = Result<SayReply, Status>> + Send + 'static>,
    >;

    /// Sends the response head and one reply, then fails as the key's script
    /// says (if it says so): a failure after the head, which commits the call.
    async fn stream(
        &self,
        request: Request<SayRequest>,
    ) -> Result<Response<Self::StreamStream>, Status> {
        let SayRequest { text, key } = request.into_inner();
        let attempt = {
            let mut all = self.state.seen.lock().expect("lock");
            let list = all.entry(key.clone()).or_default();
            list.push(Seen::default());
            u32::try_from(list.len()).unwrap_or(u32::MAX)
        };
        let script = self
            .state
            .scripts
            .lock()
            .expect("lock")
            .get(&key)
            .cloned()
            .unwrap_or_default();
        let mut items = vec![Ok(SayReply {
            text,
            attempts: attempt,
        })];
        if attempt <= script.fail {
            items.push(Err(Status::new(
                script.code.unwrap_or(tonic::Code::Unavailable),
                format!("attempt {attempt} fails after its first reply"),
            )));
        }
        Ok(Response::new(Box::pin(tokio_stream::iter(items))))
    }
}

impl Service {
    /// A server's state, shared by every connection.
    pub fn new(state: Arc<State>) -> Self {
        Self { state }
    }

    /// The service for tonic's server.
    pub fn into_server(self) -> EchoServer<Self> {
        EchoServer::new(self)
    }

    async fn answer(&self, request: Request<SayRequest>) -> Result<Response<SayReply>, Status> {
        let header = |name: &str| {
            request
                .metadata()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let seen = Seen {
            previous_attempts: header("grpc-previous-rpc-attempts"),
            timeout: header("grpc-timeout"),
            ambient: steadfast::deadline::current().map(|d| d.remaining(std::time::Instant::now())),
        };
        let message = request.into_inner();
        let forward = self.state.forward.lock().expect("lock").clone();
        let SayRequest { text, key } = message.clone();
        let attempt = {
            let mut all = self.state.seen.lock().expect("lock");
            let list = all.entry(key.clone()).or_default();
            list.push(seen);
            u32::try_from(list.len()).unwrap_or(u32::MAX)
        };
        let script = self
            .state
            .scripts
            .lock()
            .expect("lock")
            .get(&key)
            .cloned()
            .unwrap_or_default();
        self.state.in_flight.fetch_add(1, Ordering::SeqCst);
        let mut handler = Handler {
            state: &self.state,
            done: false,
        };
        if attempt <= script.stall {
            tokio::time::sleep(script.stall_for).await;
        }
        if let Some(forward) = forward {
            let reply = forward(message).await;
            handler.done = true;
            return reply.map(Response::new);
        }
        handler.done = true;
        if attempt <= script.fail || script.fail_attempts.contains(&attempt) {
            let code = script.code.unwrap_or(tonic::Code::Unavailable);
            let mut status = Status::new(code, format!("attempt {attempt} fails"));
            if let Some(p) = &script.pushback
                && let Ok(v) = p.parse()
            {
                status.metadata_mut().insert("grpc-retry-pushback-ms", v);
            }
            return Err(status);
        }
        Ok(Response::new(SayReply {
            text,
            attempts: attempt,
        }))
    }
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    pub addr: SocketAddr,
    pub state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    pub async fn start() -> Self {
        Self::spawn(false).await
    }

    /// A server that reads each request's `grpc-timeout` into its handler's
    /// ambient deadline (steadfast-tower's `ServerDeadlineLayer`), drops the
    /// handler when it passes and answers `DEADLINE_EXCEEDED`.
    pub async fn start_with_deadlines() -> Self {
        Self::spawn(true).await
    }

    async fn spawn(deadlines: bool) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let state = Arc::new(State::default());
        let service = Service {
            state: Arc::clone(&state),
        };
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let task = tokio::spawn(async move {
            let _ = if deadlines {
                let expired: fn() -> http::Response<tonic::body::Body> =
                    || Status::deadline_exceeded("the deadline passed on the server").into_http();
                tonic::transport::Server::builder()
                    .layer(steadfast_tower::ServerDeadlineLayer::new().on_expiry(expired))
                    .add_service(EchoServer::new(service))
                    .serve_with_incoming(incoming)
                    .await
            } else {
                tonic::transport::Server::builder()
                    .add_service(EchoServer::new(service))
                    .serve_with_incoming(incoming)
                    .await
            };
        });
        Self { addr, state, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}
