//! The retry layer over an endpoint set: each attempt's request carries the
//! endpoint the gate picked (a `Replay` that routes by `Attempt::endpoint`),
//! a request that never reached its endpoint is requeued elsewhere without
//! using an attempt, and the set's retry cap stops a retry it has no room
//! for. In-process services on tokio's paused clock: no timing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use steadfast::call::EndpointId;
use steadfast::classify::ClassifyFn;
use steadfast::endpoint::{Endpoints, RetryCap};
use steadfast::{Attempt, RetryPolicy, StopReason, Verdict};
use steadfast_tower::RetryLayer;
use steadfast_tower::replay::{Prepared, Preparing, Replay};
use tower::{Layer, ServiceExt, service_fn};

/// Makes each attempt's request: the payload and the endpoint picked.
#[derive(Clone, Copy)]
struct Routed;

impl Replay<u32> for Routed {
    type Request = (u32, Option<EndpointId>);
    type Source = u32;
    type Prepare = std::future::Ready<Prepared<u32, Self::Request>>;

    fn prepare(&self, request: u32) -> Preparing<Self::Prepare, u32, Self::Request> {
        Preparing::Done(Prepared::Replayable(request))
    }

    fn replay(&self, source: &u32, attempt: &Attempt) -> Self::Request {
        (*source, attempt.endpoint)
    }
}

/// "refused" never reached a server.
fn classify() -> ClassifyFn<impl Fn(&Result<u32, &'static str>) -> Verdict + Clone> {
    ClassifyFn::new(|outcome: &Result<u32, &'static str>| match outcome {
        Ok(_) => Verdict::Success,
        Err("refused") => Verdict::Unsent,
        Err(_) => Verdict::Retry,
    })
}

fn set(labels: &[&str], cap: Option<RetryCap>) -> (Endpoints, Vec<EndpointId>) {
    let set = Endpoints::builder()
        .seed(3)
        .outlier_detection(None)
        .retry_cap(cap)
        .build()
        .expect("a valid set");
    let now = std::time::Instant::now();
    let ids = labels.iter().map(|l| set.insert(*l, now)).collect();
    (set, ids)
}

/// Two of three replicas refuse every connection; one attempt allowed:
/// every call still gets through, requeued to the good one, and the
/// requests the replicas got are counted per replica.
#[tokio::test(start_paused = true)]
async fn a_refused_request_is_requeued_through_the_layer() {
    let (set, ids) = set(&["dead-a:1", "dead-b:1", "good:1"], None);
    let good = ids[2];
    let policy = RetryPolicy::builder()
        .max_attempts(1)
        .endpoints(set.clone())
        .build()
        .expect("a valid policy");
    let seen: Arc<Mutex<HashMap<EndpointId, u32>>> = Arc::default();
    let inner = {
        let seen = Arc::clone(&seen);
        service_fn(move |(n, endpoint): (u32, Option<EndpointId>)| {
            let endpoint = endpoint.expect("the gate picked one");
            *seen
                .lock()
                .expect("the counts")
                .entry(endpoint)
                .or_default() += 1;
            async move {
                if endpoint == good {
                    Ok(n)
                } else {
                    Err("refused")
                }
            }
        })
    };
    let service = RetryLayer::new(policy)
        .with_classifier(classify())
        .replay(Routed)
        .layer(inner);
    for n in 0..20 {
        let report = service.clone().oneshot(n).await;
        assert_eq!(report.expect("requeued to the good replica"), n);
    }
    let seen = seen.lock().expect("the counts");
    assert_eq!(seen.get(&good), Some(&20), "{seen:?}");
    // The seeded picks met the dead replicas: those calls were requeued.
    let refused: u32 = ids[..2].iter().filter_map(|id| seen.get(id)).sum();
    assert!(refused > 0, "{seen:?}");
    assert_eq!(set.flight().attempts, 0, "every pick was given back");
}

/// A set whose cap allows no retry: the first attempt goes, the retry is
/// not sent, and the call ends with the first attempt's error, saying why.
#[tokio::test(start_paused = true)]
async fn the_retry_cap_stops_a_retry_through_the_layer() {
    let (set, _) = set(
        &["a:1", "b:1"],
        Some(RetryCap::new(0, 0).expect("a valid cap")),
    );
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .endpoints(set.clone())
        .build()
        .expect("a valid policy");
    let calls = Arc::new(Mutex::new(0_u32));
    let inner = {
        let calls = Arc::clone(&calls);
        service_fn(move |(_, _): (u32, Option<EndpointId>)| {
            *calls.lock().expect("the count") += 1;
            async { Err::<u32, _>("unavailable") }
        })
    };
    let service = RetryLayer::new(policy)
        .with_classifier(classify())
        .replay(Routed)
        .layer(inner);
    let err = service.oneshot(1).await.unwrap_err();
    assert_eq!(err.reason(), StopReason::RetryCapped);
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.last_error(), Some(&"unavailable"));
    assert_eq!(*calls.lock().expect("the count"), 1);
    assert_eq!(set.retry_overflows(), 1);
}
