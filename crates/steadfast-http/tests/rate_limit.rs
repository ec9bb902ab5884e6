//! #25: a server's rate limit answers 429 with the limit's exact
//! `Retry-After`, for every connection together; a steadfast client on the
//! other side waits it out and is admitted. A real axum server on 127.0.0.1.

mod support {
    pub mod server;
}

use std::time::Duration;

use steadfast::rate::{Quota, RateLimit};
use steadfast_http::server::RateLimitLayer;
use support::server::OkServer;

async fn serve(limit: RateLimit) -> OkServer {
    OkServer::start(|router| router.layer(RateLimitLayer::new(limit))).await
}

#[tokio::test]
async fn refusals_are_429_with_the_limits_wait_for_every_connection() {
    let limit = RateLimit::builder()
        .name("api")
        .quota(Quota::per_minute(2).expect("valid"))
        .build()
        .expect("valid");
    let server = serve(limit).await;
    let url = &server.url;
    // Separate clients: separate connections, one limit.
    let mut statuses = Vec::new();
    let mut waits = Vec::new();
    for _ in 0..5 {
        let plain = reqwest::Client::new();
        let response = plain.get(url).send().await.expect("answered");
        statuses.push(response.status().as_u16());
        waits.push(
            response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        );
    }
    assert_eq!(statuses, [200, 200, 429, 429, 429]);
    assert_eq!(server.served(), 2);
    // Two a minute with a burst of two: the next turn is 30 s away, told
    // padded by the clock's tick and rounded up: 30 or 31 s.
    for wait in &waits[2..] {
        let secs: u64 = wait
            .as_deref()
            .expect("a Retry-After")
            .parse()
            .expect("whole seconds");
        assert!((29..=31).contains(&secs), "{wait:?}");
    }
}

#[tokio::test]
async fn a_steadfast_client_waits_the_retry_after_and_is_admitted() {
    let limit = RateLimit::builder()
        .name("api")
        .quota(Quota::per_second(1).expect("valid"))
        .build()
        .expect("valid");
    let server = serve(limit).await;
    let url = &server.url;
    let client = steadfast_http::Client::builder()
        .attempts(3)
        .deadline(Duration::from_secs(10))
        .build()
        .expect("valid");
    let first = client.get(url).send().await.expect("admitted");
    assert_eq!(first.ending().attempts, 1);
    // Refused with Retry-After: 1, waited, admitted on the second attempt.
    let second = client
        .get(url)
        .send()
        .await
        .expect("admitted after the wait");
    assert_eq!(
        (second.status().as_u16(), second.ending().attempts),
        (200, 2)
    );
    assert!(
        second.ending().waited >= Duration::from_millis(999),
        "{:?}",
        second.ending()
    );
    assert_eq!(server.served(), 2);
}

#[tokio::test]
async fn a_limit_per_api_key_refuses_one_key_and_serves_the_others() {
    use axum::body::Body;
    use axum::http::Request;
    use steadfast::rate::KeyedRateLimit;

    let per_key = KeyedRateLimit::builder()
        .name("per api key")
        .quota(Quota::per_minute(2).expect("valid"))
        .build()
        .expect("valid");
    let api_key = |r: &Request<Body>| r.headers().get("x-api-key").map(|v| v.as_bytes().to_vec());
    let keyed = per_key.clone();
    let server =
        OkServer::start(|router| router.layer(RateLimitLayer::per_key(keyed, api_key))).await;
    let url = &server.url;

    let client = reqwest::Client::new();
    let status = |key: &'static str| {
        let request = client.get(url).header("x-api-key", key);
        async move { request.send().await.expect("answered").status().as_u16() }
    };
    // Each key its own 2 a minute, on every connection.
    assert_eq!(
        [status("a").await, status("a").await, status("a").await],
        [200, 200, 429]
    );
    assert_eq!([status("b").await, status("b").await], [200, 200]);
    let refused = client
        .get(url)
        .header("x-api-key", "b")
        .send()
        .await
        .expect("answered");
    assert_eq!(refused.status().as_u16(), 429);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("whole seconds");
    assert!((1..=31).contains(&wait), "{wait}");
    // Requests without a key share one quota of their own.
    let none = || async {
        client
            .get(url)
            .send()
            .await
            .expect("answered")
            .status()
            .as_u16()
    };
    assert_eq!([none().await, none().await, none().await], [200, 200, 429]);
    assert_eq!(per_key.keys(), 3);
}
