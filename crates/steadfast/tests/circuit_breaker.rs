//! The circuit breaker through the executors: the blocking loop and the
//! async future (retry policy), and the hedger, with nothing of their own:
//! the breaker is one more retry control.

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use steadfast::backoff::Backoff;
use steadfast::clock::{Clock, TokioClock, VirtualClock};
use steadfast::control::{
    AllOf, BreakerState, CircuitBreaker, CircuitBreakerBuilder, RetryBudget, RetryControl,
    TokenBucket, WindowKind,
};
use steadfast::{
    Attempt, BlockingRetryable, CancelToken, HedgePolicy, Hedgeable, RetryPolicy, Retryable,
    StopReason,
};

const SEC: Duration = Duration::from_secs(1);

/// Opens at 10 attempts (of the last 20) with half of them failing; 5 s breaks.
fn settings() -> CircuitBreakerBuilder {
    CircuitBreaker::builder()
        .name("inventory")
        .window(WindowKind::Count(20))
        .min_calls(10)
        .failure_ratio(0.5)
        .break_duration(5 * SEC)
}

fn policy(control: Arc<dyn RetryControl>) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(3)
        .backoff(
            Backoff::constant(Duration::from_millis(100))
                .build()
                .expect("valid"),
        )
        .control(control)
        .build()
        .expect("valid")
}

/// One call a second for 60 s against a dependency that is down until
/// `up_at`; the times (whole seconds) at which attempts reached it.
fn blocking_run(up_at: u64) -> (Vec<u64>, Arc<CircuitBreaker<VirtualClock>>) {
    let clock = VirtualClock::new();
    let start = clock.now();
    let breaker = Arc::new(settings().build_with_clock(clock.clone()).expect("valid"));
    let policy = policy(breaker.clone());
    let mut sent = Vec::new();
    for second in 0..60 {
        clock.advance_to(start + second * SEC);
        let result = (|_: Attempt| {
            let now = clock.now().duration_since(start).as_secs();
            sent.push(now);
            if now >= up_at {
                Ok(())
            } else {
                Err("connection refused")
            }
        })
        .retry_blocking(&policy)
        .clock(clock.clone())
        .name("reserve")
        .call();
        if let Err(err) = result
            && err.attempts() == 0
        {
            // Refused by the breaker without an attempt, and it says why.
            assert_eq!(err.reason(), StopReason::Throttled);
            assert_eq!(err.refused_by(), Some("inventory"));
            let left = err.retry_after().expect("an open breaker knows");
            assert!(left > Duration::ZERO && left <= 5 * SEC, "{left:?}");
            assert!(
                err.to_string().starts_with(
                    "reserve failed after 0 attempts in 0ms (refused by inventory, for"
                )
            );
        }
    }
    (sent, breaker)
}

#[test]
fn blocking_retries_stop_at_the_threshold_and_one_probe_goes_per_break() {
    let (sent, breaker) = blocking_run(u64::MAX);
    // Calls 0-2 make 3 attempts each; call 3's first attempt is the 10th
    // failure: the breaker opens and refuses its retry.
    assert_eq!(&sent[..10], &[0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
    // Then one probe per 5 s break, and nothing else.
    let probes: Vec<u64> = (1..12).map(|n| 3 + 5 * n).collect();
    assert_eq!(&sent[10..], probes.as_slice());
    let snap = breaker.snapshot();
    assert_eq!(snap.state, BreakerState::Open);
    assert_eq!(snap.openings, 12);
    // 45 refused calls, and the retries of call 3 and of the 11 probes.
    assert_eq!(snap.refusals, 45 + 1 + 11);
}

#[test]
fn blocking_calls_resume_after_the_first_successful_probe() {
    let (sent, breaker) = blocking_run(20);
    // Probes at 8, 13 and 18 fail; the one at 23 succeeds and closes it;
    // every call after goes through (one attempt each).
    let after: Vec<u64> = sent.iter().copied().filter(|&t| t >= 19).collect();
    assert_eq!(after, (23..60).collect::<Vec<_>>());
    assert_eq!(breaker.state(), BreakerState::Closed);
    assert_eq!(breaker.snapshot().openings, 4);
}

/// The async executor, many calls at once on tokio's paused clock: each
/// break lets exactly K probes reach the dependency, however many calls
/// are waiting.
#[tokio::test(start_paused = true)]
async fn async_calls_send_exactly_k_probes_per_break() {
    let breaker = Arc::new(
        settings()
            .probes(3)
            .build_with_clock(TokioClock)
            .expect("valid"),
    );
    let policy = policy(breaker.clone());
    let sends = Arc::new(AtomicUsize::new(0));
    // Down: every attempt fails after 50 ms.
    let call = || {
        let sends = sends.clone();
        (move |_: Attempt| {
            let sends = sends.clone();
            async move {
                sends.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err::<(), _>(std::io::Error::other("down"))
            }
        })
        .retry(&policy)
    };
    // 20 calls at once, all let through (a closed breaker decides on
    // outcomes, not on attempts in flight). The first 9 failures are
    // granted their retry while the breaker is still closed; the 10th
    // opens it, and every later retry is refused. A granted retry is sent
    // even though the breaker opened during its wait: 20 + 9 attempts.
    let results = futures::future::join_all((0..20).map(|_| call().into_future())).await;
    assert_eq!(sends.load(Ordering::SeqCst), 29);
    assert!(results.iter().all(Result::is_err));
    assert_eq!(breaker.state(), BreakerState::Open);
    for round in 1..=3 {
        tokio::time::advance(5 * SEC + Duration::from_millis(10)).await;
        sends.store(0, Ordering::SeqCst);
        let results = futures::future::join_all((0..20).map(|_| call().into_future())).await;
        assert_eq!(sends.load(Ordering::SeqCst), 3, "round {round}");
        let refused = results
            .iter()
            .filter(|r| r.as_ref().is_err_and(|e| e.attempts() == 0))
            .count();
        assert_eq!(refused, 17);
        assert_eq!(breaker.state(), BreakerState::Open);
    }
}

/// A granted probe whose call is cancelled before it is sent gives its
/// slot back through the policy's `abandon`.
#[test]
fn a_cancelled_probe_frees_its_slot() {
    let clock = VirtualClock::new();
    let breaker = Arc::new(settings().build_with_clock(clock.clone()).expect("valid"));
    let policy = policy(breaker.clone());
    for _ in 0..10 {
        breaker.record(steadfast::control::Outcome::RetryableFailure);
    }
    clock.advance(5 * SEC);
    let cancel = CancelToken::new();
    cancel.cancel();
    let sent = AtomicU32::new(0);
    let err = (|_: Attempt| {
        sent.fetch_add(1, Ordering::SeqCst);
        Err::<(), _>("unreachable")
    })
    .retry_blocking(&policy)
    .clock(clock.clone())
    .cancel_on(cancel)
    .call()
    .unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(sent.load(Ordering::SeqCst), 0);
    let snap = breaker.snapshot();
    assert_eq!((snap.state, snap.probes), (BreakerState::HalfOpen, 0));
    // The next call probes, succeeds, and closes the breaker.
    (|_: Attempt| Ok::<_, &str>(()))
        .retry_blocking(&policy)
        .clock(clock.clone())
        .call()
        .expect("the probe succeeds");
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A retry granted as a probe, then abandoned during its backoff wait, is
/// refunded too.
#[tokio::test(start_paused = true)]
async fn a_retry_probe_abandoned_in_its_wait_frees_its_slot() {
    let breaker = Arc::new(settings().build_with_clock(TokioClock).expect("valid"));
    let policy = RetryPolicy::builder()
        .max_attempts(2)
        .backoff(Backoff::constant(10 * SEC).build().expect("valid"))
        .control(breaker.clone())
        .build()
        .expect("valid");
    // A slow call starts while the breaker is closed...
    let cancel = CancelToken::new();
    let slow = (|_: Attempt| async {
        tokio::time::sleep(6 * SEC).await;
        Err::<(), _>("timeout")
    })
    .retry(policy.clone())
    .cancel_on(cancel.clone());
    let slow = tokio::spawn(slow.into_future());
    tokio::task::yield_now().await;
    // ...the breaker opens meanwhile, and the break ends before the slow
    // call's attempt fails: its retry is the half-open probe.
    for _ in 0..10 {
        breaker.record(steadfast::control::Outcome::RetryableFailure);
    }
    tokio::time::sleep(6 * SEC + Duration::from_millis(1)).await;
    let snap = breaker.snapshot();
    assert_eq!((snap.state, snap.probes), (BreakerState::HalfOpen, 1));
    cancel.cancel(); // during its 10 s wait
    let err = slow.await.expect("no panic").unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(breaker.snapshot().probes, 0);
    assert!(
        breaker.admit().is_ok(),
        "the slot is free for the next caller"
    );
}

/// The hedger: copy 1 asks `admit`, every hedge `allow_retry`; in
/// half-open with one probe, the hedge is refused and only the probe goes.
#[tokio::test(start_paused = true)]
async fn hedges_count_as_attempts() {
    let breaker = Arc::new(settings().build_with_clock(TokioClock).expect("valid"));
    let hedging = HedgePolicy::builder(Duration::from_millis(10))
        .max_attempts(3)
        .control(breaker.clone())
        .build()
        .expect("valid");
    for _ in 0..10 {
        breaker.record(steadfast::control::Outcome::RetryableFailure);
    }
    let sent = Arc::new(AtomicU32::new(0));
    let op = |sent: Arc<AtomicU32>| {
        move |_: Attempt| {
            let sent = sent.clone();
            async move {
                sent.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok::<_, std::io::Error>("ok")
            }
        }
    };
    let err = op(sent.clone()).hedge(&hedging).await.unwrap_err();
    assert_eq!(err.reason(), StopReason::Throttled);
    assert_eq!(sent.load(Ordering::SeqCst), 0);
    tokio::time::advance(5 * SEC).await;
    assert_eq!(
        op(sent.clone()).hedge(&hedging).await.expect("the probe"),
        "ok"
    );
    assert_eq!(sent.load(Ordering::SeqCst), 1, "the hedges were refused");
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A breaker, a retry budget and the A6 token bucket on one policy.
#[test]
fn composes_with_a_budget_and_a_token_bucket() {
    let clock = VirtualClock::new();
    let breaker = Arc::new(settings().build_with_clock(clock.clone()).expect("valid"));
    let budget = Arc::new(
        RetryBudget::builder()
            .percent(50.0)
            .min_per_sec(0)
            .build_with_clock(clock.clone())
            .expect("valid"),
    );
    let bucket = Arc::new(TokenBucket::builder().max_tokens(4).build().expect("valid"));
    let all: Arc<dyn RetryControl> = Arc::new(AllOf::new(vec![
        breaker.clone(),
        budget.clone(),
        bucket.clone(),
    ]));
    let policy = policy(all.clone());
    let mut sent = 0;
    for _ in 0..12 {
        let _ = (|_: Attempt| {
            sent += 1;
            Err::<(), _>("down")
        })
        .retry_blocking(&policy)
        .clock(clock.clone())
        .call();
    }
    // The budget refuses call 1's retry (half a retry deposited), the
    // bucket every later one (2 tokens of 4 left after two failures); the
    // breaker sees its 10th failed attempt in call 10 and refuses calls
    // 11 and 12 whole, before the budget is asked for a deposit.
    assert_eq!(sent, 10);
    assert_eq!(breaker.state(), BreakerState::Open);
    let snap = budget.snapshot();
    assert_eq!(snap.requests, 10, "refused calls deposited nothing");
    let err = (|_: Attempt| Ok::<_, &str>(()))
        .retry_blocking(&policy)
        .clock(clock.clone())
        .call()
        .unwrap_err();
    assert_eq!(err.refused_by(), Some("inventory"));
    assert_eq!(err.retry_after(), all.retry_after("inventory"));
    // Half-open: the probe is granted by the breaker, then the budget or the
    // bucket refuses a retry; the breaker gets its slot back.
    clock.advance(5 * SEC);
    assert!(breaker.allow_retry().is_ok());
    breaker.refund(steadfast::control::Grant::Retry);
    assert!(all.allow_retry().is_err(), "the bucket is still below half");
    assert_eq!(breaker.snapshot().probes, 0);
}

/// A clock that counts its readings.
#[derive(Debug, Clone, Default)]
struct Counting {
    clock: VirtualClock,
    reads: Arc<AtomicUsize>,
}

impl Clock for Counting {
    fn now(&self) -> Instant {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.clock.now()
    }
    fn sleep_blocking(&self, duration: Duration) {
        self.clock.sleep_blocking(duration);
    }
}

#[test]
fn only_a_slow_call_threshold_makes_the_policy_time_attempts() {
    // A count window and no slow calls: a successful call reads no clock.
    let clock = Counting::default();
    let breaker = Arc::new(settings().build_with_clock(clock.clone()).expect("valid"));
    let plain = policy(breaker);
    let before = clock.reads.load(Ordering::SeqCst);
    (|_: Attempt| Ok::<_, &str>(()))
        .retry_blocking(&plain)
        .clock(clock.clone())
        .call()
        .expect("ok");
    assert_eq!(clock.reads.load(Ordering::SeqCst), before);

    // With a slow-call threshold the policy times every attempt, and slow
    // successes open the breaker.
    let breaker = Arc::new(
        settings()
            .slow_call(SEC)
            .build_with_clock(clock.clone())
            .expect("valid"),
    );
    let timed = policy(breaker.clone());
    for _ in 0..10 {
        (|_: Attempt| {
            clock.clock.advance(2 * SEC);
            Ok::<_, &str>(())
        })
        .retry_blocking(&timed)
        .clock(clock.clone())
        .call()
        .expect("a slow success is still a success for the caller");
    }
    assert_eq!(breaker.state(), BreakerState::Open);
}
