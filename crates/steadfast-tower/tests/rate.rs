//! The rate limit layer: one quota across every per-connection copy of a
//! stack (the axum#2634 trap, reproduced with tower's own `RateLimit`), in
//! process on paused time and on a real axum server over 127.0.0.1.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use steadfast::clock::TokioClock;
use steadfast::rate::{Quota, RateLimit};
use steadfast_tower::{RateLimitError, RateLimitLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{Layer, Service, ServiceExt, service_fn};

fn five_a_minute() -> RateLimit {
    RateLimit::builder()
        .name("quota")
        .quota(Quota::per_minute(5).unwrap())
        .build_with_clock(TokioClock)
        .unwrap()
}

/// A service that counts the calls it gets.
fn counting(
    seen: &Arc<AtomicU32>,
) -> impl tower::Service<
    u32,
    Response = u32,
    Error = std::io::Error,
    Future = std::future::Ready<Result<u32, std::io::Error>>,
> + Clone
+ Send
+ 'static {
    let seen = Arc::clone(seen);
    service_fn(move |n: u32| {
        seen.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok::<_, std::io::Error>(n))
    })
}

/// 200 connections, each with its stack made by the layer, 5 calls each:
/// tower's `RateLimit` (a count per service) lets 5 through per
/// connection; steadfast's lets 5 through in all.
#[tokio::test(start_paused = true)]
async fn one_quota_holds_across_every_per_connection_stack() {
    let towers = Arc::new(AtomicU32::new(0));
    let tower_layer = tower::limit::RateLimitLayer::new(5, Duration::from_secs(60));
    for _ in 0..200 {
        let mut svc = tower_layer.layer(counting(&towers));
        for i in 0..5 {
            let _ = svc.ready().await.unwrap().call(i).await;
        }
    }
    assert_eq!(
        towers.load(Ordering::SeqCst),
        1000,
        "the trap: 5 per connection"
    );

    let ours = Arc::new(AtomicU32::new(0));
    let limit = five_a_minute();
    let layer = RateLimitLayer::new(limit.clone());
    let mut refused = 0;
    for _ in 0..200 {
        let svc = layer.layer(counting(&ours));
        for i in 0..5 {
            match svc.clone().oneshot(i).await {
                Ok(_) => {}
                Err(RateLimitError::Refused(r)) => {
                    assert_eq!(r.by, "quota");
                    assert!(r.retry_after.is_some_and(|d| d <= Duration::from_secs(12)));
                    refused += 1;
                }
                Err(RateLimitError::Inner(e)) => panic!("{e}"),
            }
        }
    }
    assert_eq!((ours.load(Ordering::SeqCst), refused), (5, 995));
}

#[tokio::test(start_paused = true)]
async fn waiting_mode_admits_each_caller_at_its_turn_and_refuses_past_the_bound() {
    let limit = RateLimit::builder()
        .quota(Quota::per_second(10).unwrap().with_burst(1).unwrap())
        .build_with_clock(TokioClock)
        .unwrap();
    let seen = Arc::new(AtomicU32::new(0));
    let layer = RateLimitLayer::waiting(limit, Duration::from_millis(250));
    let start = tokio::time::Instant::now();
    let calls: Vec<_> = (0..5)
        .map(|n| tokio::spawn(layer.layer(counting(&seen)).oneshot(n)))
        .collect();
    let mut admitted = Vec::new();
    let mut refused = 0;
    for call in calls {
        match call.await.unwrap() {
            Ok(n) => admitted.push(n),
            Err(RateLimitError::Refused(r)) => {
                assert!(
                    r.retry_after
                        .is_some_and(|d| d > Duration::from_millis(250))
                );
                refused += 1;
            }
            Err(RateLimitError::Inner(e)) => panic!("{e}"),
        }
    }
    // Turns at 0, 100 and 200 ms fit the 250 ms bound; 300 and 400 do not.
    assert_eq!((admitted.len(), refused), (3, 2));
    assert_eq!(start.elapsed(), Duration::from_millis(200));
}

#[tokio::test(start_paused = true)]
async fn a_service_readied_and_dropped_gives_its_turn_back() {
    let limit = RateLimit::builder()
        .quota(Quota::per_second(1).unwrap())
        .build_with_clock(TokioClock)
        .unwrap();
    limit.check().unwrap();
    let seen = Arc::new(AtomicU32::new(0));
    let layer = RateLimitLayer::waiting(limit.clone(), Duration::from_secs(5));
    {
        let mut svc = layer.layer(counting(&seen));
        let mut ready = tokio_test::task::spawn(svc.ready());
        assert!(ready.poll().is_pending(), "waiting for its turn in 1 s");
    }
    // Dropped: the turn 1 s from now is free for the next caller.
    assert_eq!(
        limit.reserve(1, Duration::from_secs(1)).unwrap().wait(),
        Duration::from_secs(1)
    );
}

/// A real axum server, the layer on its router (axum clones the router per
/// connection), refusals answered 429: 40 connections at once, each one
/// request; 5 get through.
#[tokio::test]
async fn under_axum_the_quota_holds_for_every_connection() {
    use axum::Router;
    use axum::error_handling::HandleErrorLayer;
    use axum::http::StatusCode;
    use axum::routing::get;

    let limit = RateLimit::builder()
        .name("quota")
        .quota(Quota::per_minute(5).unwrap())
        .build()
        .unwrap();
    let served = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&served);
    let app = Router::new()
        .route(
            "/",
            get(move || {
                let counter = Arc::clone(&counter);
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    "ok"
                }
            }),
        )
        .layer(
            tower::ServiceBuilder::new()
                .layer(HandleErrorLayer::new(
                    |e: RateLimitError<std::convert::Infallible>| async move {
                        match e {
                            RateLimitError::Refused(_) => StatusCode::TOO_MANY_REQUESTS,
                            RateLimitError::Inner(never) => match never {},
                        }
                    },
                ))
                .layer(RateLimitLayer::new(limit)),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let requests: Vec<_> = (0..40)
        .map(|_| {
            tokio::spawn(async move {
                let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
                stream
                    .write_all(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
                    .await
                    .unwrap();
                let mut head = Vec::new();
                stream.read_to_end(&mut head).await.unwrap();
                String::from_utf8_lossy(&head[..12]).into_owned()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for r in requests {
        statuses.push(r.await.unwrap());
    }
    let ok = statuses.iter().filter(|s| s.ends_with("200")).count();
    let limited = statuses.iter().filter(|s| s.ends_with("429")).count();
    assert_eq!((ok, limited), (5, 35), "{statuses:?}");
    assert_eq!(served.load(Ordering::SeqCst), 5);
    server.abort();
}
