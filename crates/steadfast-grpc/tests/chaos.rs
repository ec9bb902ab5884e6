//! Faults on purpose and fallbacks, on a real tonic client and server on
//! 127.0.0.1: the client's chaos (`GrpcLayerBuilder::chaos`) injected
//! under the retries, the server's `ChaosLayer` answering Envoy's fault
//! headers, and the client's fallback (`GrpcLayerBuilder::fallback`)
//! answering a call the server failed on every attempt.
//!
//! The client layers run on a `VirtualClock`: backoffs and injected
//! latencies take no real time, and the time they take is exact. A call
//! with a timeout has a timer racing its attempt, which an auto-advancing
//! clock would end at once: that test's clock is manual.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use prost::Message;
use steadfast::StopReason;
use steadfast::chaos::{Chaos, ChaosSwitch};
use steadfast::clock::VirtualClock;
use steadfast::deadline::DeadlineHeader;
use steadfast_grpc::config::ServiceConfig;
use steadfast_grpc::server::{
    ABORT_GRPC_HEADER, ABORT_HTTP_HEADER, ABORT_PERCENT_HEADER, ChaosLayer,
};
use steadfast_grpc::{
    Code, FallbackAnswer, GrpcChannel, GrpcLayer, GrpcLayerBuilder, chaos_status,
};
use steadfast_grpc_testkit::echo::echo_client::EchoClient;
use steadfast_grpc_testkit::echo::{SayReply, SayRequest};
use steadfast_grpc_testkit::{Script, Server, Service, State};
use tonic::transport::Channel;

type Client = EchoClient<GrpcChannel<Channel, VirtualClock>>;

const RETRY_UNAVAILABLE: &str = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo", "method": "Say"}],
    "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.05s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;

/// A client to `addr` through the layer `setup` makes of a builder for
/// `config` on `clock`.
async fn connect(
    addr: SocketAddr,
    config: &str,
    clock: &VirtualClock,
    setup: impl FnOnce(GrpcLayerBuilder<VirtualClock>) -> GrpcLayerBuilder<VirtualClock>,
) -> Client {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("valid url")
        .connect()
        .await
        .expect("connected");
    let config = ServiceConfig::from_json(config).expect("valid config");
    let builder = GrpcLayer::builder(config, &addr.to_string()).clock(clock.clone());
    let layer = setup(builder).build().expect("valid layer");
    EchoClient::new(layer.channel(channel))
}

fn say(key: &str) -> SayRequest {
    SayRequest {
        text: "hello".into(),
        key: key.into(),
    }
}

fn code(status: &tonic::Status) -> Code {
    Code::from_i64(i64::from(i32::from(status.code()))).expect("a gRPC code")
}

/// An injected UNAVAILABLE is retried by the method's retry policy: at
/// rate 1 every attempt is answered by the chaos and the server sees
/// nothing; switched off, the next call goes through. And a chaos that
/// switches itself off after two injections lets the third attempt of the
/// same call through, which the server sees as attempt 3.
#[tokio::test]
async fn an_injected_unavailable_is_retried_and_chaos_switched_off_lets_calls_through() {
    let server = Server::start().await;
    let clock = VirtualClock::new();
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(1)
        .outcome(1.0, || chaos_status(Code::Unavailable, None))
        .build()
        .expect("valid chaos");
    let mut client = connect(server.addr, RETRY_UNAVAILABLE, &clock, |b| {
        b.chaos(chaos.clone())
    })
    .await;
    let status = client
        .say(say("all"))
        .await
        .expect_err("every attempt injected");
    assert_eq!(code(&status), Code::Unavailable);
    assert_eq!(status.message(), "fault injected by steadfast chaos");
    assert_eq!(chaos.stats().outcomes, 4, "maxAttempts 4, each injected");
    assert_eq!(server.state.attempts("all"), 0, "nothing was sent");

    chaos.switch().turn_off();
    let reply = client
        .say(say("all"))
        .await
        .expect("chaos off")
        .into_inner();
    assert_eq!(reply.attempts, 1);
    assert_eq!(chaos.stats().outcomes, 4);

    // Two injected failures, then the switch goes off: the third attempt of
    // the same call reaches the server, marked as such.
    let switch: Arc<OnceLock<ChaosSwitch>> = Arc::default();
    let made = Arc::new(AtomicU32::new(0));
    let flaky = Chaos::builder()
        .enabled(true)
        .seed(2)
        .outcome(1.0, {
            let (switch, made) = (switch.clone(), made.clone());
            move || {
                if made.fetch_add(1, Ordering::SeqCst) + 1 == 2
                    && let Some(s) = switch.get()
                {
                    s.turn_off();
                }
                chaos_status(Code::Unavailable, Some(Duration::from_millis(250)))
            }
        })
        .build()
        .expect("valid chaos");
    switch.set(flaky.switch()).expect("set once");
    let before = clock.elapsed();
    let mut recovering = connect(server.addr, RETRY_UNAVAILABLE, &clock, |b| {
        b.chaos(flaky.clone())
    })
    .await;
    let reply = recovering
        .say(say("third"))
        .await
        .expect("recovered")
        .into_inner();
    assert_eq!(reply.attempts, 1, "the server saw one attempt");
    let seen = server.state.seen("third");
    assert_eq!(seen[0].previous_attempts.as_deref(), Some("2"));
    // The injected pushback is waited exactly, twice, on the layer's clock.
    assert_eq!(clock.elapsed() - before, Duration::from_millis(500));
}

/// A latency is slept on the layer's clock before the attempt is made: the
/// attempt's `grpc-timeout` is the time left after it, and nothing reaches
/// the server until the clock has moved past it.
#[tokio::test]
async fn an_injected_latency_comes_before_the_attempt_on_the_layer_clock() {
    const TIMED: &str = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo"}],
        "timeout": "30s"}]}"#;
    let server = Server::start().await;
    let clock = VirtualClock::manual();
    let chaos = Chaos::builder()
        .enabled(true)
        .latency(1.0, Duration::from_secs(5))
        .build()
        .expect("valid chaos");
    let mut client = connect(server.addr, TIMED, &clock, |b| b.chaos(chaos.clone())).await;
    let mut call = Box::pin(client.say(say("slow")));
    // Poll the call until the injected latency waits on the clock (the
    // earliest sleep: the call's 30 s timer waits too).
    let injected = clock.start() + Duration::from_secs(5);
    while clock.next_wake() != Some(injected) {
        tokio::select! {
            _ = &mut call => panic!("the call waits for the clock"),
            () = tokio::task::yield_now() => {}
        }
    }
    assert_eq!(
        server.state.attempts("slow"),
        0,
        "nothing sent during the latency"
    );
    clock.advance(Duration::from_secs(5));
    let reply = call.await.expect("delayed, then served");
    assert_eq!(reply.into_inner().attempts, 1);
    assert_eq!(chaos.stats().latencies, 1);
    let seen = server.state.seen("slow");
    let timeout = seen[0].timeout.as_deref().expect("a grpc-timeout");
    let left = DeadlineHeader::GRPC
        .decode(timeout.as_bytes())
        .expect("a valid grpc-timeout");
    assert_eq!(left, Duration::from_secs(25), "30 s timeout, 5 s injected");
}

/// A seeded rate over many calls of a method with no retry policy: each
/// call draws once, the injected ones never reach the server, and the
/// share is near the rate (300 calls at 30 %: 90 expected, sd ~8; the
/// bounds are over 4 sd away).
#[tokio::test]
async fn a_seeded_rate_injects_about_its_share_on_a_method_without_a_policy() {
    let server = Server::start().await;
    let clock = VirtualClock::new();
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(42)
        .outcome(0.3, || chaos_status(Code::ResourceExhausted, None))
        .build()
        .expect("valid chaos");
    let mut client = connect(server.addr, "{}", &clock, |b| b.chaos(chaos.clone())).await;
    let mut failed = 0;
    for _ in 0..300 {
        match client.say(say("many")).await {
            Ok(_) => {}
            Err(status) => {
                assert_eq!(code(&status), Code::ResourceExhausted);
                failed += 1;
            }
        }
    }
    let stats = chaos.stats();
    assert_eq!(stats.drawn, 300);
    assert_eq!(stats.outcomes, failed);
    assert_eq!(
        server.state.attempts("many"),
        300 - usize::try_from(failed).expect("small")
    );
    assert!(
        (55..=125).contains(&failed),
        "{failed} of 300 injected at 30 %"
    );
}

/// An error fault cannot be injected (the channel's errors cannot be
/// made): refused when the layer is built, with an error naming it.
#[test]
fn an_error_fault_is_refused_at_build() {
    let chaos = Chaos::builder()
        .error(0.1, || ())
        .build()
        .expect("valid chaos");
    let config = ServiceConfig::from_json("{}").expect("valid config");
    let err = GrpcLayer::builder(config, "127.0.0.1:1")
        .chaos(chaos)
        .build()
        .expect_err("refused");
    assert!(err.to_string().contains("chaos"), "{err}");
}

/// A tonic echo server on 127.0.0.1 behind the server `ChaosLayer`.
async fn serve_with_chaos(layer: ChaosLayer) -> (SocketAddr, Arc<State>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let state = Arc::new(State::default());
    let service = Service::new(Arc::clone(&state)).into_server();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .layer(layer)
            .add_service(service)
            .serve_with_incoming(incoming)
            .await;
    });
    (addr, state)
}

fn asking(key: &str, headers: &[(&'static str, &'static str)]) -> tonic::Request<SayRequest> {
    let mut request = tonic::Request::new(say(key));
    for (name, value) in headers {
        request
            .metadata_mut()
            .insert(*name, value.parse().expect("ASCII"));
    }
    request
}

/// The server layer answers the code a call's header asks for (and the
/// gRPC code of an asked HTTP status, which Envoy prefers), ignores
/// garbage (the configured fault then), never asks the service for an
/// aborted call, and does nothing when switched off.
#[tokio::test]
async fn the_server_layer_answers_asked_aborts_and_is_off_when_off() {
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(5)
        .outcome(1.0, || ())
        .build()
        .expect("valid chaos");
    let layer = ChaosLayer::new(chaos.clone()).pushback(Duration::from_millis(75));
    let (addr, state) = serve_with_chaos(layer).await;
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("valid url")
        .connect()
        .await
        .expect("connected");
    let mut plain = EchoClient::new(channel);

    let asked = [(ABORT_GRPC_HEADER, "9"), (ABORT_PERCENT_HEADER, "100")];
    let status = plain.say(asking("k", &asked)).await.expect_err("aborted");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        status
            .metadata()
            .get("grpc-retry-pushback-ms")
            .map(|v| v.to_str().ok()),
        Some(Some("75"))
    );

    let http = [(ABORT_GRPC_HEADER, "9"), (ABORT_HTTP_HEADER, "403")];
    let status = plain.say(asking("k", &http)).await.expect_err("aborted");
    assert_eq!(status.code(), tonic::Code::PermissionDenied);

    // Garbage is ignored: the call asked nothing, so the configured
    // fault (UNAVAILABLE, at rate 1) is its answer.
    let garbage = [(ABORT_GRPC_HEADER, "nine"), (ABORT_PERCENT_HEADER, "1000")];
    let status = plain.say(asking("k", &garbage)).await.expect_err("aborted");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(
        state.attempts("k"),
        0,
        "an aborted call never reaches the service"
    );

    chaos.switch().turn_off();
    let reply = plain.say(asking("k", &asked)).await.expect("off means off");
    assert_eq!(reply.into_inner().attempts, 1);
    assert_eq!(chaos.stats().outcomes, 3);
}

/// The tests whose calls fall back take turns: tracing caches whether a
/// callsite is wanted globally, and a call falling back on another thread
/// while the counting subscriber is being set can leave the fallback
/// event's callsite cached as unwanted.
static FALLING_BACK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Collects the fallback events (target `steadfast::fallback`).
#[derive(Clone, Default)]
struct FallbackEvents(Arc<Mutex<u32>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for FallbackEvents {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() == "steadfast::fallback" {
            *self.0.lock().expect("lock") += 1;
        }
    }
}

/// The server fails every attempt: after the retries, the client's
/// generated code receives the fallback's reply message, decoded as the
/// server's would be; the fallback was asked once (and its event recorded
/// once), with how the call ended. A success never falls back.
#[tokio::test(flavor = "current_thread")]
async fn a_call_the_server_always_fails_gets_the_fallback_reply() {
    use tracing_subscriber::layer::SubscriberExt;
    let _turn = FALLING_BACK.lock().await;
    let events = FallbackEvents::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    let server = Server::start().await;
    server.state.script("down", Script::failing(u32::MAX));
    let clock = VirtualClock::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let mut client = connect(server.addr, RETRY_UNAVAILABLE, &clock, |b| {
        let asked = asked.clone();
        b.fallback(move |failure| {
            asked.lock().expect("lock").push((
                failure.method().to_owned(),
                failure.code(),
                failure.reason(),
                failure.attempts(),
            ));
            let cached = SayReply {
                text: "cached".into(),
                attempts: 0,
            };
            Some(FallbackAnswer::message(cached.encode_to_vec()))
        })
    })
    .await;

    let reply = client.say(say("up")).await.expect("served").into_inner();
    assert_eq!((reply.text.as_str(), reply.attempts), ("hello", 1));
    assert!(
        asked.lock().expect("lock").is_empty(),
        "a success never falls back"
    );

    let reply = client.say(say("down")).await.expect("the fallback's reply");
    assert_eq!(reply.get_ref().text, "cached");
    assert_eq!(reply.get_ref().attempts, 0);
    assert_eq!(server.state.attempts("down"), 4);
    assert_eq!(
        *asked.lock().expect("lock"),
        [(
            "/steadfast.test.Echo/Say".to_owned(),
            Code::Unavailable,
            StopReason::Exhausted,
            4
        )]
    );
    assert_eq!(*events.0.lock().expect("lock"), 1, "recorded once");
}

/// An async fallback asks a backup service: the primary server fails every
/// attempt, and the reply the caller decodes is the backup server's, got
/// by a real tonic client of its own inside the fallback. A success never
/// asks the backup.
#[tokio::test]
async fn an_async_fallback_answers_with_a_backup_servers_reply() {
    let _turn = FALLING_BACK.lock().await;
    let primary = Server::start().await;
    primary.state.script("down", Script::failing(u32::MAX));
    let backup = Server::start().await;
    let backup_client = EchoClient::new(
        Channel::from_shared(format!("http://{}", backup.addr))
            .expect("valid url")
            .connect()
            .await
            .expect("connected"),
    );
    let clock = VirtualClock::new();
    let mut client = connect(primary.addr, RETRY_UNAVAILABLE, &clock, |b| {
        b.fallback_async(move |failure| {
            let mut backup = backup_client.clone();
            let unavailable = failure.code() == Code::Unavailable;
            async move {
                if !unavailable {
                    return None;
                }
                let reply = backup.say(say("from-backup")).await.ok()?.into_inner();
                Some(FallbackAnswer::message(reply.encode_to_vec()))
            }
        })
    })
    .await;

    let reply = client.say(say("up")).await.expect("served").into_inner();
    assert_eq!(reply.text, "hello");
    assert_eq!(
        backup.state.attempts("from-backup"),
        0,
        "a success never falls back"
    );

    let reply = client.say(say("down")).await.expect("the backup's reply");
    assert_eq!(reply.get_ref().text, "hello");
    assert_eq!(primary.state.attempts("down"), 4);
    assert_eq!(backup.state.attempts("from-backup"), 1);
}

/// A method without a policy falls back too (it runs its one attempt under
/// the executor), here with a status and metadata; a fallback that
/// declines hands the server's status on.
#[tokio::test]
async fn a_method_without_a_policy_falls_back_to_a_status_or_declines() {
    let _turn = FALLING_BACK.lock().await;
    let server = Server::start().await;
    server.state.script(
        "bad",
        Script::failing(u32::MAX).with_code(tonic::Code::InvalidArgument),
    );
    server.state.script(
        "gone",
        Script::failing(u32::MAX).with_code(tonic::Code::NotFound),
    );
    let clock = VirtualClock::new();
    let mut client = connect(server.addr, "{}", &clock, |b| {
        b.fallback(|failure| {
            (failure.code() == Code::InvalidArgument).then(|| {
                FallbackAnswer::status(Code::FailedPrecondition, "answered by the fallback").header(
                    http::HeaderName::from_static("x-fallback"),
                    http::HeaderValue::from_static("yes"),
                )
            })
        })
    })
    .await;
    let status = client
        .say(say("bad"))
        .await
        .expect_err("the fallback's status");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(status.message(), "answered by the fallback");
    assert_eq!(
        status
            .metadata()
            .get("x-fallback")
            .and_then(|v| v.to_str().ok()),
        Some("yes")
    );
    let status = client.say(say("gone")).await.expect_err("declined");
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(server.state.attempts("bad"), 1);
}

/// A call dropped before it ends (its caller gave up) never falls back:
/// nothing is waiting for the answer.
#[tokio::test]
async fn a_dropped_call_never_falls_back() {
    let _turn = FALLING_BACK.lock().await;
    let server = Server::start().await;
    server
        .state
        .script("stuck", Script::stalling(1, Duration::from_secs(30)));
    let clock = VirtualClock::new();
    let asked = Arc::new(AtomicU32::new(0));
    let mut client = connect(server.addr, RETRY_UNAVAILABLE, &clock, |b| {
        let asked = asked.clone();
        b.fallback(move |_| {
            asked.fetch_add(1, Ordering::SeqCst);
            Some(FallbackAnswer::status(Code::Ok, ""))
        })
    })
    .await;
    let mut call = Box::pin(client.say(say("stuck")));
    // Poll until the server holds the attempt, then drop the call.
    while server.state.attempts("stuck") == 0 {
        tokio::select! {
            _ = &mut call => panic!("the server stalls for 30 s"),
            () = tokio::task::yield_now() => {}
        }
    }
    drop(call);
    assert_eq!(asked.load(Ordering::SeqCst), 0);
}
