//! `steadfast_grpc::channel`, the one-line setup, against a real tonic
//! server on 127.0.0.1 (`steadfast-grpc-testkit`): it retries, hedges and
//! throttles as `GrpcLayer` does, one server's forms of address share one
//! token bucket, and every setup failure is one error type.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use steadfast_grpc::config::ServiceConfig;
use steadfast_grpc::{Error, GrpcChannel, GrpcLayer};
use steadfast_grpc_testkit::echo::SayRequest;
use steadfast_grpc_testkit::echo::echo_client::EchoClient;
use steadfast_grpc_testkit::{Script, Server};
use tonic::transport::Channel;

async fn connect(server: &Server) -> Channel {
    Channel::from_shared(server.url())
        .expect("valid url")
        .connect()
        .await
        .expect("connected")
}

/// The whole setup a user writes: one line, and a nameable client type.
async fn client(server: &Server, target: &str, config: &str) -> EchoClient<GrpcChannel<Channel>> {
    EchoClient::new(steadfast_grpc::channel(connect(server).await, target, config).expect("valid"))
}

fn say(key: &str) -> SayRequest {
    SayRequest {
        text: "hello".into(),
        key: key.into(),
    }
}

const RETRY_UNAVAILABLE: &str = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo"}],
    "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.05s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;

const THROTTLED: &str = r#"{"methodConfig": [{"name": [{}],
    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.002s",
                    "backoffMultiplier": 2, "retryableStatusCodes": [14]}}],
    "retryThrottling": {"maxTokens": 4, "tokenRatio": 1}}"#;

#[tokio::test]
async fn retries_and_marks_every_retry() {
    let server = Server::start().await;
    server.state.script("k", Script::failing(2));
    let mut client = client(&server, &server.url(), RETRY_UNAVAILABLE).await;
    let reply = client.say(say("k")).await.expect("recovered").into_inner();
    assert_eq!((reply.text.as_str(), reply.attempts), ("hello", 3));
    let previous: Vec<_> = server
        .state
        .seen("k")
        .iter()
        .map(|s| s.previous_attempts.clone())
        .collect();
    assert_eq!(previous, [None, Some("1".to_owned()), Some("2".to_owned())]);

    server.state.script(
        "bad",
        Script::failing(5).with_code(tonic::Code::InvalidArgument),
    );
    let status = client.say(say("bad")).await.expect_err("not retryable");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(server.state.attempts("bad"), 1);
}

#[tokio::test]
async fn takes_a_json_value_and_the_clone_shares_the_setup() {
    let server = Server::start().await;
    server.state.script("k", Script::failing(1));
    let config: serde_json::Value = serde_json::from_str(RETRY_UNAVAILABLE).expect("json");
    let channel =
        steadfast_grpc::channel(connect(&server).await, &server.url(), config).expect("valid");
    let mut client = EchoClient::new(channel.clone());
    client.say(say("k")).await.expect("recovered");
    assert_eq!(server.state.attempts("k"), 2);
}

#[tokio::test]
async fn hedges_and_cancels_the_slow_copy() {
    let server = Server::start().await;
    server
        .state
        .script("k", Script::stalling(1, Duration::from_secs(30)));
    let config = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo", "method": "Say"}],
        "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.05s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let mut client = client(&server, &server.url(), config).await;
    let started = Instant::now();
    let reply = client
        .say(say("k"))
        .await
        .expect("the fast copy")
        .into_inner();
    assert_eq!(reply.attempts, 2);
    assert!(started.elapsed() < Duration::from_secs(30));
    let mut cancelled = false;
    for _ in 0..500 {
        if server.state.cancelled.load(Ordering::SeqCst) == 1 {
            cancelled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(cancelled, "the server never saw the slow copy cancelled");
}

#[tokio::test]
async fn throttles_after_a_burst_of_failures_and_resumes_after_successes() {
    let server = Server::start().await;
    let mut client = client(&server, &server.url(), THROTTLED).await;
    server.state.script("down", Script::failing(1000));
    // maxTokens 4, ratio 1: attempt (4→3), retry allowed (3 > 2), fails (3→2).
    let _ = client.say(say("down")).await;
    assert_eq!(server.state.attempts("down"), 2);
    // Fails (2→1), its retry refused.
    let _ = client.say(say("down")).await;
    assert_eq!(server.state.attempts("down"), 3);
    for i in 0..3 {
        client.say(say(&format!("ok{i}"))).await.expect("healthy");
    }
    server.state.script("flaky", Script::failing(1));
    client.say(say("flaky")).await.expect("retried again");
    assert_eq!(server.state.attempts("flaky"), 2);
}

/// Drains the bucket of `target` through one client, then shows whether a
/// client built on `other` sees it drained (its failing call not retried).
async fn shares_a_bucket(server: &Server, target: &str, other: &str) -> bool {
    let mut first = client(server, target, THROTTLED).await;
    let mut second = client(server, other, THROTTLED).await;
    let key = format!("down-{other}");
    server.state.script(&key, Script::failing(1000));
    let _ = first.say(say(&key)).await; // two attempts: 4 → 2 tokens
    assert_eq!(server.state.attempts(&key), 2);
    let _ = second.say(say(&key)).await;
    // A shared bucket (2 tokens) refuses the retry; a fresh one (4) allows it.
    server.state.attempts(&key) == 3
}

#[tokio::test]
async fn host_port_and_http_url_of_one_server_share_one_bucket() {
    let server = Server::start().await;
    let bare = server.addr.to_string();
    let url = server.url();
    assert!(shares_a_bucket(&server, &bare, &url).await);
    let server = Server::start().await;
    let dns = format!("dns:///{}", server.addr);
    assert!(shares_a_bucket(&server, &format!("{}/", server.url()), &dns).await);
}

#[tokio::test]
async fn another_server_has_a_bucket_of_its_own() {
    let server = Server::start().await;
    // The same client, keyed on a server elsewhere: its bucket is full.
    assert!(!shares_a_bucket(&server, &server.url(), "http://127.0.0.1:1").await);
}

#[tokio::test]
async fn a_layer_and_a_one_liner_to_one_server_share_one_bucket() {
    let server = Server::start().await;
    let config = ServiceConfig::from_json(THROTTLED).expect("valid");
    let layer = GrpcLayer::new(config, &server.addr.to_string()).expect("valid");
    let mut by_layer = EchoClient::new(layer.channel(connect(&server).await));
    let mut one_line = client(&server, &server.url(), THROTTLED).await;
    server.state.script("down", Script::failing(1000));
    let _ = by_layer.say(say("down")).await;
    assert_eq!(server.state.attempts("down"), 2);
    let _ = one_line.say(say("down")).await;
    assert_eq!(server.state.attempts("down"), 3);
}

#[tokio::test]
async fn bad_json_a_bad_config_and_a_bad_target_are_one_error_type() {
    let server = Server::start().await;
    let channel = connect(&server).await;
    let url = server.url();

    let err: Error = steadfast_grpc::channel(channel.clone(), &url, "{\"methodConfig\": [")
        .expect_err("not JSON");
    assert!(
        matches!(err, Error::Config(ref e) if e.field().is_empty()),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with("invalid service config: must be valid JSON, got "),
        "{message}"
    );

    let bad = r#"{"methodConfig": [{"name": [{}],
        "retryPolicy": {"maxAttempts": 1, "initialBackoff": "0.1s", "maxBackoff": "1s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let err = steadfast_grpc::channel(channel.clone(), &url, bad).expect_err("maxAttempts 1");
    assert!(
        matches!(err, Error::Config(ref e)
        if e.field() == "methodConfig[0].retryPolicy.maxAttempts"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("invalid service config: methodConfig[0].retryPolicy.maxAttempts "),
        "{err}"
    );
    assert!(std::error::Error::source(&err).is_some());

    let err =
        steadfast_grpc::channel(channel.clone(), &url, b"\xff".as_slice()).expect_err("not UTF-8");
    assert!(matches!(err, Error::Config(_)), "{err:?}");

    let err = steadfast_grpc::channel(channel, "unix:///tmp/echo", RETRY_UNAVAILABLE)
        .expect_err("not a server address");
    assert_eq!(err, Error::Target("unix:///tmp/echo".to_owned()));
    assert_eq!(
        err.to_string(),
        "invalid gRPC target \"unix:///tmp/echo\": expected host:port, http(s)://host[:port] or dns:///host[:port]"
    );
    // Both error types of the layer's API convert with `?`.
    fn setup(json: &str) -> Result<GrpcLayer, Error> {
        Ok(GrpcLayer::new(
            ServiceConfig::from_json(json)?,
            "127.0.0.1:1",
        )?)
    }
    assert!(matches!(setup("[]"), Err(Error::Config(_))));
    assert!(setup("{}").is_ok());
}
