//! `channel_over`: one tonic client over several real tonic servers on
//! 127.0.0.1 (`steadfast-grpc-testkit`), one of which answers UNAVAILABLE
//! to every call. Every call succeeds; a call that met the bad replica
//! retried on another, never on it again; gRFC A50's outlier detection,
//! read from the service config's `loadBalancingConfig` as grpc-go reads
//! it, ejects the bad replica at a sweep, and nothing reaches it while it
//! is ejected.
//!
//! Real time, no timing threshold: every assertion counts attempts, and the
//! wait for a sweep is a liveness bound far above what a run takes.

use std::time::{Duration, Instant};

use steadfast_grpc::{Error, channel_over};
use steadfast_grpc_testkit::echo::SayRequest;
use steadfast_grpc_testkit::echo::echo_client::EchoClient;
use steadfast_grpc_testkit::nack::{Nack, NackServer};
use steadfast_grpc_testkit::{Script, Server};
use tonic::transport::Channel;

const RETRY: &str = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo"}],
    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.002s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]"#;

fn say() -> SayRequest {
    SayRequest {
        text: "hello".into(),
        key: "k".into(),
    }
}

/// Three replicas, the second failing every call.
async fn replicas() -> [Server; 3] {
    let servers = [
        Server::start().await,
        Server::start().await,
        Server::start().await,
    ];
    servers[1].state.script("k", Script::failing(u32::MAX));
    servers
}

fn channels(servers: &[Server]) -> Vec<(String, Channel)> {
    servers
        .iter()
        .map(|s| {
            let channel = Channel::from_shared(s.url())
                .expect("a valid URL")
                .connect_lazy();
            (s.url(), channel)
        })
        .collect()
}

#[tokio::test]
async fn a_call_that_meets_the_failing_replica_retries_on_another() {
    let servers = replicas().await;
    let config = format!("{RETRY}}}");
    let channel = channel_over("echo", channels(&servers), config.as_str()).expect("a channel");
    assert_eq!(
        channel.endpoints().map(steadfast::endpoint::Endpoints::len),
        Some(3)
    );
    let mut client = EchoClient::new(channel);
    for _ in 0..30 {
        let reply = client.say(say()).await.expect("every call succeeds");
        assert_eq!(reply.into_inner().text, "hello");
    }
    let good: usize = [&servers[0], &servers[2]]
        .iter()
        .map(|s| s.state.attempts("k"))
        .sum();
    assert_eq!(good, 30, "one success per call");
    // Every attempt the bad replica failed was retried, on a good one.
    let retried: usize = [&servers[0], &servers[2]]
        .iter()
        .map(|s| {
            let seen = s.state.seen("k");
            seen.iter()
                .filter(|s| s.previous_attempts.as_deref() == Some("1"))
                .count()
        })
        .sum();
    assert_eq!(retried, servers[1].state.attempts("k"));
    // No call made a third attempt: a retry never went back to the bad one.
    for server in [&servers[0], &servers[2]] {
        assert!(
            server
                .state
                .seen("k")
                .iter()
                .all(|s| s.previous_attempts.as_deref().is_none_or(|p| p == "1")),
            "{:?}",
            server.state.seen("k")
        );
    }
}

#[tokio::test]
async fn a50_from_the_service_config_ejects_the_failing_replica() {
    let servers = replicas().await;
    // grpc-go's JSON: a sweep every 100 ms, failure percentage judged on
    // every replica with a call in the interval.
    let config = format!(
        r#"{RETRY}, "loadBalancingConfig": [{{"outlier_detection_experimental": {{
            "interval": "0.1s", "baseEjectionTime": "30s",
            "failurePercentageEjection": {{"threshold": 85, "minimumHosts": 3, "requestVolume": 1}},
            "childPolicy": [{{"round_robin": {{}}}}]}}}}]}}"#
    );
    let channel = channel_over("echo", channels(&servers), config.as_str()).expect("a channel");
    let set = channel.endpoints().expect("a set").clone();
    let bad_url = servers[1].url();
    let bad_ejected = || {
        set.snapshot(Instant::now())
            .iter()
            .any(|e| *e.label == *bad_url && e.ejected)
    };
    let mut client = EchoClient::new(channel);
    let mut ejected = false;
    for _ in 0..2_000 {
        client.say(say()).await.expect("every call succeeds");
        if bad_ejected() {
            ejected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(ejected, "the failing replica was never ejected");
    // Ejected for 30 s: nothing reaches it meanwhile.
    let before = servers[1].state.attempts("k");
    for _ in 0..40 {
        client.say(say()).await.expect("every call succeeds");
    }
    assert!(bad_ejected());
    assert_eq!(servers[1].state.attempts("k"), before);
}

/// A URL on 127.0.0.1 nothing listens on: connections are refused.
fn refusing() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    drop(listener);
    url
}

/// The good replica's channel, then one lazily connected channel for each
/// of `others`.
fn good_and(good: &Server, others: &[String]) -> Vec<(String, Channel)> {
    let mut replicas = channels(std::slice::from_ref(good));
    for url in others {
        let channel = Channel::from_shared(url.clone())
            .expect("a valid URL")
            .connect_lazy();
        replicas.push((url.clone(), channel));
    }
    replicas
}

/// Each of `calls` calls reached `good` once, as attempt 1 (no
/// `grpc-previous-rpc-attempts`: a requeue is no previous attempt).
fn each_call_reached_once_as_attempt_one(good: &Server, calls: usize) {
    let seen = good.state.seen("k");
    assert_eq!(
        seen.len(),
        calls,
        "every call reached the good replica once"
    );
    assert!(
        seen.iter().all(|s| s.previous_attempts.is_none()),
        "a requeue is no previous attempt: {seen:?}"
    );
}

/// A refused connection never left the client: the call is requeued to
/// another replica without using an attempt, and the attempt that gets
/// through is still the first (`grpc-previous-rpc-attempts` absent: the
/// server never saw the refused one, as gRFC A6 has it for a transparent
/// retry).
#[tokio::test]
async fn a_refused_connection_is_requeued_and_is_no_previous_attempt() {
    let good = Server::start().await;
    let dead = [refusing(), refusing()];
    let replicas = good_and(&good, &dead);
    let channel = channel_over("echo", replicas, format!("{RETRY}}}").as_str()).expect("a channel");
    let set = channel.endpoints().expect("a set").clone();
    // A dead replica once picked carries a failure's load penalty (5 s,
    // above the 1 s of a replica never sampled).
    let tried = |url: &String| {
        set.snapshot(Instant::now())
            .iter()
            .any(|e| *e.label == **url && e.rtt > Duration::from_secs(2))
    };
    let mut client = EchoClient::new(channel);
    let mut calls = 0;
    // Until both dead replicas were picked (a liveness bound: a pick meets
    // one in about a third of the calls until both are penalized).
    while !dead.iter().all(tried) {
        assert!(calls < 500, "the dead replicas were never picked");
        client.say(say()).await.expect("every call gets through");
        calls += 1;
    }
    each_call_reached_once_as_attempt_one(&good, calls);
}

/// HTTP/2 servers that turn a request away unprocessed, one with
/// `REFUSED_STREAM`, one with a `GOAWAY` that leaves its stream out: the
/// call is requeued to the good replica, which sees it once, as attempt 1
/// (no `grpc-previous-rpc-attempts`). Every request the refusing servers
/// received belongs to a call that still got through.
#[tokio::test]
async fn a_stream_refused_unprocessed_is_requeued() {
    let good = Server::start().await;
    let refusing = NackServer::start(Nack::RefuseStream).await;
    let going_away = NackServer::start(Nack::GoAway).await;
    let replicas = good_and(&good, &[refusing.url(), going_away.url()]);
    // Two attempts (a service config allows no fewer): a call that met
    // both refusing servers gets through only if requeued, and a retry
    // would reach the good replica as attempt 2.
    let one = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo"}],
        "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.001s", "maxBackoff": "0.002s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let channel = channel_over("echo", replicas, one).expect("a channel");
    let mut client = EchoClient::new(channel);
    let mut calls = 0;
    // Until both were picked (a liveness bound: a pick meets one of them
    // in about a third of the calls until they carry a penalty).
    while refusing.requests() == 0 || going_away.requests() == 0 {
        assert!(calls < 500, "the refusing replicas were never picked");
        client.say(say()).await.expect("every call gets through");
        calls += 1;
    }
    each_call_reached_once_as_attempt_one(&good, calls);
}

#[tokio::test]
async fn a_bad_load_balancing_config_is_an_error_naming_its_field() {
    let servers = replicas().await;
    let config = r#"{"loadBalancingConfig": [{"outlier_detection_experimental": {"maxEjectionPercent": 250}}]}"#;
    let Err(Error::Config(err)) = channel_over("echo", channels(&servers), config) else {
        panic!("a config error");
    };
    assert_eq!(
        err.field(),
        "loadBalancingConfig[0].outlier_detection_experimental.maxEjectionPercent"
    );
}
