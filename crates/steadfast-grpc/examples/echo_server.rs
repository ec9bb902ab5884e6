//! The server half of the gRPC demo: run it, then `echo_client` in another
//! terminal.
//!
//! ```sh
//! cargo run -p steadfast-grpc --example echo_server            # 127.0.0.1:50051
//! cargo run -p steadfast-grpc --example echo_client
//! ```
//!
//! Per request key, the server: `flaky` fails twice with UNAVAILABLE, then
//! answers; `pushback` fails once with UNAVAILABLE and a 500 ms
//! `grpc-retry-pushback-ms`; `slow` stalls 2 s on its first attempt; `down`
//! always fails with UNAVAILABLE. Other keys answer at once.
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::Duration;

use steadfast_grpc_testkit::{Script, Service, State};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:50051".to_owned());
    let state = Arc::new(State::default());
    state.script("flaky", Script::failing(2));
    state.script("pushback", Script::failing(1).with_pushback("500"));
    state.script("down", Script::failing(u32::MAX));
    state.script("slow", Script::stalling(1, Duration::from_secs(2)));
    println!("echo server on {addr}; keys: flaky, pushback, slow, down");
    tonic::transport::Server::builder()
        .add_service(Service::new(state).into_server())
        .serve(addr.parse()?)
        .await?;
    Ok(())
}
