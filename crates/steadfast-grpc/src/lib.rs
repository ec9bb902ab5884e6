//! # steadfast-grpc
//!
//! gRPC on steadfast: load a gRPC service config (gRFC A6) written for
//! grpc-go or grpc-java, wrap a tonic channel, and get its retries, hedging
//! and retry throttling, per method.
//!
//! - [`channel`]: the one call for tonic users: a `Channel`, its target and
//!   a service config (JSON text or bytes, a `serde_json::Value`) in, a
//!   [`GrpcChannel`] out, which a generated client takes as it takes the
//!   channel; every setup failure is one [`Error`]. The throttling bucket
//!   is keyed by [`target_key`], so `host:port` and `http://host:port` are
//!   one server.
//!
//!   ```no_run
//!   # use tonic::transport::Channel;
//!   # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//!   # const CONFIG: &str = "{}";
//!   let channel = Channel::from_static("http://127.0.0.1:50051").connect().await?;
//!   let channel = steadfast_grpc::channel(channel, "http://127.0.0.1:50051", CONFIG)?;
//!   // let mut client = GreeterClient::new(channel);
//!   # let _ = channel;
//!   # Ok(()) }
//!   ```
//! - [`config`]: the service config, parsed and validated as A6 says, and
//!   its policies as the core's values.
//! - [`GrpcLayer`]: a tower layer over any gRPC client service (a tonic
//!   `Channel`): per method (the request path `/package.Service/Method`),
//!   retries on the listed codes with the A6 backoff, or hedging; pushback
//!   (`grpc-retry-pushback-ms`: a valid value is waited exactly and restarts
//!   the backoff, a negative or unparseable one stops); one A6 token bucket
//!   per server name, asked before every retry and hedge; the
//!   `grpc-previous-rpc-attempts` header; each attempt's `grpc-timeout` the
//!   call's true time left. It is the `steadfast-tower` retry and hedge
//!   layers driven per method, with [`GrpcClassify`] and [`GrpcReplay`].
//!
//! What holds for every call:
//! - **Commit.** A response head without `grpc-status` commits the call (the
//!   response streams); it is returned as it is. Only a Trailers-Only
//!   response (the status in its head) or a transport error before any
//!   response (counted as `UNAVAILABLE`) can be retried.
//! - **Replay.** Request messages are buffered for replay up to 256 KiB per
//!   call; a larger request is sent once. Unary and server-streaming calls
//!   (one request message, there at once) replay in full; a client- or
//!   bidi-streaming call whose request stream is still being written when
//!   the call starts is sent once, at once (never waited for, so an
//!   interactive stream cannot stall), and never retried.
//!
//! - **Deadlines across services.** On the server, steadfast-tower's
//!   `ServerDeadlineLayer` (in `tonic::transport::Server::builder().layer(..)`)
//!   reads `grpc-timeout` into the handler's ambient deadline, so a
//!   `GrpcLayer` client in the handler sends on the time left; a call cut
//!   off after its deadline passed (tonic's channel reports CANCELLED) is
//!   reported as `DEADLINE_EXCEEDED`.
//!
//! - **Connection backoff.** [`BackoffConnector`] makes a channel's
//!   connection attempts follow the gRPC connection backoff (1 s, ×1.6,
//!   ±20 %, 120 s, at least 20 s per attempt, reset once connected), failing
//!   fast inside the backoff window, or waiting it out (`wait_for_ready`).
//!
//! - **Telemetry.** Each call runs in a `grpc call` tracing span naming its
//!   method; inside it, an event per failed attempt (status, the server's
//!   pushback, what follows), the core's events per retry wait and hedge
//!   copy, and one when the call gives up. The gRFC A96 per-call metrics
//!   (retries, hedges, retry delay, labelled by method and target) are
//!   recorded when a call ends: see [`metrics`] (a `tracing` event, and with
//!   the `metrics` feature the `metrics` facade too).
//!
//! - **Load protection.** [`GrpcLayerBuilder::concurrency_limit`] holds
//!   every attempt of the channel's calls to one
//!   [`ConcurrencyLimit`](steadfast::limit::ConcurrencyLimit) (an adaptive
//!   one shrinks on `RESOURCE_EXHAUSTED` and `UNAVAILABLE`, [`is_overload`]);
//!   a call it refuses is answered `RESOURCE_EXHAUSTED` naming the limit,
//!   and never sent. On the server, [`server::ShedLayer`] answers the calls
//!   its limit has no slot for with a Trailers-Only `RESOURCE_EXHAUSTED`
//!   (and `grpc-retry-pushback-ms` if set).
//!
//! - **Faults on purpose, and a fallback.** [`GrpcLayerBuilder::chaos`]
//!   injects a [`Chaos`](steadfast::chaos::Chaos)'s faults into every
//!   attempt under the retries and hedges (gRFC A33): a latency before the
//!   attempt, on the layer's clock, and a substituted status
//!   ([`chaos_status`]) classified like the server's. The chaos's type is
//!   `Chaos<ChaosStatus>`, a status rather than an `http::Response`, so
//!   the layer holds one whatever its body type; each attempt writes it as
//!   a Trailers-Only response of the channel's own body type
//!   ([`StatusResponse`]). [`GrpcLayerBuilder::fallback`] answers a call
//!   that failed, for any reason but a cancellation, with a status or a
//!   reply message ([`FallbackAnswer`], written into the channel's body
//!   type from a [`FallbackBody`]). On the server,
//!   [`server::ChaosLayer`] injects faults, and those a call asks for with
//!   Envoy's fault headers, capped by the configured rates.
//!
//! - **Deadline exceeded, at once.** A call whose next retry (its backoff or
//!   the server's pushback) would end past its deadline stops then, without
//!   sleeping, and is answered `DEADLINE_EXCEEDED`, whatever status its last
//!   attempt failed with; so is a call whose deadline passes mid-attempt,
//!   and any failure that arrives at or after the call's deadline (a server
//!   that enforces the `grpc-timeout` it received answers CANCELLED "Timeout
//!   expired" a hair after it, as tonic does: that is the deadline's doing).
#![warn(missing_docs)]

mod channel;
mod chaos;
mod classify;
mod code;
pub mod config;
mod connect;
mod error;
mod fallback;
#[doc(hidden)]
pub mod fuzzing;
mod layer;
pub mod metrics;
mod replay;
mod replicas;
pub mod server;
mod throttle;
mod trailers_only;

pub use channel::{ChannelFuture, ConfigSource, GrpcChannel, channel};
pub use chaos::{ChaosStatus, StatusResponse, chaos_status};
pub use classify::{
    CodeSet, GrpcClassify, PUSHBACK_HEADER, answer_for_code, head_status, is_overload, never_sent,
    pushback,
};
pub use code::{Code, UnknownCode};
pub use connect::{BackoffConnector, ConnectError, ConnectFuture};
pub use error::Error;
pub use fallback::{FallbackAnswer, FallbackBody, GrpcFailure};
pub use layer::{BoxError, GrpcFuture, GrpcLayer, GrpcLayerBuilder, GrpcService};
pub use replay::{DEFAULT_GRPC_REPLAY_LIMIT, GrpcReplay, PREVIOUS_ATTEMPTS_HEADER};
pub use replicas::{ReplicaError, ReplicaFuture, Replicas, channel_over};
pub use throttle::{bucket_for, target_key};

/// The crate README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
