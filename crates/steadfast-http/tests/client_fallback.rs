//! #26: the client's fallback against real axum servers on 127.0.0.1: a
//! static response after the attempts, one computed from the failure, a
//! backup request to a second server, a decline, a refused connection, a
//! POST sent once, the middleware; never for a success or a dropped call.
#![allow(clippy::unwrap_used)]

mod support {
    pub mod server;
}

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steadfast::fallback::{backup, from_fn};
use steadfast::{Backoff, RetryError, StopReason};
use steadfast_http::fallback::{Failure, static_response};
use steadfast_http::{Client, ClientBuilder, NotRetried};
use support::server::{Server, eventually};

fn builder(attempts: u32) -> ClientBuilder {
    Client::builder()
        .attempts(attempts)
        .backoff(Backoff::constant(Duration::from_millis(1)).build().unwrap())
}

fn cached() -> steadfast_http::fallback::StaticResponse {
    static_response(
        http::Response::builder()
            .header("x-from", "cache")
            .body("the cached page")
            .unwrap(),
    )
}

/// A URL whose port refuses connections: a socket bound to it but not
/// listening, kept (with the socket returned) so that no other test can
/// take the port meanwhile.
fn refused_url() -> (String, tokio::net::TcpSocket) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = socket.local_addr().unwrap().port();
    (format!("http://127.0.0.1:{port}/"), socket)
}

/// A fallback answering `body`, counting its calls.
fn counted(
    body: &'static str,
) -> (
    impl Fn(Failure) -> steadfast_http::fallback::Answer,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = Arc::clone(&calls);
    let f = move |_: Failure| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(reqwest::Response::from(http::Response::new(body)))
    };
    (f, calls)
}

#[tokio::test]
async fn an_always_503_server_is_answered_by_the_static_response_after_the_attempts() {
    let server = Server::start().await;
    let client = builder(3).fallback(cached()).build().unwrap();
    let response = client.get(server.url("/fail/99/503")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-from"], "cache");
    let ending = response.ending();
    assert_eq!(
        (ending.attempts, ending.stop, ending.fell_back),
        (3, Some(StopReason::Exhausted), true)
    );
    assert!(
        response.deadline().is_none(),
        "the answer's body is not bound by the failed call's deadline"
    );
    assert_eq!(response.text().await.unwrap(), "the cached page");
    assert_eq!(server.seen.requests("/fail/99/503"), 3);
    // The same response again, for the next failed call.
    let again = client.get(server.url("/fail/99/503")).send().await.unwrap();
    assert_eq!(again.text().await.unwrap(), "the cached page");
    assert_eq!(server.seen.requests("/fail/99/503"), 6);
}

#[tokio::test]
async fn a_fallback_computed_from_the_failure_sees_the_reason_and_the_last_503() {
    let server = Server::start().await;
    let seen = Arc::new(Mutex::new(None));
    let s = Arc::clone(&seen);
    let client = builder(4)
        .fallback(from_fn(move |f: Failure| {
            let last = f.response().map(|r| r.status().as_u16());
            *s.lock().unwrap() = Some((f.reason(), f.attempts(), last, f.error().is_some()));
            Ok(reqwest::Response::from(
                http::Response::builder()
                    .status(203)
                    .body(format!(
                        "stale: {} after {}",
                        last.unwrap_or(0),
                        f.attempts()
                    ))
                    .unwrap(),
            ))
        }))
        .build()
        .unwrap();
    let response = client.get(server.url("/fail/99/503")).send().await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        Some((StopReason::Exhausted, 4, Some(503), false))
    );
    assert_eq!(response.status(), 203);
    assert_eq!(response.text().await.unwrap(), "stale: 503 after 4");
}

#[tokio::test]
async fn a_backup_request_goes_to_a_second_server() {
    let primary = Server::start().await;
    let mirror = Server::start().await;
    let mirror_url = mirror.url("/fail/0/200");
    let mirror_client = Client::new();
    let client = builder(2)
        .fallback(backup(move |f: Failure| {
            let (client, url) = (mirror_client.clone(), mirror_url.clone());
            async move {
                assert_eq!(f.reason(), StopReason::Exhausted);
                Ok(client.get(url).send().await?.into_inner())
            }
        }))
        .build()
        .unwrap();
    let response = client
        .get(primary.url("/fail/99/503"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.ending().fell_back);
    assert_eq!(response.ending().attempts, 2, "the primary call's attempts");
    assert_eq!(response.text().await.unwrap(), "ok");
    assert_eq!(primary.seen.requests("/fail/99/503"), 2);
    assert_eq!(mirror.seen.requests("/fail/0/200"), 1);
}

#[tokio::test]
async fn a_backup_that_fails_too_returns_its_own_error() {
    let primary = Server::start().await;
    let (down, _reserved) = refused_url();
    let mirror_client = builder(1).build().unwrap();
    let client = builder(2)
        .fallback(backup(move |_: Failure| {
            let (client, url) = (mirror_client.clone(), down.clone());
            async move { Ok(client.get(url).send().await?.into_inner()) }
        }))
        .build()
        .unwrap();
    let err = client
        .get(primary.url("/fail/99/503"))
        .send()
        .await
        .unwrap_err();
    assert!(err.transport_error().is_some(), "the mirror's error: {err}");
    assert_eq!(err.attempts(), 1, "the mirror's one attempt");
    assert!(err.status().is_none());
    assert_eq!(primary.seen.requests("/fail/99/503"), 2);
}

#[tokio::test]
async fn a_fallback_that_declines_hands_the_original_through() {
    let server = Server::start().await;
    let asked = Arc::new(AtomicU32::new(0));
    let a = Arc::clone(&asked);
    let client = builder(3)
        .fallback(from_fn(move |f: Failure| {
            a.fetch_add(1, Ordering::SeqCst);
            f.into_result()
        }))
        .build()
        .unwrap();
    // A response given up on: the same error, holding the same response.
    let err = client
        .get(server.url("/fail/99/503"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!((err.reason(), err.attempts()), (StopReason::Exhausted, 3));
    assert_eq!(err.status(), Some(http::StatusCode::SERVICE_UNAVAILABLE));
    assert!(!err.ending().fell_back);
    assert!(err.to_string().contains("last status 503"), "{err}");
    assert_eq!(
        err.into_response().unwrap().text().await.unwrap(),
        "failure"
    );
    // No response: the same transport error.
    let (url, _reserved) = refused_url();
    let err = client.get(url).send().await.unwrap_err();
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    assert_eq!((err.reason(), err.attempts()), (StopReason::Exhausted, 3));
    assert!(
        err.transport_error()
            .is_some_and(reqwest::Error::is_connect)
    );
}

#[tokio::test]
async fn a_refused_connection_falls_back_with_the_transport_error() {
    let seen = Arc::new(Mutex::new(None));
    let s = Arc::clone(&seen);
    let client = builder(2)
        .fallback(from_fn(move |f: Failure| {
            let error = f.error().and_then(RetryError::last_error);
            *s.lock().unwrap() = Some((
                f.reason(),
                f.attempts(),
                f.response().is_none(),
                error
                    .and_then(|e| e.transport_error())
                    .is_some_and(reqwest::Error::is_connect),
            ));
            Ok(reqwest::Response::from(http::Response::new("offline copy")))
        }))
        .build()
        .unwrap();
    let (url, _reserved) = refused_url();
    let response = client.get(url).send().await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        Some((StopReason::Exhausted, 2, true, true))
    );
    assert_eq!(
        (response.ending().attempts, response.ending().fell_back),
        (2, true)
    );
    assert_eq!(response.text().await.unwrap(), "offline copy");
}

#[tokio::test]
async fn a_success_never_calls_the_fallback() {
    let server = Server::start().await;
    let (fallback, calls) = counted("never");
    let client = builder(3).fallback(from_fn(fallback)).build().unwrap();
    for _ in 0..20 {
        let response = client.get(server.url("/fail/0/200")).send().await.unwrap();
        let ending = response.ending();
        assert_eq!(
            (ending.attempts, ending.stop, ending.fell_back),
            (1, None, false)
        );
        assert_eq!(response.text().await.unwrap(), "ok");
    }
    // Recovered after retries is a success too.
    let response = client.get(server.url("/fail/2/503")).send().await.unwrap();
    assert_eq!(
        (response.ending().attempts, response.ending().fell_back),
        (3, false)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_post_that_is_not_retried_falls_back_once_after_its_one_attempt() {
    let server = Server::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let client = builder(5)
        .fallback(from_fn(move |f: Failure| {
            s.lock()
                .unwrap()
                .push((f.attempts(), f.response().map(|r| r.status().as_u16())));
            Ok(reqwest::Response::from(http::Response::new(
                "queued for later",
            )))
        }))
        .build()
        .unwrap();
    let response = client
        .post(server.url("/fail/99/503"))
        .body("pay 42")
        .send()
        .await
        .unwrap();
    assert_eq!(response.text().await.unwrap(), "queued for later");
    assert_eq!(*seen.lock().unwrap(), [(1, Some(503))]);
    assert_eq!(
        server.seen.requests("/fail/99/503"),
        1,
        "nothing sent twice"
    );
    // Declined, the error still says why it was not retried.
    let client = builder(5)
        .fallback(from_fn(Failure::into_result))
        .build()
        .unwrap();
    let err = client
        .post(server.url("/fail/99/503"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.not_retried(), Some(NotRetried::NotIdempotent));
    assert_eq!(server.seen.requests("/fail/99/503"), 2);
}

#[tokio::test]
async fn dropping_the_call_never_calls_the_fallback() {
    let server = Server::start().await;
    let (fallback, calls) = counted("never");
    let client = builder(3).fallback(from_fn(fallback)).build().unwrap();
    let url = server.url("/hang/0/_");
    let call = tokio::spawn(async move { client.get(url).send().await });
    assert!(eventually(|| server.seen.requests("/hang/0/_") == 1).await);
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    assert!(
        eventually(|| server.seen.cancelled.load(Ordering::SeqCst) == 1).await,
        "the request was dropped with the call"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_middleware_falls_back_too() {
    use steadfast::call::Ending;
    use steadfast_http::middleware::GaveUp;

    let server = Server::start().await;
    let middleware = builder(2).fallback(cached()).build_middleware().unwrap();
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(middleware)
        .build();
    let response = client.get(server.url("/fail/99/503")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let ending = *response.extensions().get::<Ending>().unwrap();
    assert_eq!((ending.attempts, ending.fell_back), (2, true));
    assert!(response.extensions().get::<GaveUp>().is_none());
    assert_eq!(response.text().await.unwrap(), "the cached page");
    assert_eq!(server.seen.requests("/fail/99/503"), 2);

    // Declined: the 503 the call gave up on, as without a fallback.
    let declining = builder(2)
        .fallback(from_fn(Failure::into_result))
        .build_middleware()
        .unwrap();
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(declining)
        .build();
    let response = client.get(server.url("/fail/99/503")).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let gave_up = response.extensions().get::<GaveUp>().unwrap();
    assert_eq!(gave_up.reason, StopReason::Exhausted);
    assert!(!response.extensions().get::<Ending>().unwrap().fell_back);
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Self;

    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn each_fallback_records_an_event_with_the_clients_name() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(capture.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let server = Server::start().await;
    let client = builder(2)
        .name("catalog")
        .fallback(cached())
        .build()
        .unwrap();
    client.get(server.url("/fail/99/503")).send().await.unwrap();
    client.get(server.url("/fail/0/200")).send().await.unwrap();
    let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
    let events: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("steadfast::fallback"))
        .collect();
    assert_eq!(events.len(), 1, "{text}");
    for field in [
        "call=\"catalog\"",
        "reason=\"attempts exhausted\"",
        "attempts=2",
    ] {
        assert!(events[0].contains(field), "{field} in {}", events[0]);
    }
}
