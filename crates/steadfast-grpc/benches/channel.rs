//! A unary call on loopback through `steadfast_grpc::channel` (a retry
//! policy on the method, the call succeeding at once) beside the same call
//! through the plain tonic `Channel`, in one run: the one-liner's cost on
//! the success path. A third contender, the same `GrpcLayer` wired by hand
//! as before `channel` existed (`map_request` with a fn pointer), shows what
//! the one-liner adds over the layer itself. One tonic echo server (`steadfast-grpc-testkit`) on
//! 127.0.0.1, one 2-worker tokio runtime shared by client and server.
//!
//! ```sh
//! cargo bench -p steadfast-grpc --bench channel
//! ```
//!
//! The contenders alternate: each is measured twice, in the order tonic,
//! steadfast, layer, then layer, steadfast, tonic, so a drift in the machine's load
//! during the run shows as a gap between a contender's two figures.
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Duration;

use http::Request;
use steadfast_grpc::GrpcLayer;
use steadfast_grpc::config::ServiceConfig;
use steadfast_tower::replay::ReplayBody;
use tonic::body::Body;
use tower::{Layer, ServiceBuilder};

use criterion::{Criterion, criterion_group, criterion_main};
use steadfast_grpc::GrpcChannel;
use steadfast_grpc_testkit::Server;
use steadfast_grpc_testkit::echo::SayRequest;
use steadfast_grpc_testkit::echo::echo_client::EchoClient;
use tonic::transport::Channel;

const CONFIG: &str = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo"}],
    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.05s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;

fn say() -> SayRequest {
    SayRequest {
        text: "hello".into(),
        key: "bench".into(),
    }
}

fn unary(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (server, plain, wrapped, layered) = rt.block_on(async {
        let server = Server::start().await;
        let channel = Channel::from_shared(server.url())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let plain = EchoClient::new(channel.clone());
        let wrapped: EchoClient<GrpcChannel<Channel>> = EchoClient::new(
            steadfast_grpc::channel(channel.clone(), &server.url(), CONFIG).unwrap(),
        );
        let to_tonic: fn(Request<ReplayBody<Body>>) -> Request<Body> = |r| r.map(Body::new);
        let mapped = ServiceBuilder::new().map_request(to_tonic).service(channel);
        let layer =
            GrpcLayer::new(ServiceConfig::from_json(CONFIG).unwrap(), &server.url()).unwrap();
        let layered = EchoClient::new(layer.layer(mapped));
        (server, plain, wrapped, layered)
    });

    let mut group = c.benchmark_group("grpc/unary");
    group.measurement_time(Duration::from_secs(8));
    for round in ["1", "2"] {
        let bench_plain = |group: &mut criterion::BenchmarkGroup<'_, _>| {
            group.bench_function(format!("tonic-channel/{round}"), |b| {
                b.to_async(&rt).iter(|| {
                    let mut client = plain.clone();
                    async move { client.say(say()).await.unwrap() }
                });
            });
        };
        let bench_wrapped = |group: &mut criterion::BenchmarkGroup<'_, _>| {
            group.bench_function(format!("steadfast-channel/{round}"), |b| {
                b.to_async(&rt).iter(|| {
                    let mut client = wrapped.clone();
                    async move { client.say(say()).await.unwrap() }
                });
            });
        };
        let bench_layered = |group: &mut criterion::BenchmarkGroup<'_, _>| {
            group.bench_function(format!("grpc-layer-by-hand/{round}"), |b| {
                b.to_async(&rt).iter(|| {
                    let mut client = layered.clone();
                    async move { client.say(say()).await.unwrap() }
                });
            });
        };
        if round == "1" {
            bench_plain(&mut group);
            bench_wrapped(&mut group);
            bench_layered(&mut group);
        } else {
            bench_layered(&mut group);
            bench_wrapped(&mut group);
            bench_plain(&mut group);
        }
    }
    group.finish();
    // Every call succeeded at once: the one-liner never retried.
    assert!(
        server
            .state
            .seen("bench")
            .iter()
            .all(|s| s.previous_attempts.is_none())
    );
    drop(server);
}

criterion_group!(benches, unary);
criterion_main!(benches);
