//! The call's deadline covers reading the body (#28 item 4): a response
//! whose head comes at once and whose body trickles is cut off at the
//! deadline, as reqwest's own `timeout` would cut it, instead of keeping
//! the caller for as long as the server cares to dribble.
//!
//! A real axum server on 127.0.0.1 (OS-picked port), a real reqwest client.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use steadfast_http::{BodyError, Client};

/// A server whose `/trickle` answers 200 at once, then sends one byte every
/// 100 ms for 10 s; `/whole` sends its body at once.
async fn server() -> String {
    let app = Router::new()
        .route(
            "/trickle",
            get(|| async {
                let chunks = futures::stream::unfold(0u32, |n| async move {
                    if n > 0 {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    (n < 100).then(|| (Ok::<_, Infallible>(Bytes::from_static(b".")), n + 1))
                });
                Body::from_stream(chunks)
            }),
        )
        .route("/whole", get(|| async { "all of it" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

#[tokio::test]
async fn a_body_that_trickles_past_the_deadline_is_cut_off_at_it() {
    let base = server().await;
    let client = Client::builder()
        .deadline(Duration::from_millis(400))
        .build()
        .expect("client");
    let started = Instant::now();
    let response = client
        .get(format!("{base}/trickle"))
        .send()
        .await
        .expect("the head");
    assert_eq!(response.status(), 200);
    assert!(response.deadline().is_some());
    let err = response.text().await.expect_err("cut off");
    assert!(matches!(err, BodyError::DeadlineExceeded), "{err}");
    // Well before the 10 s the whole body would take.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // Chunk by chunk too.
    let mut response = client
        .get(format!("{base}/trickle"))
        .send()
        .await
        .expect("the head");
    let mut read = 0;
    let err = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => read += chunk.len(),
            Ok(None) => panic!("the body ended before the deadline"),
            Err(e) => break e,
        }
    };
    assert!(err.is_deadline(), "{err}");
    assert!(read < 100, "{read} bytes");
}

#[tokio::test]
async fn a_body_read_in_time_is_whole_and_a_call_without_a_deadline_is_unbounded() {
    let base = server().await;
    let bounded = Client::builder()
        .deadline(Duration::from_secs(30))
        .build()
        .expect("client");
    let response = bounded
        .get(format!("{base}/whole"))
        .send()
        .await
        .expect("response");
    assert_eq!(response.text().await.expect("in time"), "all of it");
    let unbounded = Client::builder().build().expect("client");
    let response = unbounded
        .get(format!("{base}/whole"))
        .send()
        .await
        .expect("response");
    assert_eq!(response.deadline(), None);
    assert_eq!(response.bytes().await.expect("body"), "all of it");
}
