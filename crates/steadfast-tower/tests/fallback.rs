//! The fallback layer over the retry and hedge layers: a success passes, an
//! exhausted failed response and an error fall back, once per call.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use steadfast::fallback::{self, Failure};
use steadfast::{Backoff, HedgePolicy, RetryError, RetryPolicy, StopReason, Verdict};
use steadfast_tower::{FallbackLayer, HedgeLayer, RetryLayer};
use tower::{Service, ServiceBuilder, ServiceExt};

type Out = Result<u16, std::io::Error>;

#[tokio::test(start_paused = true)]
async fn an_exhausted_503_falls_back_and_a_200_does_not() {
    let fired = Arc::new(AtomicU32::new(0));
    let f = fired.clone();
    let fb = fallback::from_fn(move |failure: Failure<u16, std::io::Error>| {
        f.fetch_add(1, Ordering::Relaxed);
        assert_eq!(
            (failure.reason(), failure.response()),
            (StopReason::Exhausted, Some(&503))
        );
        Ok::<_, RetryError<std::io::Error>>(200)
    });
    let policy = RetryPolicy::builder()
        .backoff(
            Backoff::constant(Duration::from_millis(10))
                .build()
                .unwrap(),
        )
        .max_attempts(3)
        .build()
        .unwrap();
    let attempts = Arc::new(AtomicU32::new(0));
    let a = attempts.clone();
    let mut svc = ServiceBuilder::new()
        .layer(FallbackLayer::new(fb).name("pages"))
        .layer(RetryLayer::new(policy).classify(|r: &Out| match r {
            Ok(503) | Err(_) => Verdict::Retry,
            Ok(_) => Verdict::Success,
        }))
        .service_fn(move |status: u16| {
            a.fetch_add(1, Ordering::Relaxed);
            async move { Ok::<_, std::io::Error>(status) }
        });
    assert_eq!(svc.ready().await.unwrap().call(204).await.unwrap(), 204);
    assert_eq!(
        (
            fired.load(Ordering::Relaxed),
            attempts.load(Ordering::Relaxed)
        ),
        (0, 1)
    );
    assert_eq!(svc.ready().await.unwrap().call(503).await.unwrap(), 200);
    assert_eq!(
        (
            fired.load(Ordering::Relaxed),
            attempts.load(Ordering::Relaxed)
        ),
        (1, 4)
    );
}

#[tokio::test(start_paused = true)]
async fn a_hedged_call_whose_copies_fail_asks_the_backup() {
    let policy = HedgePolicy::builder(Duration::from_millis(20))
        .max_attempts(3)
        .build()
        .unwrap();
    let backup = fallback::backup(
        |failure: Failure<&'static str, std::io::Error>| async move {
            Ok::<_, RetryError<std::io::Error>>(if failure.attempts() == 3 {
                "backup"
            } else {
                "?"
            })
        },
    );
    let svc = ServiceBuilder::new()
        .layer(FallbackLayer::new(backup))
        .layer(HedgeLayer::new(policy))
        .service_fn(|_: ()| async { Err::<&str, _>(std::io::Error::other("down")) });
    assert_eq!(svc.oneshot(()).await.unwrap(), "backup");
}
