//! The `reqwest-middleware` middleware against a real axum server on
//! 127.0.0.1: the same policy as the client, attempts sent through the rest
//! of the stack.

mod support {
    pub mod server;
}

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use http::Extensions;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};
use steadfast::call::Ending as Report;
use steadfast::{Backoff, Jitter, StopReason};
use steadfast_http::Client;
use steadfast_http::middleware::{GaveUp, Retryable};
use support::server::Server;

/// Counts the requests that reach it (it sits after the retry middleware).
struct Counter(Arc<AtomicU32>);

#[async_trait::async_trait]
impl Middleware for Counter {
    async fn handle(
        &self,
        req: reqwest::Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.0.fetch_add(1, Ordering::SeqCst);
        next.run(req, extensions).await
    }
}

fn stack(attempts: u32, counter: &Arc<AtomicU32>) -> ClientWithMiddleware {
    let retry = Client::builder()
        .attempts(attempts)
        .backoff(
            Backoff::exponential()
                .initial(Duration::from_millis(5))
                .jitter(Jitter::None)
                .build()
                .expect("valid backoff"),
        )
        .deadline(Duration::from_secs(10))
        .build_middleware()
        .expect("valid middleware");
    let inner = reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .build()
        .expect("client");
    ClientBuilder::new(inner)
        .with(retry)
        .with(Counter(Arc::clone(counter)))
        .build()
}

#[tokio::test]
async fn recovers_through_the_rest_of_the_stack_and_reports_attempts() {
    let server = Server::start().await;
    let counter = Arc::new(AtomicU32::new(0));
    let response = stack(4, &counter)
        .get(server.url("/fail/2/503"))
        .send()
        .await
        .expect("recovers");
    assert_eq!(response.status(), 200);
    let report = *response.extensions().get::<Report>().expect("a report");
    assert_eq!(report.attempts, 3);
    assert_eq!(
        counter.load(Ordering::SeqCst),
        3,
        "each attempt ran the inner middleware"
    );
    assert_eq!(server.seen.requests("/fail/2/503"), 3);
    // Each attempt carried the time left of the 10 s deadline.
    assert!(server.seen.deadlines().iter().all(Option::is_some));
}

#[tokio::test]
async fn post_is_not_retried_and_the_last_response_says_why() {
    let server = Server::start().await;
    let counter = Arc::new(AtomicU32::new(0));
    let response = stack(4, &counter)
        .post(server.url("/fail/3/503"))
        .body("pay 42")
        .send()
        .await
        .expect("the 503 response");
    assert_eq!(response.status(), 503);
    assert_eq!(server.seen.requests("/fail/3/503"), 1);
    let gave_up = *response.extensions().get::<GaveUp>().expect("gave up");
    assert_eq!(gave_up.reason, StopReason::Exhausted);
    assert_eq!(
        response.extensions().get::<Report>().map(|r| r.attempts),
        Some(1)
    );
}

#[tokio::test]
async fn a_request_extension_opts_a_post_in() {
    let server = Server::start().await;
    let counter = Arc::new(AtomicU32::new(0));
    let response = stack(4, &counter)
        .post(server.url("/fail/1/503"))
        .with_extension(Retryable(true))
        .body("pay 42")
        .send()
        .await
        .expect("retried");
    assert_eq!(response.status(), 200);
    assert_eq!(server.seen.requests("/fail/1/503"), 2);
}

#[tokio::test]
async fn retry_after_is_honoured_which_reqwest_retry_cannot() {
    let server = Server::start().await;
    let counter = Arc::new(AtomicU32::new(0));
    let response = stack(3, &counter)
        .get(server.url("/retry-after-secs/1/1"))
        .send()
        .await
        .expect("recovers");
    let report = *response.extensions().get::<Report>().expect("a report");
    assert_eq!(report.attempts, 2);
    assert!(report.waited >= Duration::from_millis(990), "{report:?}");
}

#[tokio::test]
async fn a_transport_failure_is_the_engines_error() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("address")
    };
    let counter = Arc::new(AtomicU32::new(0));
    let err = stack(2, &counter)
        .get(format!("http://{addr}/"))
        .send()
        .await
        .expect_err("nothing listens");
    let reqwest_middleware::Error::Middleware(e) = err else {
        panic!("expected the engine's error, got {err:?}");
    };
    let e = e
        .downcast::<steadfast_http::Error>()
        .expect("a steadfast_http::Error");
    assert_eq!(e.reason(), StopReason::Exhausted);
    assert_eq!(e.attempts(), 2);
    assert!(e.transport_error().is_some_and(reqwest::Error::is_connect));
}

#[tokio::test]
async fn hedging_through_the_stack_returns_the_fast_copy() {
    let server = Server::start().await;
    let hedge = Client::builder()
        .hedge(2, Duration::from_millis(50))
        .build_middleware()
        .expect("valid middleware");
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(hedge)
        .build();
    let response = client
        .get(server.url("/hedge/0/x"))
        .send()
        .await
        .expect("the fast copy");
    let report = *response.extensions().get::<Report>().expect("a report");
    assert_eq!((report.attempts, report.hedges()), (2, 1));
    assert_eq!(response.text().await.expect("body"), "fast");
    assert!(
        support::server::eventually(|| server.seen.cancelled.load(Ordering::SeqCst) == 1).await,
        "the slow copy was aborted"
    );
}
