//! Concurrency limits with tonic on 127.0.0.1: the server's `ShedLayer`
//! answers `RESOURCE_EXHAUSTED` above its limit, the `GrpcLayer` client's
//! own limit shrinks on it and its retries wait the pushback, and a call
//! the client's limit refuses is never sent. Every slot is back at the end.
//!
//! Real time (integration tests), no timing threshold asserted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use steadfast::limit::{Aimd, ConcurrencyLimit};
use steadfast_grpc::GrpcLayer;
use steadfast_grpc::config::ServiceConfig;
use steadfast_grpc::server::ShedLayer;
use steadfast_grpc_testkit::echo::SayRequest;
use steadfast_grpc_testkit::echo::echo_client::EchoClient;
use steadfast_grpc_testkit::{Script, Service, State};
use steadfast_tower::replay::ReplayBody;
use tonic::transport::Channel;
use tower::{Layer, ServiceBuilder};

type Body = tonic::body::Body;
type ToTonic = fn(Request<ReplayBody<Body>>) -> Request<Body>;
type Client = EchoClient<steadfast_grpc::GrpcService<tower::util::MapRequest<Channel, ToTonic>>>;

/// A tonic echo server on 127.0.0.1 behind `shed`.
async fn serve(shed: ShedLayer) -> (SocketAddr, Arc<State>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let state = Arc::new(State::default());
    let service = Service::new(Arc::clone(&state)).into_server();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .layer(shed)
            .add_service(service)
            .serve_with_incoming(incoming)
            .await;
    });
    (addr, state)
}

/// A client through a `GrpcLayer` under `config` and `limit`.
async fn client(addr: SocketAddr, config: &str, limit: &ConcurrencyLimit) -> Client {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("valid url")
        .connect()
        .await
        .expect("connected");
    let to_tonic: ToTonic = |r| r.map(Body::new);
    let channel = ServiceBuilder::new().map_request(to_tonic).service(channel);
    let config = ServiceConfig::from_json(config).expect("valid config");
    let layer = GrpcLayer::builder(config, &addr.to_string())
        .concurrency_limit(limit.clone())
        .build()
        .expect("valid layer");
    EchoClient::new(layer.layer(channel))
}

fn say(key: &str) -> SayRequest {
    SayRequest {
        text: "hello".into(),
        key: key.into(),
    }
}

fn aimd(initial: u32) -> Aimd {
    Aimd::builder()
        .initial_limit(initial)
        .min_limit(1)
        .max_limit(64)
        .build()
        .expect("valid aimd")
}

/// Waits (up to 5 s) for every slot of `limit` to be back.
async fn drained(limit: &ConcurrencyLimit) -> u32 {
    for _ in 0..500 {
        if limit.in_flight() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    limit.in_flight()
}

const RETRY_EXHAUSTED: &str = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo"}],
    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.005s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sheds_above_its_limit_and_the_client_limit_backs_off() {
    let server_limit = ConcurrencyLimit::fixed(4)
        .name("echo server")
        .build()
        .expect("valid limit");
    let (addr, state) =
        serve(ShedLayer::new(server_limit.clone()).pushback(Duration::from_millis(5))).await;
    // Every call works for 20 ms.
    state.script("k", Script::stalling(u32::MAX, Duration::from_millis(20)));
    // The client starts well above what the server takes, its callers
    // waiting in its queue for a slot.
    let client_limit = ConcurrencyLimit::adaptive(aimd(16))
        .name("client")
        .window(Duration::from_millis(50), 5)
        .queue(64, Duration::from_secs(5))
        .build()
        .expect("valid limit");
    let client = client(addr, RETRY_EXHAUSTED, &client_limit).await;

    let mut callers = Vec::new();
    for _ in 0..32 {
        let mut client = client.clone();
        callers.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for _ in 0..10 {
                outcomes.push(client.say(say("k")).await.map(|r| r.into_inner().text));
            }
            outcomes
        }));
    }
    let (mut ok, mut exhausted) = (0, 0);
    for caller in callers {
        for outcome in caller.await.expect("a caller panicked") {
            match outcome {
                Ok(text) => {
                    assert_eq!(text, "hello");
                    ok += 1;
                }
                Err(status) => {
                    // Shed three times in a row: the server's refusal, as
                    // the last attempt got it.
                    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
                    assert!(
                        status
                            .message()
                            .starts_with("concurrency limit echo server full"),
                        "{status:?}"
                    );
                    exhausted += 1;
                }
            }
        }
    }
    let seen = (
        ok,
        exhausted,
        client_limit.snapshot(),
        server_limit.snapshot(),
    );
    eprintln!("{seen:?}");
    assert_eq!(ok + exhausted, 320, "{seen:?}");
    // The server shed what it had no slot for...
    assert!(server_limit.snapshot().refused > 0, "{seen:?}");
    // ...the client heard it as overload and backed off...
    assert!(client_limit.limit() < 16, "{seen:?}");
    // ...and retried after the pushback: the handler saw every call that
    // succeeded, some of them on a later attempt.
    let attempts = state.seen("k");
    assert_eq!(attempts.len(), ok, "{seen:?}");
    assert!(
        attempts.iter().any(|a| a.previous_attempts.is_some()),
        "{seen:?}"
    );
    assert_eq!(client_limit.in_flight(), 0, "{seen:?}");
    assert_eq!(drained(&server_limit).await, 0, "{seen:?}");
}

#[tokio::test]
async fn a_server_limit_learns_from_its_own_statuses() {
    // Shrinks on each window of five drops.
    let server_limit = ConcurrencyLimit::adaptive(aimd(8))
        .name("echo server")
        .window(Duration::ZERO, 5)
        .build()
        .expect("valid limit");
    let (addr, state) = serve(ShedLayer::new(server_limit.clone())).await;
    state.script(
        "busy",
        Script::failing(u32::MAX).with_code(tonic::Code::ResourceExhausted),
    );
    // No retries: each call is one attempt the server answers itself.
    let unlimited = ConcurrencyLimit::fixed(64).build().expect("valid limit");
    let mut client = client(addr, "{}", &unlimited).await;
    for _ in 0..10 {
        let status = client.say(say("busy")).await.expect_err("exhausted");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(
            status.message(),
            format!("attempt {} fails", state.attempts("busy"))
        );
    }
    // Two windows of drops: 8 × 0.9 = 7, then 7 × 0.9 = 6.
    assert_eq!(server_limit.limit(), 6, "{:?}", server_limit.snapshot());
    assert_eq!(drained(&server_limit).await, 0);
    assert_eq!(drained(&unlimited).await, 0);
}

#[tokio::test]
async fn a_call_the_client_limit_refuses_is_resource_exhausted_and_never_sent() {
    let server_limit = ConcurrencyLimit::fixed(64).build().expect("valid limit");
    let (addr, state) = serve(ShedLayer::new(server_limit)).await;
    let limit = ConcurrencyLimit::fixed(1)
        .name("inventory")
        .build()
        .expect("valid limit");
    // A retried method, a method with a config but no policy, and one no
    // config names: the limit holds for all three.
    let config = r#"{"methodConfig": [
        {"name": [{"service": "steadfast.test.Echo", "method": "Say"}],
         "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.005s",
                         "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}},
        {"name": [{"service": "steadfast.test.Echo", "method": "Stream"}], "timeout": "5s"}]}"#;
    let mut client = client(addr, config, &limit).await;
    let held = limit.try_acquire().expect("free");
    let refused = [
        client.say(say("say")).await.expect_err("refused"),
        client.hedged(say("hedged")).await.expect_err("refused"),
        client.stream(say("stream")).await.expect_err("refused"),
    ];
    for status in &refused {
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert_eq!(
            status.message(),
            "concurrency limit inventory full: 1 in flight, limit 1"
        );
    }
    for key in ["say", "hedged", "stream"] {
        assert_eq!(state.attempts(key), 0, "{key} was sent");
    }
    drop(held);
    assert_eq!(
        client
            .say(say("say"))
            .await
            .expect("sent")
            .into_inner()
            .attempts,
        1
    );
    assert_eq!(
        client
            .hedged(say("hedged"))
            .await
            .expect("sent")
            .into_inner()
            .attempts,
        1
    );
    let mut stream = client
        .stream(say("stream"))
        .await
        .expect("sent")
        .into_inner();
    assert_eq!(
        stream.message().await.expect("a reply").map(|r| r.attempts),
        Some(1)
    );
    drop(stream);
    assert_eq!(drained(&limit).await, 0);
}

#[tokio::test]
async fn a_retried_unavailable_shrinks_the_client_limit_and_gives_every_slot_back() {
    let server_limit = ConcurrencyLimit::fixed(64).build().expect("valid limit");
    let (addr, state) = serve(ShedLayer::new(server_limit)).await;
    // Each call fails twice with UNAVAILABLE, then succeeds.
    let limit = ConcurrencyLimit::adaptive(aimd(8))
        .name("client")
        .window(Duration::ZERO, 3)
        .build()
        .expect("valid limit");
    let config = r#"{"methodConfig": [{"name": [{}],
        "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.002s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let mut client = client(addr, config, &limit).await;
    for i in 0..3 {
        let key = format!("k{i}");
        state.script(&key, Script::failing(2));
        let reply = client.say(say(&key)).await.expect("recovered").into_inner();
        assert_eq!(reply.attempts, 3);
    }
    // Nine attempts, six of them UNAVAILABLE: each window of three held two
    // drops, so each shrank the limit: 8 → 7 → 6 → 5.
    assert_eq!(limit.limit(), 5, "{:?}", limit.snapshot());
    assert_eq!(limit.in_flight(), 0);
}

/// #25: a rate limit over every method of the channel: every attempt takes
/// a turn; a retry it refuses is not sent (the call ends with its last
/// answer); a call past the quota is answered RESOURCE_EXHAUSTED naming the
/// limit and the wait, and never sent.
#[tokio::test]
async fn a_call_the_client_rate_limit_refuses_is_resource_exhausted_and_never_sent() {
    use steadfast::rate::{Quota, RateLimit};
    let server_limit = ConcurrencyLimit::fixed(64).build().expect("valid limit");
    let (addr, state) = serve(ShedLayer::new(server_limit)).await;
    let quota = RateLimit::builder()
        .name("maps api")
        .quota(Quota::per_minute(4).expect("valid"))
        .build()
        .expect("valid limit");
    let config = r#"{"methodConfig": [
        {"name": [{"service": "steadfast.test.Echo", "method": "Say"}],
         "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.005s",
                         "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("valid url")
        .connect()
        .await
        .expect("connected");
    let to_tonic: ToTonic = |r| r.map(Body::new);
    let channel = ServiceBuilder::new().map_request(to_tonic).service(channel);
    let config = ServiceConfig::from_json(config).expect("valid");
    let layer = GrpcLayer::builder(config, &addr.to_string())
        .rate_limit(quota)
        .build()
        .expect("valid layer");
    let mut client = EchoClient::new(layer.layer(channel));
    // Two turns: the first attempt fails, its retry succeeds.
    state.script("flaky", Script::failing(1));
    let reply = client.say(say("flaky")).await.expect("retried");
    assert_eq!(reply.into_inner().attempts, 2);
    // A method no config names takes a turn too.
    assert!(client.hedged(say("plain")).await.is_ok());
    // The last turn: its retry is refused and not sent.
    state.script("again", Script::failing(1));
    let err = client
        .say(say("again"))
        .await
        .expect_err("the retry was refused");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert_eq!(state.attempts("again"), 1);
    // No turn left: refused before anything is sent.
    let refused = client.say(say("late")).await.expect_err("over the quota");
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused
            .message()
            .starts_with("rate limit maps api: admitted again in "),
        "{}",
        refused.message()
    );
    assert_eq!(state.attempts("late"), 0, "the refused call was not sent");
}

/// #25: a server's rate limit answers RESOURCE_EXHAUSTED with the limit's
/// exact wait as pushback; a steadfast client whose policy retries it waits
/// the pushback and is admitted.
#[tokio::test]
async fn a_server_rate_limit_pushes_back_by_its_wait_and_the_client_honours_it() {
    use steadfast::rate::{Quota, RateLimit};
    use steadfast_grpc::server::RateLimitLayer;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let state = Arc::new(State::default());
    let service = Service::new(Arc::clone(&state)).into_server();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let quota = Quota::per(Duration::from_millis(50), 1).expect("valid");
    let limit = RateLimit::builder()
        .name("echo")
        .quota(quota)
        .build()
        .expect("valid");
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .layer(RateLimitLayer::new(limit))
            .add_service(service)
            .serve_with_incoming(incoming)
            .await;
    });
    // Without retries: the refusal itself, and its pushback.
    let plain = ConcurrencyLimit::fixed(64).build().expect("valid");
    let mut once = client(addr, "{}", &plain).await;
    assert!(once.say(say("first")).await.is_ok());
    let refused = once.say(say("second")).await.expect_err("over the rate");
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    let pushback: u64 = refused
        .metadata()
        .get("grpc-retry-pushback-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("a pushback");
    // At most the quota's 50 ms, padded by the system clock's tick.
    let tick = {
        use steadfast::clock::Clock;
        steadfast::clock::SystemClock.tick_lag().as_millis()
    };
    assert!(
        (1..=50 + u64::try_from(tick).expect("ms")).contains(&pushback),
        "{pushback}"
    );
    assert!(
        refused
            .message()
            .starts_with("rate limit echo: admitted again in "),
        "{}",
        refused.message()
    );
    // With a policy that retries RESOURCE_EXHAUSTED: the pushback is waited.
    let config = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo"}],
        "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.002s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}}]}"#;
    let mut retrying = client(addr, config, &plain).await;
    assert!(retrying.say(say("third")).await.is_ok());
    let reply = retrying
        .say(say("fourth"))
        .await
        .expect("admitted after the pushback");
    assert_eq!(
        reply.into_inner().attempts,
        1,
        "the server saw the retry only"
    );
    assert_eq!(state.attempts("fourth"), 1);
}
