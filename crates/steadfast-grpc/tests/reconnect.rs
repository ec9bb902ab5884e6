//! The gRPC connection backoff around hyper's connector, under a real tonic
//! channel whose server (`steadfast-grpc-testkit`'s echo service) comes up
//! late. `connect.rs` checks the schedule itself on tokio's paused clock.
//!
//! Left out of the published package, as every test that needs the
//! unpublished testkit is (`exclude` in `Cargo.toml`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::connect::HttpConnector;
use steadfast_grpc::BackoffConnector;
use steadfast_grpc_testkit::echo::SayRequest;
use steadfast_grpc_testkit::echo::echo_client::EchoClient;
use tower::Service;

/// A real tonic channel over hyper's connector: the server is down, so the
/// first call fails, and calls inside the backoff window fail at once
/// without dialling; once the server is up and the window has passed, a
/// call connects.
#[tokio::test]
async fn a_tonic_channel_reconnects_on_the_backoff_schedule() {
    /// hyper's connector, counting its dials.
    #[derive(Clone)]
    struct Counting(HttpConnector, Arc<AtomicU32>);
    impl Service<Uri> for Counting {
        type Response = <HttpConnector as Service<Uri>>::Response;
        type Error = <HttpConnector as Service<Uri>>::Error;
        type Future = <HttpConnector as Service<Uri>>::Future;
        fn poll_ready(
            &mut self,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            self.0.poll_ready(cx)
        }
        fn call(&mut self, uri: Uri) -> Self::Future {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.call(uri)
        }
    }

    // A port nothing listens on yet.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let dials = Arc::new(AtomicU32::new(0));
    let connector = BackoffConnector::new(Counting(HttpConnector::new(), dials.clone()));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .expect("valid endpoint")
        .connect_with_connector_lazy(connector);
    let mut client = EchoClient::new(channel);
    let say = || SayRequest {
        text: "hi".into(),
        key: "k".into(),
    };
    let started = std::time::Instant::now();
    let first = client.say(say()).await.expect_err("nothing listens");
    assert_eq!(first.code(), tonic::Code::Unavailable, "{first:?}");
    let dialled = dials.load(Ordering::SeqCst);
    assert!(dialled >= 1);
    // Inside the 1 s window: fails at once, no dial.
    let second = client.say(say()).await.expect_err("in backoff");
    assert_eq!(second.code(), tonic::Code::Unavailable, "{second:?}");
    if started.elapsed() < Duration::from_millis(900) {
        assert_eq!(
            dials.load(Ordering::SeqCst),
            dialled,
            "a call inside the window dialled"
        );
    }
    // The server comes up on that port; after the window a call connects.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("bind the port again");
    let state = Arc::new(steadfast_grpc_testkit::State::default());
    let service = steadfast_grpc_testkit::Service {
        state: state.clone(),
    };
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(steadfast_grpc_testkit::echo::echo_server::EchoServer::new(
                service,
            ))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await;
    });
    let mut reply = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Ok(r) = client.say(say()).await {
            reply = Some(r.into_inner());
            break;
        }
    }
    let reply = reply.expect("connected once the window passed");
    assert_eq!(reply.text, "hi");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "reconnected inside the first window"
    );
}
