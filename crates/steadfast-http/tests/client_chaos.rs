//! #26: a client's chaos (A33's client-side fault injection) against a real
//! axum server on 127.0.0.1: substituted 503s are retried after their
//! `Retry-After`, never sent, and a chaos switched off sends everything;
//! the server's connections all close once the client is gone.
#![allow(clippy::unwrap_used)]

mod support {
    pub mod server;
}

use std::time::Duration;

use steadfast::Backoff;
use steadfast::chaos::Chaos;
use steadfast_http::{Client, chaos_response};
use support::server::OkServer;

fn client(chaos: Chaos<reqwest::Response, ()>) -> Client {
    Client::builder()
        .attempts(30)
        .backoff(Backoff::constant(Duration::from_millis(1)).build().unwrap())
        .chaos(chaos)
        .build()
        .unwrap()
}

#[tokio::test]
async fn substituted_503s_are_retried_and_never_sent() {
    let server = OkServer::start(|router| router).await;
    let chaos = Chaos::builder()
        .enabled(true)
        .seed(5)
        .outcome(0.4, || chaos_response(503, Some(Duration::ZERO)))
        .build()
        .unwrap();
    let client = client(chaos.clone());
    let mut attempts = 0;
    for _ in 0..50 {
        let r = client.get(&server.url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        attempts += u64::from(r.ending().attempts);
    }
    let stats = chaos.stats();
    assert_eq!(server.served(), 50, "a substituted attempt is never sent");
    assert_eq!(
        attempts,
        50 + stats.outcomes,
        "each substituted 503 was retried once"
    );
    assert!(stats.outcomes >= 15, "{stats:?}");
    drop(client);
    assert!(server.all_closed().await, "a connection was left open");
}

#[tokio::test]
async fn switched_off_every_attempt_is_sent() {
    let server = OkServer::start(|router| router).await;
    let chaos = Chaos::builder()
        .seed(5)
        .outcome(1.0, || chaos_response(503, None))
        .build()
        .unwrap();
    let client = client(chaos.clone());
    for _ in 0..20 {
        assert_eq!(client.get(&server.url).send().await.unwrap().status(), 200);
    }
    assert_eq!(server.served(), 20);
    assert_eq!(chaos.stats().drawn, 0);
    drop(client);
    assert!(server.all_closed().await, "a connection was left open");
}

#[test]
fn an_error_fault_is_refused_when_the_client_is_built() {
    let chaos = Chaos::builder().error(0.1, || ()).build().unwrap();
    let err = Client::builder().chaos(chaos).build().unwrap_err();
    assert!(err.to_string().contains("chaos"), "{err}");
}
