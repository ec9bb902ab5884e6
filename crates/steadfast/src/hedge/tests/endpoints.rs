//! An endpoint set under the hedger: the copies of a call go to distinct
//! endpoints while there are enough, and every pick is finished.

use std::collections::HashSet;
use std::sync::Mutex;

use super::*;
use crate::call::EndpointId;
use crate::endpoint::Endpoints;
use crate::hedge::Hedgeable;

#[tokio::test(start_paused = true)]
async fn copies_go_to_distinct_endpoints() {
    let set = Endpoints::builder()
        .seed(5)
        .outlier_detection(None)
        .build()
        .unwrap();
    for label in ["a:1", "b:1", "c:1", "d:1"] {
        set.insert(label, TokioClock.now());
    }
    let policy = HedgePolicy::builder(ms(10))
        .max_attempts(3)
        .endpoints(set.clone())
        .build()
        .unwrap();
    let seen: Arc<Mutex<Vec<EndpointId>>> = Arc::default();
    let report = {
        let seen = Arc::clone(&seen);
        (move |a: Attempt| {
            seen.lock().unwrap().push(a.endpoint.expect("picked"));
            async move {
                // Every copy is slow; the last answers first (copy n is
                // sent at 10(n - 1) ms and answers at 100 - 20n ms).
                tokio::time::sleep(ms(110 - 30 * u64::from(a.number))).await;
                Ok::<_, &str>(a.number)
            }
        })
        .hedge(policy)
        .clock(TokioClock)
        .report()
        .await
    };
    assert_eq!(report.result, Ok(3));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 3, "{seen:?}");
    // The winner's pick and the losers' (dropped) picks are all finished.
    assert!(
        set.snapshot(TokioClock.now())
            .iter()
            .all(|e| e.in_flight == 0)
    );
}

/// Hedged copies count under the set's retry cap: with a floor of one and
/// no share, one copy goes beside the first, the next is not sent; the
/// call still gets its answer, and every place is given back.
#[tokio::test(start_paused = true)]
async fn copies_count_under_the_retry_cap() {
    let set = Endpoints::builder()
        .seed(5)
        .outlier_detection(None)
        .retry_cap(Some(crate::endpoint::RetryCap::new(0, 1).unwrap()))
        .build()
        .unwrap();
    for label in ["a:1", "b:1", "c:1", "d:1"] {
        set.insert(label, TokioClock.now());
    }
    let policy = HedgePolicy::builder(ms(10))
        .max_attempts(4)
        .endpoints(set.clone())
        .build()
        .unwrap();
    let sent: Arc<Mutex<Vec<u32>>> = Arc::default();
    let report = {
        let sent = Arc::clone(&sent);
        (move |a: Attempt| {
            sent.lock().unwrap().push(a.number);
            async move {
                tokio::time::sleep(ms(100)).await;
                Ok::<_, &str>(a.number)
            }
        })
        .hedge(policy)
        .clock(TokioClock)
        .report()
        .await
    };
    assert_eq!(report.result, Ok(1));
    assert_eq!(
        *sent.lock().unwrap(),
        vec![1, 2],
        "the third copy was capped"
    );
    assert!(set.retry_overflows() >= 1);
    assert_eq!(set.flight().attempts, 0);
}

/// A pushback is its endpoint's: with another endpoint eligible the next
/// copy goes there at once; with one endpoint only, the call waits for it.
#[tokio::test(start_paused = true)]
async fn a_pushback_holds_copies_only_when_there_is_nowhere_else_to_go() {
    async fn run(labels: &[&str]) -> Duration {
        let set = Endpoints::builder()
            .seed(9)
            .outlier_detection(None)
            .build()
            .unwrap();
        for label in labels {
            set.insert(*label, TokioClock.now());
        }
        let policy = HedgePolicy::builder(ms(10_000))
            .max_attempts(2)
            .endpoints(set)
            .build()
            .unwrap();
        let started = tokio::time::Instant::now();
        let report = (|a: Attempt| async move {
            if a.number == 1 {
                Err("busy")
            } else {
                Ok(a.number)
            }
        })
        .hedge(policy)
        .classify(|o: &Result<u32, &str>| match o {
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::RetryAfter(Duration::from_secs(20)),
        })
        .clock(TokioClock)
        .report()
        .await;
        assert_eq!(report.result, Ok(2));
        started.elapsed()
    }
    assert_eq!(run(&["a:1", "b:1"]).await, Duration::ZERO, "elsewhere, now");
    assert_eq!(
        run(&["only:1"]).await,
        Duration::from_secs(20),
        "the pushback, with nowhere else to go"
    );
}

/// "refused" never reached a server; anything else did.
fn refused_is_unsent(outcome: &Result<u32, &'static str>) -> Verdict {
    match outcome {
        Ok(_) => Verdict::Success,
        Err("refused") => Verdict::Unsent,
        Err(_) => Verdict::Retry,
    }
}

/// A copy no server processed is requeued: two copies allowed, the first
/// two refused before any server saw them, and the third (at a third
/// endpoint) answers; without an endpoint set the same two refusals use
/// up the call.
#[tokio::test(start_paused = true)]
async fn a_copy_no_server_processed_is_requeued() {
    let set = Endpoints::builder()
        .seed(5)
        .outlier_detection(None)
        .build()
        .unwrap();
    for label in ["a:1", "b:1", "c:1"] {
        set.insert(label, TokioClock.now());
    }
    let run = |policy: HedgePolicy| {
        let seen: Arc<Mutex<Vec<Option<EndpointId>>>> = Arc::default();
        let log = Arc::clone(&seen);
        let call = (move |a: Attempt| {
            log.lock().unwrap().push(a.endpoint);
            async move {
                if a.number <= 2 {
                    Err("refused")
                } else {
                    Ok(a.number)
                }
            }
        })
        .hedge(policy)
        .classify(refused_is_unsent)
        .clock(TokioClock)
        .report();
        (call, seen)
    };
    let policy = HedgePolicy::builder(ms(50))
        .max_attempts(2)
        .endpoints(set.clone())
        .build()
        .unwrap();
    let (call, seen) = run(policy);
    let report = call.await;
    assert_eq!(
        report.result,
        Ok(3),
        "two copies requeued, the third answered"
    );
    assert_eq!(report.requeues, 2);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 3, "{seen:?}");
    assert!(
        set.snapshot(TokioClock.now())
            .iter()
            .all(|e| e.in_flight == 0)
    );

    let plain = HedgePolicy::builder(ms(50))
        .max_attempts(2)
        .build()
        .unwrap();
    let (call, seen) = run(plain);
    let report = call.await;
    assert_eq!(report.stop, Some(crate::StopReason::Exhausted));
    assert_eq!(seen.lock().unwrap().len(), 2);
}
