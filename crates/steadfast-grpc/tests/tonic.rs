//! The service config applied by `GrpcLayer` to a real tonic client calling
//! a real tonic server on 127.0.0.1 that fails, pushes back and stalls as
//! each test scripts it (`steadfast-grpc-testkit`).
//!
//! Real time (integration tests): backoffs are milliseconds; nothing asserts
//! a timing threshold beyond "well before the stall would have ended".

use std::time::{Duration, Instant};

use http::Request;
use steadfast_grpc::GrpcLayer;
use steadfast_grpc::config::ServiceConfig;
use steadfast_grpc_testkit::echo::SayRequest;
use steadfast_grpc_testkit::echo::echo_client::EchoClient;
use steadfast_grpc_testkit::{Script, Server};
use steadfast_tower::replay::ReplayBody;
use tonic::transport::Channel;
use tower::{Layer, ServiceBuilder};

type Body = tonic::body::Body;

/// A client whose channel goes through the layer for `config`. The layer
/// hands the channel replay bodies; `tonic::body::Body::new` maps them back.
async fn client(
    server: &Server,
    config: &str,
) -> EchoClient<
    steadfast_grpc::GrpcService<
        tower::util::MapRequest<Channel, fn(Request<ReplayBody<Body>>) -> Request<Body>>,
    >,
> {
    let channel = Channel::from_shared(server.url())
        .expect("valid url")
        .connect()
        .await
        .expect("connected");
    let to_tonic: fn(Request<ReplayBody<Body>>) -> Request<Body> = |r| r.map(Body::new);
    let channel = ServiceBuilder::new().map_request(to_tonic).service(channel);
    let config = ServiceConfig::from_json(config).expect("valid config");
    let layer = GrpcLayer::new(config, &server.addr.to_string()).expect("valid layer");
    EchoClient::new(layer.layer(channel))
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

#[tokio::test]
async fn recovers_after_unavailable_and_marks_every_retry() {
    let server = Server::start().await;
    server.state.script("k", Script::failing(2));
    let mut client = client(&server, RETRY_UNAVAILABLE).await;
    let reply = client.say(say("k")).await.expect("recovered").into_inner();
    assert_eq!((reply.text.as_str(), reply.attempts), ("hello", 3));
    let seen = server.state.seen("k");
    let previous: Vec<_> = seen.iter().map(|s| s.previous_attempts.clone()).collect();
    assert_eq!(previous, [None, Some("1".to_owned()), Some("2".to_owned())]);
}

#[tokio::test]
async fn a_code_that_is_not_retryable_is_returned_at_once() {
    let server = Server::start().await;
    server.state.script(
        "k",
        Script::failing(5).with_code(tonic::Code::InvalidArgument),
    );
    let mut client = client(&server, RETRY_UNAVAILABLE).await;
    let status = client.say(say("k")).await.expect_err("invalid argument");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(server.state.attempts("k"), 1);
}

#[tokio::test]
async fn max_attempts_is_clamped_to_five() {
    let server = Server::start().await;
    server.state.script("k", Script::failing(100));
    let config = r#"{"methodConfig": [{"name": [{}],
        "retryPolicy": {"maxAttempts": 9, "initialBackoff": "0.001s", "maxBackoff": "0.002s",
                        "backoffMultiplier": 2, "retryableStatusCodes": [14]}}]}"#;
    let mut client = client(&server, config).await;
    let status = client.say(say("k")).await.expect_err("every attempt fails");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(server.state.attempts("k"), 5);
}

#[tokio::test]
async fn pushback_waits_exactly_and_a_negative_one_stops() {
    let server = Server::start().await;
    server
        .state
        .script("wait", Script::failing(1).with_pushback("300"));
    server
        .state
        .script("stop", Script::failing(1).with_pushback("-1"));
    let mut client = client(&server, RETRY_UNAVAILABLE).await;
    let started = Instant::now();
    client
        .say(say("wait"))
        .await
        .expect("recovered after the pushback");
    // The backoff would have been 8-12 ms; the server asked for 300 ms.
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(server.state.attempts("wait"), 2);

    let status = client.say(say("stop")).await.expect_err("no retry");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(server.state.attempts("stop"), 1);
}

#[tokio::test]
async fn throttling_stops_retries_after_a_burst_of_failures_and_resumes_after_successes() {
    let server = Server::start().await;
    // maxTokens 4, ratio 1: retries stop while tokens <= 2.
    let config = r#"{"methodConfig": [{"name": [{}],
        "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.001s", "maxBackoff": "0.002s",
                        "backoffMultiplier": 2, "retryableStatusCodes": [14]}}],
        "retryThrottling": {"maxTokens": 4, "tokenRatio": 1}}"#;
    let mut client = client(&server, config).await;
    server.state.script("down", Script::failing(1000));
    // First call: attempt (4→3), retry allowed (3 > 2), fails (3→2), no more.
    let _ = client.say(say("down")).await;
    assert_eq!(server.state.attempts("down"), 2);
    // Second call: fails (2→1), its retry refused: one attempt.
    let _ = client.say(say("down")).await;
    assert_eq!(server.state.attempts("down"), 3);
    // Successes refill the bucket (+1 each)...
    for i in 0..3 {
        client
            .say(say(&format!("ok{i}")))
            .await
            .expect("a healthy call");
    }
    // ...and retries are allowed again.
    server.state.script("flaky", Script::failing(1));
    client.say(say("flaky")).await.expect("retried again");
    assert_eq!(server.state.attempts("flaky"), 2);
}

#[tokio::test]
async fn a_hedged_call_returns_the_fast_reply_and_the_server_sees_the_other_cancelled() {
    let server = Server::start().await;
    server
        .state
        .script("k", Script::stalling(1, Duration::from_secs(30)));
    let config = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo", "method": "Say"}],
        "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.05s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let mut client = client(&server, config).await;
    let started = Instant::now();
    let reply = client
        .say(say("k"))
        .await
        .expect("the fast copy")
        .into_inner();
    assert_eq!(reply.attempts, 2);
    assert!(started.elapsed() < Duration::from_secs(30));
    // The slow copy's stream was reset: its handler was dropped.
    let state = server.state.clone();
    let mut cancelled = false;
    for _ in 0..500 {
        if state.cancelled.load(std::sync::atomic::Ordering::SeqCst) == 1 {
            cancelled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(cancelled, "the server never saw the slow copy cancelled");
}

#[tokio::test]
async fn each_attempt_sends_its_true_time_left() {
    let server = Server::start().await;
    server.state.script("k", Script::failing(100));
    let config = r#"{"methodConfig": [{"name": [{}], "timeout": "0.5s",
        "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.05s", "maxBackoff": "0.05s",
                        "backoffMultiplier": 1, "retryableStatusCodes": [14]}}]}"#;
    let mut client = client(&server, config).await;
    let mut request = tonic::Request::new(say("k"));
    request.set_timeout(Duration::from_secs(2)); // the method's 0.5 s is earlier
    let _ = client.say(request).await;
    let sent: Vec<Duration> = server
        .state
        .seen("k")
        .iter()
        .map(|s| {
            let text = s
                .timeout
                .as_deref()
                .expect("every attempt carries grpc-timeout");
            steadfast::deadline::DeadlineHeader::GRPC
                .decode(text.as_bytes())
                .expect("a valid grpc-timeout")
        })
        .collect();
    assert!(sent.len() >= 2, "{sent:?}");
    assert!(sent[0] <= Duration::from_millis(500), "{sent:?}");
    assert!(
        sent.windows(2).all(|w| w[1] < w[0]),
        "the time left shrinks: {sent:?}"
    );
}

/// Deadline propagation across two hops: the client gives 1 s; server A
/// (reading `grpc-timeout` into its handler's ambient deadline) spends
/// 100 ms, then calls server B through a `GrpcLayer` client, which sends
/// A's time left; B's handler sees less than A's, stalls, and is dropped
/// when its deadline passes; the client gets `DEADLINE_EXCEEDED`.
#[tokio::test]
async fn the_deadline_shrinks_across_two_hops_and_the_last_hop_is_cut_off() {
    let b = Server::start_with_deadlines().await;
    b.state
        .script("k", Script::stalling(1, Duration::from_secs(60)));
    let a = Server::start_with_deadlines().await;
    let to_b = client(&b, "{}").await;
    a.state.relay(Box::new(move |request| {
        let mut to_b = to_b.clone();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            to_b.say(request).await.map(tonic::Response::into_inner)
        })
    }));
    let mut client = client(&a, "{}").await;
    let mut request = tonic::Request::new(say("k"));
    request.set_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let status = client.say(request).await.expect_err("out of time");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let a_left = a.state.seen("k")[0]
        .ambient
        .expect("A's handler has a deadline");
    let b_left = b.state.seen("k")[0]
        .ambient
        .expect("B's handler has a deadline");
    assert!(a_left <= Duration::from_secs(1), "{a_left:?}");
    assert!(
        b_left + Duration::from_millis(100) <= a_left,
        "A {a_left:?}, B {b_left:?}"
    );
    let state = b.state.clone();
    let mut cut_off = false;
    for _ in 0..500 {
        if state.cancelled.load(std::sync::atomic::Ordering::SeqCst) == 1 {
            cut_off = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(cut_off, "B's handler was never dropped");
}

/// A buffer the test's subscriber writes its events into.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The trace of a call: every event is inside a span naming the method;
/// each failed attempt says its status, the server's pushback and what
/// follows; the wait before the retry is the pushback.
#[tokio::test(flavor = "current_thread")]
async fn the_trace_names_the_method_the_status_the_pushback_and_the_wait() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let server = Server::start().await;
    server
        .state
        .script("k", Script::failing(1).with_pushback("120"));
    let mut client = client(&server, RETRY_UNAVAILABLE).await;
    client.say(say("k")).await.expect("recovered");
    let trace = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    let failed = trace
        .lines()
        .find(|l| l.contains("gRPC attempt failed"))
        .unwrap_or_else(|| panic!("no failed attempt in the trace:\n{trace}"));
    for needle in [
        "grpc call",
        "method=/steadfast.test.Echo/Say",
        "status=UNAVAILABLE",
        "pushback=\"120\"",
        "server's pushback",
    ] {
        assert!(
            failed.contains(needle),
            "{needle:?} missing from {failed:?}"
        );
    }
    let retrying = trace
        .lines()
        .find(|l| l.contains("retrying"))
        .unwrap_or_else(|| panic!("no retry in the trace:\n{trace}"));
    assert!(
        retrying.contains("delay_ms=120") && retrying.contains("hinted=true"),
        "{retrying}"
    );
    assert!(
        retrying.contains("method=/steadfast.test.Echo/Say"),
        "{retrying}"
    );
}

/// A call whose response head has arrived is committed: the server sends
/// its head and one reply, then fails with a retryable code; the failure
/// reaches the caller and the call is not retried.
#[tokio::test]
async fn a_committed_call_is_not_retried() {
    let server = Server::start().await;
    server.state.script("k", Script::failing(5));
    let config = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo"}],
        "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.05s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let mut client = client(&server, config).await;
    let mut stream = client
        .stream(say("k"))
        .await
        .expect("the head arrived")
        .into_inner();
    let first = stream
        .message()
        .await
        .expect("the first reply")
        .expect("a reply");
    assert_eq!(first.attempts, 1);
    let status = stream
        .message()
        .await
        .expect_err("the failure after the head");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(
        server.state.attempts("k"),
        1,
        "a committed call was retried"
    );
}

/// A6: a wait (backoff or pushback) that would end past the deadline ends
/// the call at once, and gRPC reports that as DEADLINE_EXCEEDED, not as the
/// last attempt's status.
#[tokio::test]
async fn a_retry_past_the_deadline_ends_at_once_with_deadline_exceeded() {
    let server = Server::start().await;
    let config = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo"}],
        "retryPolicy": {"maxAttempts": 5, "initialBackoff": "1s", "maxBackoff": "1s",
                        "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let mut client = client(&server, config).await;
    for (key, script) in [
        // The backoff (0.8 to 1.2 s) would end past the 300 ms left.
        ("backoff", Script::failing(5)),
        // The server's pushback (5 s) would too.
        ("pushback", Script::failing(5).with_pushback("5000")),
    ] {
        server.state.script(key, script);
        let mut request = tonic::Request::new(say(key));
        request.set_timeout(Duration::from_millis(300));
        let status = client.say(request).await.expect_err("out of time");
        assert_eq!(
            status.code(),
            tonic::Code::DeadlineExceeded,
            "{key}: {status:?}"
        );
        assert!(
            status.message().contains("the last ended UNAVAILABLE"),
            "{key}: {}",
            status.message()
        );
        assert_eq!(server.state.attempts(key), 1, "{key}: no retry was sent");
    }
}

/// A6 hedging: a pushback that forbids retries stops new copies but lets
/// the copies already sent run on; one of them can still win.
#[tokio::test]
async fn a_forbidding_pushback_stops_new_hedges_but_not_those_in_flight() {
    let server = Server::start().await;
    // Copy 1 answers OK after 400 ms; copy 2 (sent at 50 ms) fails at once
    // with a pushback of -1; copy 3 would go at once after a non-fatal
    // failure, and must not.
    server.state.script(
        "k",
        Script::failing_attempts(&[2])
            .with_pushback("-1")
            .with_stall(1, Duration::from_millis(400)),
    );
    let config = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo", "method": "Say"}],
        "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.05s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let mut client = client(&server, config).await;
    let reply = client
        .say(say("k"))
        .await
        .expect("copy 1 still wins")
        .into_inner();
    assert_eq!(reply.attempts, 1);
    assert_eq!(server.state.attempts("k"), 2, "copy 3 was never sent");
}

/// Collects the A96 metric events (target `steadfast_grpc::metrics`).
#[derive(Clone, Default)]
struct MetricEvents(std::sync::Arc<std::sync::Mutex<Vec<Fields>>>);

/// One event's fields, by name, as text.
type Fields = Vec<(String, String)>;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for MetricEvents {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Visitor(Fields);
        impl tracing::field::Visit for Visitor {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push((field.name().to_owned(), format!("{value:?}")));
            }
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                self.0.push((field.name().to_owned(), value.to_owned()));
            }
        }
        if event.metadata().target() == "steadfast_grpc::metrics" {
            let mut fields = Visitor(Vec::new());
            event.record(&mut fields);
            self.0.lock().expect("lock").push(fields.0);
        }
    }
}

impl MetricEvents {
    fn take(&self) -> Vec<Fields> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }
}

fn field<'a>(event: &'a [(String, String)], name: &str) -> Option<&'a str> {
    event
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// gRFC A96: a call that retried records its retries and their total delay,
/// a hedged call its hedges, labelled by method and target; a call that
/// needed neither records nothing.
#[tokio::test]
async fn the_a96_metrics_are_recorded_per_call() {
    use tracing_subscriber::layer::SubscriberExt;
    let events = MetricEvents::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(events.clone()));
    let server = Server::start().await;
    let target = server.addr.to_string();
    let mut retrying = client(&server, RETRY_UNAVAILABLE).await;

    retrying.say(say("first")).await.expect("at once");
    assert!(events.take().is_empty(), "zero is not recorded");

    server.state.script("twice", Script::failing(2));
    retrying.say(say("twice")).await.expect("recovered");
    let recorded = events.take();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let event = &recorded[0];
    assert_eq!(field(event, "grpc.client.call.retries"), Some("2"));
    assert_eq!(field(event, "grpc.method"), Some("steadfast.test.Echo/Say"));
    assert_eq!(field(event, "grpc.target"), Some(target.as_str()));
    // Two waits of the A6 backoff: 10 ms then 20 ms, each ±20 %.
    let delay: f64 = field(event, "grpc.client.call.retry_delay")
        .expect("a retry delay")
        .parse()
        .expect("seconds");
    assert!((0.024..=0.036).contains(&delay), "{delay}");

    let hedging = r#"{"methodConfig": [{"name": [{"service": "steadfast.test.Echo", "method": "Say"}],
        "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.05s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let mut hedged = client(&server, hedging).await;
    server
        .state
        .script("slow", Script::stalling(1, Duration::from_secs(30)));
    hedged.say(say("slow")).await.expect("the hedge");
    let recorded = events.take();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(field(&recorded[0], "grpc.client.call.hedges"), Some("1"));
    assert_eq!(field(&recorded[0], "grpc.client.call.retries"), None);
}

/// With the `metrics` feature, the same A96 histograms reach the `metrics`
/// facade, with their units and labels.
#[cfg(feature = "metrics")]
#[tokio::test]
async fn the_a96_histograms_reach_the_metrics_facade() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");
    let server = Server::start().await;
    let target = server.addr.to_string();
    let mut retrying = client(&server, RETRY_UNAVAILABLE).await;
    server.state.script("twice", Script::failing(2));
    retrying.say(say("twice")).await.expect("recovered");

    let snapshot = snapshotter.snapshot().into_vec();
    // Other tests of this binary run at the same time, against servers of
    // their own: find this test's histograms by their target.
    let find = |name: &str| {
        snapshot
            .iter()
            .find(|(key, ..)| {
                key.key().name() == name
                    && key
                        .key()
                        .labels()
                        .any(|l| l.key() == "grpc.target" && l.value() == target)
            })
            .unwrap_or_else(|| panic!("{name} recorded: {snapshot:?}"))
    };
    let (key, unit, _, value) = find("grpc.client.call.retries");
    let labels: Vec<(&str, &str)> = key.key().labels().map(|l| (l.key(), l.value())).collect();
    assert_eq!(
        labels,
        [
            ("grpc.method", "steadfast.test.Echo/Say"),
            ("grpc.target", target.as_str())
        ]
    );
    assert_eq!(*unit, Some(metrics::Unit::Count));
    let DebugValue::Histogram(values) = value else {
        panic!("a histogram: {value:?}")
    };
    assert_eq!(
        values.iter().map(|v| v.into_inner()).collect::<Vec<_>>(),
        [2.0]
    );
    let (_, unit, _, value) = find("grpc.client.call.retry_delay");
    assert_eq!(*unit, Some(metrics::Unit::Seconds));
    let DebugValue::Histogram(values) = value else {
        panic!("a histogram: {value:?}")
    };
    assert!(
        (0.024..=0.036).contains(&values[0].into_inner()),
        "{values:?}"
    );

    // The concurrency limits' gauge and refusal counter reach the same
    // recorder (steadfast's `metrics` feature, turned on by this crate's).
    let limit = steadfast::limit::ConcurrencyLimit::fixed(1)
        .name("metrics-test-limit")
        .build()
        .expect("a valid limit");
    let held = limit.try_acquire().expect("a free slot");
    assert!(limit.try_acquire().is_err());
    drop(held);
    let snapshot = snapshotter.snapshot().into_vec();
    let of = |name: &str| {
        snapshot
            .iter()
            .find(|(key, ..)| {
                key.key().name() == name
                    && key
                        .key()
                        .labels()
                        .any(|l| l.key() == "limit" && l.value() == "metrics-test-limit")
            })
            .map(|(_, _, _, value)| value)
            .unwrap_or_else(|| panic!("{name} recorded: {snapshot:?}"))
    };
    assert!(matches!(
        of("steadfast.concurrency.refused"),
        DebugValue::Counter(1)
    ));
    assert!(
        matches!(of("steadfast.concurrency.limit"), DebugValue::Gauge(g) if (g.into_inner() - 1.0).abs() < f64::EPSILON)
    );
}
