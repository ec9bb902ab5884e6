//! The client half of the gRPC demo (start `echo_server` first): a tonic
//! client whose channel goes through `steadfast_grpc::channel` with a gRPC
//! service config, with steadfast's trace printed, so you can watch a
//! retry, a pushback, a hedge and a throttled retry happen.
//!
//! ```sh
//! cargo run -p steadfast-grpc --example echo_client [-- http://127.0.0.1:50051]
//! ```
#![allow(clippy::print_stdout)]

use std::time::Instant;

use steadfast_grpc::BackoffConnector;
use steadfast_grpc_testkit::echo::SayRequest;
use steadfast_grpc_testkit::echo::echo_client::EchoClient;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

/// Say: retries on UNAVAILABLE; Hedged: a copy every 200 ms; one token
/// bucket for the server (10 tokens, +0.5 per success; no retry at or
/// below 5).
const SERVICE_CONFIG: &str = r#"{
  "methodConfig": [
    {
      "name": [{ "service": "steadfast.test.Echo", "method": "Say" }],
      "timeout": "10s",
      "retryPolicy": {
        "maxAttempts": 4,
        "initialBackoff": "0.2s",
        "maxBackoff": "1s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"]
      }
    },
    {
      "name": [{ "service": "steadfast.test.Echo", "method": "Hedged" }],
      "hedgingPolicy": {
        "maxAttempts": 3,
        "hedgingDelay": "0.2s",
        "nonFatalStatusCodes": ["UNAVAILABLE"]
      }
    }
  ],
  "retryThrottling": { "maxTokens": 10, "tokenRatio": 0.5 }
}"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_target(false))
        .with(Targets::new().with_target("steadfast", tracing::Level::DEBUG))
        .init();
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:50051".to_owned());

    // Reconnects follow the gRPC connection backoff. (No Nagle delay, as
    // tonic's own connector sets.)
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.set_nodelay(true);
    let connector = BackoffConnector::new(http);
    let channel = tonic::transport::Endpoint::from_shared(url.clone())?
        .connect_with_connector_lazy(connector);
    let mut client = EchoClient::new(steadfast_grpc::channel(channel, &url, SERVICE_CONFIG)?);
    let say = |key: &str| SayRequest {
        text: format!("hello, {key}"),
        key: key.to_owned(),
    };

    println!("\n== a retry: 'flaky' fails twice, then answers");
    let start = Instant::now();
    let reply = client.say(say("flaky")).await?.into_inner();
    println!(
        "-> {:?} on attempt {} after {:?}",
        reply.text,
        reply.attempts,
        start.elapsed()
    );

    println!("\n== a pushback: 'pushback' fails once and asks for 500 ms");
    let start = Instant::now();
    let reply = client.say(say("pushback")).await?.into_inner();
    println!(
        "-> {:?} on attempt {} after {:?}",
        reply.text,
        reply.attempts,
        start.elapsed()
    );

    println!("\n== a hedge: the first copy of 'slow' stalls 2 s; a copy goes after 200 ms");
    let start = Instant::now();
    let reply = client.hedged(say("slow")).await?.into_inner();
    println!(
        "-> {:?} from copy {} after {:?}",
        reply.text,
        reply.attempts,
        start.elapsed()
    );

    println!("\n== throttling: 'down' always fails; retries stop once the bucket is half empty");
    for n in 1..=4 {
        let start = Instant::now();
        let status = client
            .say(say("down"))
            .await
            .expect_err("the server is down for this key");
        println!(
            "-> call {n}: {:?} after {:?}",
            status.code(),
            start.elapsed()
        );
    }
    Ok(())
}
