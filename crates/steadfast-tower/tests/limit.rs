//! The concurrency-limit layer and the retry layer's slots: one limit for
//! every clone (the per-connection trap), backpressure in `poll_ready`,
//! slots back on every path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use steadfast::limit::ConcurrencyLimit;
use steadfast::{RetryPolicy, StopReason};
use steadfast_tower::{ConcurrencyLimitLayer, LimitError, RetryLayer};
use tower::{Layer, Service, ServiceExt, service_fn};

/// A service that counts the calls inside it at once, and the most ever.
fn counting(
    now: Arc<AtomicU32>,
    peak: Arc<AtomicU32>,
) -> impl Service<u32, Response = u32, Error = std::io::Error, Future: Send> + Clone {
    service_fn(move |n: u32| {
        let (now, peak) = (Arc::clone(&now), Arc::clone(&peak));
        async move {
            let inside = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(inside, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            Ok(n)
        }
    })
}

/// axum and hyper build the stack once per connection: 200 "connections",
/// each its own service made by the layer, 5 calls each at once. A limit of
/// 4 holds for all of them together (tower's own `ConcurrencyLimit`, made
/// per layer application, would allow 4 per connection).
#[tokio::test(start_paused = true)]
async fn one_limit_holds_across_every_per_connection_service() {
    let (now, peak) = (Arc::default(), Arc::new(AtomicU32::new(0)));
    let limit = ConcurrencyLimit::fixed(4).build().unwrap();
    let layer = ConcurrencyLimitLayer::new(limit.clone());
    let mut calls = Vec::new();
    for conn in 0..200 {
        let svc = layer.layer(counting(Arc::clone(&now), Arc::clone(&peak)));
        for i in 0..5 {
            calls.push(tokio::spawn(svc.clone().oneshot(conn * 5 + i)));
        }
    }
    let mut refused = 0;
    for call in calls {
        match call.await.unwrap() {
            Ok(_) => {}
            Err(LimitError::Refused(r)) => {
                assert_eq!(r.limit, 4);
                refused += 1;
            }
            Err(LimitError::Inner(e)) => panic!("{e}"),
        }
    }
    assert_eq!(peak.load(Ordering::SeqCst), 4);
    assert_eq!(limit.snapshot().refused, refused as u64);
    assert!(
        refused >= 996,
        "only the first four got in: {refused} refused"
    );
    assert_eq!(limit.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn waiting_mode_queues_callers_instead_of_refusing_them() {
    let (now, peak) = (Arc::default(), Arc::new(AtomicU32::new(0)));
    let limit = ConcurrencyLimit::fixed(3)
        .queue(100, Duration::from_secs(60))
        .build()
        .unwrap();
    let layer = ConcurrencyLimitLayer::waiting(limit.clone());
    let calls: Vec<_> = (0..40)
        .map(|n| {
            tokio::spawn(
                layer
                    .layer(counting(Arc::clone(&now), Arc::clone(&peak)))
                    .oneshot(n),
            )
        })
        .collect();
    for (n, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap(), u32::try_from(n).unwrap());
    }
    assert_eq!(peak.load(Ordering::SeqCst), 3);
    assert_eq!((limit.in_flight(), limit.snapshot().refused), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_wait_longer_than_the_queue_allows_is_refused_in_poll_ready() {
    let limit = ConcurrencyLimit::fixed(1)
        .queue(1, Duration::from_millis(50))
        .build()
        .unwrap();
    let _held = limit.try_acquire().unwrap();
    let svc =
        ConcurrencyLimitLayer::waiting(limit.clone()).layer(service_fn(|n: u32| async move {
            Ok::<_, std::io::Error>(n)
        }));
    let start = tokio::time::Instant::now();
    let err = svc.oneshot(1).await.unwrap_err();
    assert!(
        matches!(err, LimitError::Refused(r) if r.waited == Duration::from_millis(50)),
        "{err}"
    );
    assert_eq!(start.elapsed(), Duration::from_millis(50));
    assert_eq!(limit.snapshot().queued, 0);
}

#[tokio::test(start_paused = true)]
async fn dropped_calls_give_their_slots_back() {
    let limit = ConcurrencyLimit::fixed(2).build().unwrap();
    let svc = ConcurrencyLimitLayer::new(limit.clone()).layer(service_fn(|n: u32| async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok::<_, std::io::Error>(n)
    }));
    let mut a = svc.clone();
    let pending = a.ready().await.unwrap().call(1);
    assert_eq!(limit.in_flight(), 1);
    drop(pending); // never polled
    let b = tokio::time::timeout(Duration::from_millis(10), svc.clone().oneshot(2)).await;
    assert!(b.is_err(), "cut off mid-call");
    assert_eq!(limit.in_flight(), 0);
}

/// The retry layer's lean path (a lean policy with a limit) takes a slot
/// per attempt too, and a full limit stops the call as the core does.
#[tokio::test(start_paused = true)]
async fn the_retry_layer_takes_a_slot_per_attempt() {
    let limit = ConcurrencyLimit::fixed(1).name("backend").build().unwrap();
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .concurrency_limit(limit.clone())
        .build()
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let inner = {
        let (limit, seen) = (limit.clone(), Arc::clone(&seen));
        service_fn(move |n: u32| {
            seen.lock().unwrap().push(limit.in_flight());
            let fail = seen.lock().unwrap().len() < 2;
            async move {
                if fail {
                    Err(std::io::Error::other("reset"))
                } else {
                    Ok(n)
                }
            }
        })
    };
    let svc = RetryLayer::new(policy).layer(inner);
    assert_eq!(svc.clone().oneshot(7).await.unwrap(), 7);
    assert_eq!(*seen.lock().unwrap(), vec![1, 1]);
    assert_eq!(limit.in_flight(), 0);
    let held = limit.try_acquire().unwrap();
    let err = svc.oneshot(8).await.unwrap_err();
    assert_eq!(err.reason(), StopReason::LimitReached);
    assert_eq!(err.limit_refused().map(|r| r.by), Some("backend"));
    drop(held);
    assert_eq!(limit.in_flight(), 0);
}

/// The crate README shows `examples/limit_stack.rs` verbatim.
#[test]
fn the_readme_shows_the_limit_example() {
    let readme = include_str!("../README.md");
    let example = include_str!("../examples/limit_stack.rs");
    assert!(
        readme.contains(example),
        "README.md no longer shows examples/limit_stack.rs"
    );
}
