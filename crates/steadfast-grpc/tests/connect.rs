//! The gRPC connection backoff around a connector, on tokio's paused clock
//! (a scripted connector). `reconnect.rs` puts it around hyper's connector
//! under a real tonic channel whose server comes up late.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use http::Uri;
use steadfast::backoff::GrpcConnectionBackoff;
use steadfast::clock::TokioClock;
use steadfast_grpc::{BackoffConnector, ConnectError};
use tokio::time::Instant;
use tower::{Service, ServiceExt};

/// A connector that fails (or, once `up`, connects) and counts its attempts.
#[derive(Clone)]
struct Scripted {
    attempts: Arc<AtomicU32>,
    up: Arc<AtomicBool>,
    hang: bool,
}

impl Service<Uri> for Scripted {
    type Response = ();
    type Error = std::io::Error;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let (up, hang) = (self.up.load(Ordering::SeqCst), self.hang);
        Box::pin(async move {
            if hang {
                std::future::pending::<()>().await;
            }
            if up {
                Ok(())
            } else {
                Err(std::io::ErrorKind::ConnectionRefused.into())
            }
        })
    }
}

fn scripted(hang: bool) -> (Scripted, Arc<AtomicU32>, Arc<AtomicBool>) {
    let attempts = Arc::new(AtomicU32::new(0));
    let up = Arc::new(AtomicBool::new(false));
    (
        Scripted {
            attempts: attempts.clone(),
            up: up.clone(),
            hang,
        },
        attempts,
        up,
    )
}

fn backoff() -> GrpcConnectionBackoff {
    GrpcConnectionBackoff::builder()
        .seed(7)
        .build()
        .expect("valid backoff")
}

fn uri() -> Uri {
    Uri::from_static("http://svc.test:50051")
}

#[tokio::test(start_paused = true)]
async fn attempts_follow_the_backoff_and_fail_fast_inside_it() {
    let (inner, attempts, up) = scripted(false);
    let mut connector = BackoffConnector::with_backoff(inner, backoff(), TokioClock);
    let mut windows = Vec::new();
    for n in 1..=6 {
        let err = connector
            .ready()
            .await
            .expect("ready")
            .call(uri())
            .await
            .expect_err("refused");
        assert!(matches!(err, ConnectError::Connect(_)), "{err}");
        assert_eq!(attempts.load(Ordering::SeqCst), n);
        // Inside the window: no attempt, an error at once that says how long.
        let retry_in = match connector.ready().await.expect("ready").call(uri()).await {
            Err(ConnectError::InBackoff { retry_in }) => retry_in,
            other => panic!("expected to fail fast, got {other:?}"),
        };
        assert_eq!(attempts.load(Ordering::SeqCst), n);
        windows.push(retry_in);
        tokio::time::sleep(retry_in).await;
    }
    // 1 s exactly, then 1.6^k s within ±20 %.
    assert_eq!(windows[0], Duration::from_secs(1));
    for (k, w) in windows.iter().enumerate().skip(1) {
        let centre = 1.6_f64.powi(i32::try_from(k).expect("small"));
        let w = w.as_secs_f64();
        assert!(
            w >= centre * 0.8 - 1e-6 && w <= centre * 1.2 + 1e-6,
            "window {k}: {w} s vs {centre} s"
        );
    }
    // Connected: the curve starts over.
    up.store(true, Ordering::SeqCst);
    connector
        .ready()
        .await
        .expect("ready")
        .call(uri())
        .await
        .expect("connected");
    up.store(false, Ordering::SeqCst);
    let _ = connector.ready().await.expect("ready").call(uri()).await;
    match connector.ready().await.expect("ready").call(uri()).await {
        Err(ConnectError::InBackoff { retry_in }) => assert_eq!(retry_in, Duration::from_secs(1)),
        other => panic!("expected a fresh 1 s window, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn wait_for_ready_waits_out_the_window_instead_of_failing() {
    let (inner, attempts, up) = scripted(false);
    let mut connector =
        BackoffConnector::with_backoff(inner, backoff(), TokioClock).wait_for_ready();
    let start = Instant::now();
    let _ = connector.ready().await.expect("ready").call(uri()).await;
    up.store(true, Ordering::SeqCst);
    connector
        .ready()
        .await
        .expect("ready")
        .call(uri())
        .await
        .expect("connected after the window");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_gets_at_least_the_minimum_connect_timeout() {
    let (inner, _, _) = scripted(true);
    let mut connector = BackoffConnector::with_backoff(inner, backoff(), TokioClock);
    let start = Instant::now();
    let err = connector
        .ready()
        .await
        .expect("ready")
        .call(uri())
        .await
        .expect_err("never connects");
    assert!(
        matches!(err, ConnectError::TimedOut { after } if after == Duration::from_secs(20)),
        "{err}"
    );
    assert_eq!(start.elapsed(), Duration::from_secs(20));
}
