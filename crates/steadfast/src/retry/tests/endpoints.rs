//! An endpoint set in the gate: every attempt is told the endpoint picked
//! for it, a retry goes elsewhere than where the call already went, the
//! error names the endpoints tried, the outcome reaches the endpoint, and a
//! set with nothing ready stops the call with a clear reason. Both
//! executors, on virtual time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::*;
use crate::call::{Attempt, EndpointId, Refused, StopReason, Verdict};
use crate::clock::VirtualClock;
use crate::endpoint::Endpoints;
use crate::retry::{BlockingRetryable, Retryable};

/// Three endpoints (no outlier detection: these tests are about the
/// gate), and their ids.
fn three(clock: &VirtualClock) -> (Endpoints, Vec<EndpointId>) {
    let set = Endpoints::builder()
        .seed(11)
        .outlier_detection(None)
        .build()
        .unwrap();
    let ids = ["a:1", "b:1", "c:1"]
        .iter()
        .map(|label| set.insert(*label, clock.now()))
        .collect();
    (set, ids)
}

fn spread(attempts: u32, set: &Endpoints) -> RetryPolicy<Fixed> {
    RetryPolicy::with_schedule(Fixed(vec![secs(1); 8]))
        .max_attempts(attempts)
        .endpoints(set.clone())
        .build()
        .unwrap()
}

#[test]
fn a_blocking_retry_goes_to_an_endpoint_it_has_not_tried() {
    let clock = VirtualClock::new();
    let (set, ids) = three(&clock);
    let policy = spread(3, &set);
    let seen = Mutex::new(Vec::new());
    let err = (|a: Attempt| {
        seen.lock().unwrap().push(a.endpoint.expect("picked"));
        Err::<(), _>("unavailable")
    })
    .retry_blocking(&policy)
    .clock(clock.clone())
    .name("lookup")
    .call()
    .unwrap_err();
    let seen = seen.into_inner().unwrap();
    // Three attempts, three endpoints: none tried twice.
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 3, "{seen:?}");
    assert!(seen.iter().all(|id| ids.contains(id)));
    // The error lists them in order and names the last.
    assert_eq!(err.endpoints().collect::<Vec<_>>(), seen);
    let last = ["a:1", "b:1", "c:1"][ids.iter().position(|id| *id == seen[2]).unwrap()];
    assert_eq!(err.last_endpoint(), Some(last));
    assert!(
        err.to_string()
            .contains(&format!("; last attempt to {last})")),
        "{err}"
    );
    // Every pick was finished: nothing is left in flight.
    assert!(set.snapshot(clock.now()).iter().all(|e| e.in_flight == 0));
}

#[tokio::test(start_paused = true)]
async fn an_async_retry_goes_elsewhere_from_the_first_attempt_on() {
    let clock = VirtualClock::manual();
    let (set, _) = three(&clock);
    let policy = spread(3, &set);
    // An endpoint set makes a policy not lean: the running stage records
    // every pick from the first on.
    assert!(!policy.is_lean());
    let first = Arc::new(Mutex::new(None));
    let value = {
        let first = Arc::clone(&first);
        (move |a: Attempt| {
            let first = Arc::clone(&first);
            async move {
                let endpoint = a.endpoint.expect("picked");
                let mut first = first.lock().unwrap();
                match *first {
                    // Only the first endpoint fails.
                    None => {
                        *first = Some(endpoint);
                        Err("refused")
                    }
                    Some(bad) if bad == endpoint => Err("refused"),
                    Some(_) => Ok(a.number),
                }
            }
        })
        .retry(&policy)
        .report()
        .await
    };
    // The retry went elsewhere, at once: attempt 2 succeeded.
    assert_eq!(value.result, Ok(2));
    assert!(set.snapshot(clock.now()).iter().all(|e| e.in_flight == 0));
}

#[test]
fn with_every_endpoint_tried_a_retry_goes_back_to_one() {
    let clock = VirtualClock::new();
    let set = Endpoints::builder()
        .seed(3)
        .outlier_detection(None)
        .build()
        .unwrap();
    set.insert("only:1", clock.now());
    let policy = spread(3, &set);
    let calls = Mutex::new(0_u32);
    let err = (|a: Attempt| {
        assert!(a.endpoint.is_some());
        *calls.lock().unwrap() += 1;
        Err::<(), _>("unavailable")
    })
    .retry_blocking(&policy)
    .clock(clock)
    .call()
    .unwrap_err();
    assert_eq!(*calls.lock().unwrap(), 3);
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.endpoints().count(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_set_with_nothing_ready_stops_the_call_and_says_so() {
    let clock = VirtualClock::manual();
    let (set, ids) = three(&clock);
    for id in &ids {
        set.set_ready(*id, false);
    }
    let policy = spread(3, &set);
    let err = (|_: Attempt| async { Ok::<_, &str>(1) })
        .retry(&policy)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::NoEndpoint);
    assert_eq!(
        err.refusal(),
        Some(Refused::NoEndpoint {
            endpoints: 3,
            retry_after: None
        })
    );
    assert_eq!(err.attempts(), 0);
    let blocking = (|_: Attempt| Ok::<_, &str>(1))
        .retry_blocking(&policy)
        .clock(clock)
        .call()
        .unwrap_err();
    assert_eq!(blocking.reason(), StopReason::NoEndpoint);
}

#[test]
fn the_outcome_reaches_the_endpoint_it_came_from() {
    let clock = VirtualClock::new();
    let (set, _) = three(&clock);
    let policy = spread(2, &set);
    // A server that asks for 20 s of room, then an answer from elsewhere.
    let classify = |outcome: &Result<u32, &'static str>| match outcome {
        Ok(_) => Verdict::Success,
        Err(_) => Verdict::RetryAfter(secs(20)),
    };
    let hinted = Mutex::new(None);
    let value = (|a: Attempt| -> Result<u32, &'static str> {
        if a.is_first() {
            *hinted.lock().unwrap() = a.endpoint;
            Err("overloaded")
        } else {
            Ok(a.number)
        }
    })
    .retry_blocking(&policy)
    .classify(classify)
    .clock(clock.clone())
    .call();
    assert_eq!(value, Ok(2));
    let hinted = hinted.into_inner().unwrap().expect("picked");
    let now = clock.now();
    for e in set.snapshot(now) {
        if e.id == hinted {
            // The hint is a penalty on its load: a peak of the 20 s asked,
            // decayed over the 20 s waited (10 s decay): 20 s × e^-2.
            assert!(e.rtt > secs(2), "{e:?}");
        } else {
            // The default 1 s, or the instant round trip of attempt 2.
            assert!(e.rtt <= secs(1), "{e:?}");
        }
    }
}

/// A `Retry-After` is its endpoint's: with another endpoint untried the
/// retry goes there on the schedule's wait (1 s), not the hint's (20 s);
/// with nowhere else to go, the call waits for the hint.
#[test]
fn a_hint_is_waited_for_only_when_there_is_nowhere_else_to_go() {
    let run = |replicas: &[&str]| {
        let clock = VirtualClock::new();
        let set = Endpoints::builder()
            .seed(2)
            .outlier_detection(None)
            .build()
            .unwrap();
        for label in replicas {
            set.insert(*label, clock.now());
        }
        let policy = spread(2, &set);
        let started = clock.now();
        let second_at = Mutex::new(None);
        let value = (|a: Attempt| -> Result<u32, &'static str> {
            if a.is_first() {
                Err("busy")
            } else {
                *second_at.lock().unwrap() = Some(clock.now() - started);
                Ok(a.number)
            }
        })
        .retry_blocking(&policy)
        .classify(|outcome: &Result<u32, &'static str>| match outcome {
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::RetryAfter(secs(20)),
        })
        .clock(clock.clone())
        .call();
        assert_eq!(value, Ok(2));
        second_at.into_inner().unwrap().expect("a second attempt")
    };
    assert_eq!(run(&["a:1", "b:1"]), secs(1), "elsewhere, on the schedule");
    assert_eq!(
        run(&["only:1"]),
        secs(20),
        "the hint, with nowhere else to go"
    );
}

/// Three endpoints under a retry cap of `percent` % with a floor of `min`.
fn capped(clock: &VirtualClock, percent: u32, min: u32) -> Endpoints {
    let set = Endpoints::builder()
        .seed(13)
        .outlier_detection(None)
        .retry_cap(Some(crate::endpoint::RetryCap::new(percent, min).unwrap()))
        .build()
        .unwrap();
    for label in ["a:1", "b:1", "c:1"] {
        set.insert(label, clock.now());
    }
    set
}

/// A retry over the set's cap is not sent: the call stops with its last
/// attempt's outcome and says why; the set counts it; a first attempt is
/// never capped.
#[tokio::test(start_paused = true)]
async fn a_retry_over_the_cap_is_not_sent() {
    let clock = VirtualClock::manual();
    let set = capped(&clock, 0, 0);
    let policy = spread(3, &set);
    let calls = Arc::new(Mutex::new(0_u32));
    let err = {
        let calls = Arc::clone(&calls);
        (move |_: Attempt| {
            *calls.lock().unwrap() += 1;
            async { Err::<(), _>("unavailable") }
        })
        .retry(&policy)
        .await
        .unwrap_err()
    };
    assert_eq!(*calls.lock().unwrap(), 1, "only the first attempt went");
    assert_eq!(err.reason(), StopReason::RetryCapped);
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.last_error(), Some(&"unavailable"));
    assert_eq!(
        err.refusal(),
        Some(Refused::RetryCap {
            in_flight: 0,
            cap: 0
        })
    );
    assert_eq!(set.retry_overflows(), 1);
    assert_eq!(set.flight().attempts, 0, "every pick was given back");
}

/// The cap is shared by every caller of the set: while one call's retry
/// holds the only place (a floor of one, no share), another call's retry
/// is turned away, and the first call goes on. Blocking, the second call
/// made inside the first one's retry: no thread, no timing.
#[test]
fn the_cap_is_shared_by_every_caller() {
    let clock = VirtualClock::new();
    let set = capped(&clock, 0, 1);
    let policy = spread(3, &set);
    let inner = Mutex::new(None);
    let value = (|a: Attempt| -> Result<u32, &'static str> {
        if a.is_first() {
            return Err("unavailable");
        }
        // The retry holds the one place: another call's retry is capped.
        assert_eq!(set.flight().retries, 1);
        let other = (|_: Attempt| Err::<u32, _>("unavailable"))
            .retry_blocking(&policy)
            .clock(clock.clone())
            .call()
            .unwrap_err();
        *inner.lock().unwrap() = Some((other.reason(), other.attempts()));
        Ok(a.number)
    })
    .retry_blocking(&policy)
    .clock(clock.clone())
    .call();
    assert_eq!(value, Ok(2));
    assert_eq!(
        inner.into_inner().unwrap(),
        Some((StopReason::RetryCapped, 1))
    );
    assert_eq!(set.retry_overflows(), 1);
    // Once the retry ended, the place is free again.
    assert_eq!(set.flight().retries, 0);
    let again = (|a: Attempt| {
        if a.is_first() {
            Err("unavailable")
        } else {
            Ok(a.number)
        }
    })
    .retry_blocking(&policy)
    .clock(clock)
    .call();
    assert_eq!(again, Ok(2));
}

/// "refused" never reached a server; anything else did.
fn refused_is_unsent(outcome: &Result<u32, &'static str>) -> Verdict {
    match outcome {
        Ok(_) => Verdict::Success,
        Err("refused") => Verdict::Unsent,
        Err(_) => Verdict::Retry,
    }
}

/// A request that never reached a server is requeued: sent at once to
/// another endpoint without using an attempt, keeping its number (the
/// server never saw the first). One attempt allowed, and the call still
/// gets through.
#[test]
fn a_request_never_sent_is_requeued_without_using_an_attempt() {
    let clock = VirtualClock::new();
    let (set, _) = three(&clock);
    let policy = spread(1, &set);
    let started = clock.now();
    let seen = Mutex::new(Vec::new());
    let value = (|a: Attempt| -> Result<u32, &'static str> {
        let mut seen = seen.lock().unwrap();
        seen.push((a.number, a.endpoint.expect("picked"), clock.now() - started));
        if seen.len() == 1 {
            Err("refused")
        } else {
            Ok(a.number)
        }
    })
    .retry_blocking(&policy)
    .classify(refused_is_unsent)
    .clock(clock.clone())
    .call();
    assert_eq!(value, Ok(1), "the requeued attempt is still attempt 1");
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 2);
    assert_ne!(seen[0].1, seen[1].1, "requeued elsewhere");
    assert_eq!(seen[1].2, Duration::ZERO, "at once, with no backoff");
    assert_eq!(set.flight().attempts, 0);
}

/// Requeues are bounded per call; past the bound a failure never sent is
/// an ordinary retry, counted and waited for; without a set it always is.
#[test]
fn requeues_are_bounded_then_count_as_retries() {
    let clock = VirtualClock::new();
    let set = Endpoints::builder()
        .seed(4)
        .outlier_detection(None)
        .build()
        .unwrap();
    for label in ["a:1", "b:1", "c:1", "d:1", "e:1"] {
        set.insert(label, clock.now());
    }
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 8]))
        .max_attempts(2)
        .max_requeues(1)
        .endpoints(set.clone())
        .build()
        .unwrap();
    let numbers = Mutex::new(Vec::new());
    let err = (|a: Attempt| -> Result<u32, &'static str> {
        numbers.lock().unwrap().push(a.number);
        Err("refused")
    })
    .retry_blocking(&policy)
    .classify(refused_is_unsent)
    .clock(clock.clone())
    .call()
    .unwrap_err();
    // Attempt 1, requeued once (still 1), then the retry (2): exhausted.
    assert_eq!(numbers.into_inner().unwrap(), vec![1, 1, 2]);
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.attempts(), 2);
    assert_eq!(err.endpoints().count(), 3);

    // With no endpoint set, nothing is requeued: a plain retry.
    let plain = RetryPolicy::with_schedule(Fixed(vec![secs(1); 8]))
        .max_attempts(1)
        .build()
        .unwrap();
    let calls = Mutex::new(0);
    let err = (|_: Attempt| -> Result<u32, &'static str> {
        *calls.lock().unwrap() += 1;
        Err("refused")
    })
    .retry_blocking(&plain)
    .classify(refused_is_unsent)
    .clock(clock)
    .call()
    .unwrap_err();
    assert_eq!(
        (*calls.lock().unwrap(), err.reason()),
        (1, StopReason::Exhausted)
    );
}

/// An async requeue goes through the running stage the same way, and is
/// charged to the retry control: a budget with nothing to spend stops it.
#[tokio::test(start_paused = true)]
async fn an_async_requeue_is_charged_to_the_control() {
    let clock = VirtualClock::manual();
    let (set, _) = three(&clock);
    let policy = spread(1, &set);
    let sent = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let value = {
        let sent = Arc::clone(&sent);
        (move |a: Attempt| {
            let first = sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0;
            async move { if first { Err("refused") } else { Ok(a.number) } }
        })
        .retry(&policy)
        .classify(refused_is_unsent)
        .clock(clock.clone())
        .await
    };
    // One attempt allowed: the refused one was requeued, not counted.
    assert_eq!(value, Ok(1));
    assert_eq!(sent.load(std::sync::atomic::Ordering::Relaxed), 2);

    let broke = RetryPolicy::with_schedule(Fixed(vec![secs(1); 8]))
        .max_attempts(1)
        .endpoints(set.clone())
        .control(Arc::new(
            crate::control::TokenBucket::builder()
                .max_tokens(2)
                .build()
                .unwrap(),
        ))
        .build()
        .unwrap();
    // A token bucket of two tokens: the first failure leaves one, at
    // half, where retries (and so requeues) are refused.
    let err = (|_: Attempt| async { Err::<u32, _>("refused") })
        .retry(&broke)
        .classify(refused_is_unsent)
        .clock(clock)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Throttled);
    assert_eq!(err.attempts(), 1);
}

/// A report names the endpoint that answered and counts the requeues; so
/// does its `Ending`.
#[test]
fn a_report_names_the_endpoint_that_answered_and_the_requeues() {
    let clock = VirtualClock::new();
    let (set, _) = three(&clock);
    let policy = spread(3, &set);
    let seen = Mutex::new(Vec::new());
    let report = (|a: Attempt| -> Result<u32, &'static str> {
        let mut seen = seen.lock().unwrap();
        seen.push(a.endpoint.expect("picked"));
        match seen.len() {
            1 => Err("refused"),
            2 => Err("unavailable"),
            _ => Ok(a.number),
        }
    })
    .retry_blocking(&policy)
    .classify(refused_is_unsent)
    .clock(clock)
    .report()
    .call();
    let seen = seen.into_inner().unwrap();
    // Requeued (not counted), failed, then succeeded as attempt 2.
    assert_eq!(report.result, Ok(2));
    assert_eq!((report.attempts, report.requeues), (2, 1));
    assert_eq!(
        report.endpoint,
        seen.last().copied(),
        "the one that answered"
    );
    let ending = report.ending();
    assert_eq!((ending.endpoint, ending.requeues), (report.endpoint, 1));
}

/// Two endpoints, both refusing at first: each is held on its connection
/// backoff (1 s ± 20 %), and a policy of two attempts with a 10 ms
/// backoff.
fn both_held(clock: &VirtualClock) -> (Endpoints, RetryPolicy<Fixed>) {
    let set = Endpoints::builder()
        .seed(5)
        .outlier_detection(None)
        .build()
        .unwrap();
    set.insert("a:1", clock.now());
    set.insert("b:1", clock.now());
    let policy = RetryPolicy::with_schedule(Fixed(vec![Duration::from_millis(10); 8]))
        .max_attempts(2)
        .endpoints(set.clone())
        .build()
        .unwrap();
    (set, policy)
}

/// With every endpoint held after refusing, the gate has none ready: the
/// attempt is requeued until the first comes back (no attempt used), in
/// both executors; a call whose deadline comes first stops, saying when
/// one would have come back.
#[test]
fn with_no_endpoint_ready_the_attempt_waits_for_the_first_back() {
    let clock = VirtualClock::new();
    let (_set, policy) = both_held(&clock);
    let started = clock.now();
    let sends = Mutex::new(Vec::new());
    let report = (|a: Attempt| -> Result<u32, &'static str> {
        let mut sends = sends.lock().unwrap();
        sends.push((a.number, clock.now() - started));
        if sends.len() <= 2 {
            Err("refused")
        } else {
            Ok(a.number)
        }
    })
    .retry_blocking(&policy)
    .classify(refused_is_unsent)
    .clock(clock.clone())
    .report()
    .call();
    let sends = sends.into_inner().unwrap();
    // Attempt 1 at a, requeued to b (both now held), the retry waited
    // for the first of them to come back: attempt 2, two requeues.
    assert_eq!(report.result, Ok(2));
    assert_eq!((report.attempts, report.requeues), (2, 2));
    assert_eq!(sends.len(), 3);
    let back = sends[2].1;
    assert!(
        back >= Duration::from_millis(800) && back <= Duration::from_millis(1200),
        "sent when the first endpoint's 1 s ± 20 % hold ended: {back:?}"
    );
    assert_eq!(report.waited, back, "the wait is the call's");

    // A deadline before either comes back: the call stops there, and the
    // refusal says when the first would have.
    let clock = VirtualClock::new();
    let (_set, policy) = both_held(&clock);
    let deadline = crate::deadline::Deadline::after(clock.now(), Duration::from_millis(500));
    let err = (|_: Attempt| -> Result<u32, &'static str> { Err("refused") })
        .retry_blocking(&policy)
        .classify(refused_is_unsent)
        .clock(clock.clone())
        .deadline(deadline)
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::NoEndpoint);
    assert_eq!((err.attempts(), err.requeues()), (1, 1));
    let Some(Refused::NoEndpoint {
        endpoints: 2,
        retry_after: Some(back_in),
    }) = err.refusal()
    else {
        panic!("a refusal saying when: {:?}", err.refusal());
    };
    assert!(back_in > Duration::from_millis(700), "{back_in:?}");
}

#[tokio::test]
async fn an_async_attempt_with_no_endpoint_ready_waits_for_the_first_back() {
    let clock = VirtualClock::new();
    let (set, policy) = both_held(&clock);
    let sent = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let started = clock.now();
    let report = {
        let sent = Arc::clone(&sent);
        (move |a: Attempt| {
            let n = sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move { if n < 2 { Err("refused") } else { Ok(a.number) } }
        })
        .retry(&policy)
        .classify(refused_is_unsent)
        .clock(clock.clone())
        .report()
        .await
    };
    assert_eq!(report.result, Ok(2));
    assert_eq!((report.attempts, report.requeues), (2, 2));
    let back = clock.now() - started;
    assert!(
        back >= Duration::from_millis(800) && back <= Duration::from_millis(1200),
        "{back:?}"
    );
    assert_eq!(set.flight().attempts, 0, "every pick went back");
}
