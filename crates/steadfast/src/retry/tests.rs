//! Executor tests, all on virtual time: `VirtualClock` for the blocking
//! executor, tokio's paused clock for the async one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use std::future::IntoFuture;

use super::{BlockingRetryable, Notice, Retryable};
#[cfg(feature = "tokio")]
use crate::clock::TokioClock;
use crate::clock::{Clock, VirtualClock};
use crate::{
    Attempt, CancelToken, Outcome, Refusal, RetryControl, RetryPolicy, Rng, Schedule,
    ScheduleState, StopReason, Verdict,
};

/// A schedule that hands out fixed delays, then runs out.
#[derive(Debug, Clone)]
struct Fixed(Vec<Duration>);

impl Schedule for Fixed {
    fn next_delay(&self, state: &mut ScheduleState, _: &mut Rng) -> Option<Duration> {
        let d = *self.0.get(state.retries as usize)?;
        state.record(d);
        Some(d)
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn policy(attempts: u32, delays: &[u64]) -> RetryPolicy<Fixed> {
    RetryPolicy::with_schedule(Fixed(delays.iter().map(|&s| secs(s)).collect()))
        .max_attempts(attempts)
        .build()
        .unwrap()
}

#[test]
fn attempts_happen_at_the_scheduled_instants() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let mut times = Vec::new();
    let result = (|a: Attempt| {
        times.push((a.number, clock.now() - t0));
        if a.number < 4 { Err("down") } else { Ok("up") }
    })
    .retry_blocking(policy(5, &[1, 2, 4, 8]))
    .clock(clock.clone())
    .call();
    assert_eq!(result, Ok("up"));
    assert_eq!(
        times,
        [(1, secs(0)), (2, secs(1)), (3, secs(3)), (4, secs(7))]
    );
}

#[test]
fn max_attempts_counts_the_first() {
    let clock = VirtualClock::new();
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        Err::<(), _>("down")
    })
    .retry_blocking(policy(3, &[1, 1, 1, 1, 1]))
    .clock(clock)
    .call()
    .unwrap_err();
    assert_eq!(calls, 3);
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.last_error(), Some(&"down"));
}

#[test]
fn one_attempt_means_no_retry() {
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(policy(1, &[1]))
        .clock(VirtualClock::new())
        .call()
        .unwrap_err();
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.reason(), StopReason::Exhausted);
}

#[test]
fn a_schedule_that_runs_out_exhausts_the_call() {
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(policy(10, &[1, 1]))
        .clock(VirtualClock::new())
        .call()
        .unwrap_err();
    assert_eq!(err.attempts(), 3);
    assert_eq!(err.reason(), StopReason::Exhausted);
}

#[test]
fn a_two_hour_backoff_under_a_one_hour_deadline_is_never_slept() {
    let clock = VirtualClock::new();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(7200)]))
        .max_attempts(5)
        .max_delay(secs(10_000))
        .max_elapsed(secs(3600))
        .build()
        .unwrap();
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .clock(clock.clone())
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.attempts(), 1);
    assert_eq!(
        clock.elapsed(),
        Duration::ZERO,
        "the long sleep was never taken"
    );
}

#[test]
fn no_sleep_ends_past_the_deadline() {
    // Waits of 10 s under a 25 s limit: attempts at 0, 10, 20; the next wait
    // would end at 30 > 25, so the call stops at 20 s without sleeping.
    let clock = VirtualClock::new();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(10); 10]))
        .max_attempts(10)
        .max_elapsed(secs(25))
        .build()
        .unwrap();
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .clock(clock.clone())
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.attempts(), 3);
    assert_eq!(clock.elapsed(), secs(20));
    assert_eq!(err.elapsed(), secs(20));
}

#[test]
fn the_attempt_sees_its_deadline() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 3]))
        .max_attempts(3)
        .max_elapsed(secs(10))
        .attempt_timeout(secs(4))
        .build()
        .unwrap();
    let mut seen = Vec::new();
    let _ = (|a: Attempt| {
        seen.push(a.deadline.map(|d| d.instant() - t0));
        Err::<(), _>(())
    })
    .retry_blocking(&policy)
    .clock(clock)
    .call();
    // 4 s per attempt, but never past the call's 10 s: attempts at 0, 1, 2 s.
    assert_eq!(seen, [Some(secs(4)), Some(secs(5)), Some(secs(6))]);
}

#[test]
fn server_hints_are_honoured_and_clamped() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(4)
        .max_delay(secs(30))
        .build()
        .unwrap();
    let mut times = Vec::new();
    let result = (|a: Attempt| {
        times.push(clock.now() - t0);
        Err::<(), u64>(match a.number {
            1 => 5,            // "retry after 5 s"
            2 => 86_400 * 365, // a hostile year
            _ => 0,            // no hint: the schedule
        })
    })
    .retry_blocking(&policy)
    .classify(|r: &Result<(), u64>| match r {
        Err(0) => Verdict::Retry,
        Err(s) => Verdict::RetryAfter(secs(*s)),
        Ok(()) => Verdict::Success,
    })
    .clock(clock.clone())
    .call();
    assert!(result.is_err());
    assert_eq!(times, [secs(0), secs(5), secs(35), secs(36)]);
}

#[test]
fn a_hint_past_the_deadline_stops_at_once() {
    let clock = VirtualClock::new();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(4)
        .max_elapsed(secs(10))
        .build()
        .unwrap();
    let err = (|_: Attempt| Err::<(), _>("busy"))
        .retry_blocking(&policy)
        .classify(|_: &Result<(), &str>| Verdict::RetryAfter(secs(60)))
        .clock(clock.clone())
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.attempts(), 1);
    assert_eq!(clock.elapsed(), Duration::ZERO);
}

#[test]
fn a_permanent_error_stops_at_once() {
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        Err::<(), _>("forbidden")
    })
    .retry_blocking(policy(5, &[1; 5]))
    .when(|e: &&str| *e != "forbidden")
    .clock(VirtualClock::new())
    .call()
    .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(err.reason(), StopReason::Permanent);
}

#[test]
fn a_retried_ok_value_is_returned_when_attempts_run_out() {
    let result = (|_: Attempt| Ok::<u16, ()>(503))
        .retry_blocking(policy(3, &[1; 5]))
        .classify(|r: &Result<u16, ()>| match r {
            Ok(503) => Verdict::Retry,
            _ => Verdict::Success,
        })
        .clock(VirtualClock::new())
        .call();
    assert_eq!(result, Ok(503));
}

#[test]
fn notify_sees_attempt_error_and_delay() {
    let mut seen = Vec::new();
    let _ = (|a: Attempt| Err::<(), _>(a.number * 10))
        .retry_blocking(policy(3, &[1, 2]))
        .notify(|n: &Notice<u32>| {
            seen.push((n.attempt, n.error.copied(), n.wait));
        })
        .clock(VirtualClock::new())
        .call();
    assert_eq!(seen, [(1, Some(10), secs(1)), (2, Some(20), secs(2))]);
}

#[test]
fn the_error_explains_itself() {
    let clock = VirtualClock::new();
    let err = (|_: Attempt| Err::<(), _>(std::io::Error::other("connection refused")))
        .retry_blocking(policy(3, &[1, 2]))
        .clock(clock)
        .name("fetch_user")
        .call()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "fetch_user failed after 3 attempts in 3.0s (attempts exhausted): connection refused"
    );
    let source = std::error::Error::source(&err).unwrap();
    assert_eq!(source.to_string(), "connection refused");
    let unnamed = (|_: Attempt| Err::<(), _>("x"))
        .retry_blocking(policy(1, &[]))
        .clock(VirtualClock::new())
        .call()
        .unwrap_err();
    assert_eq!(
        unnamed.to_string(),
        "operation failed after 1 attempt in 0ms (attempts exhausted): x"
    );
}

/// A control that admits everything and allows `n` retries.
#[derive(Debug)]
struct Allow(AtomicU32, AtomicU32);

impl RetryControl for Allow {
    fn record(&self, outcome: Outcome) {
        if outcome == Outcome::RetryableFailure {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn allow_retry(&self) -> Result<(), Refusal> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .map(|_| ())
            .map_err(|_| Refusal { by: "test budget" })
    }
}

#[test]
fn a_control_can_refuse_retries() {
    let control = Arc::new(Allow(AtomicU32::new(1), AtomicU32::new(0)));
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(5)
        .control(control.clone())
        .build()
        .unwrap();
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .clock(VirtualClock::new())
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Throttled);
    assert_eq!(err.refused_by(), Some("test budget"));
    assert_eq!(err.attempts(), 2);
    assert_eq!(
        control.1.load(Ordering::Relaxed),
        2,
        "both failures were recorded"
    );
    assert!(err.to_string().contains("retry refused by test budget"));
}

#[test]
fn stop_sending_stops_a_retry_at_once_and_the_control_counts_it() {
    let control = Arc::new(Allow(AtomicU32::new(5), AtomicU32::new(0)));
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(5)
        .control(control.clone())
        .build()
        .unwrap();
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        Err::<(), _>("pushback: do not retry")
    })
    .retry_blocking(&policy)
    .classify(|_: &Result<(), &str>| Verdict::StopSending)
    .clock(VirtualClock::new())
    .call()
    .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(err.reason(), StopReason::Permanent);
    assert_eq!(err.last_error(), Some(&"pushback: do not retry"));
    assert_eq!(control.1.load(Ordering::Relaxed), 1, "a failure, counted");
    // `Stop` is final too, but the control does not hear it as a failure.
    let _ = (|_: Attempt| Err::<(), _>("bad request"))
        .retry_blocking(&policy)
        .classify(|_: &Result<(), &str>| Verdict::Stop)
        .clock(VirtualClock::new())
        .call();
    assert_eq!(control.1.load(Ordering::Relaxed), 1);
}

#[test]
fn a_token_cancelled_before_the_call_stops_it_before_any_attempt() {
    let token = CancelToken::new();
    token.cancel();
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        Ok::<_, &str>(())
    })
    .retry_blocking(policy(5, &[1; 5]))
    .cancel_on(token)
    .clock(VirtualClock::new())
    .call()
    .unwrap_err();
    assert_eq!(calls, 0);
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 0);
}

/// A call handed its first attempt's outcome, then cancelled before the
/// policy decided on it, counts that attempt and keeps its error.
#[test]
fn a_resumed_call_cancelled_at_once_counts_the_attempt_it_was_given() {
    let token = CancelToken::new();
    token.cancel();
    let err = futures::executor::block_on(
        (|_: Attempt| std::future::ready(Ok::<u32, &str>(2)))
            .retry(policy(5, &[1; 5]))
            .cancel_on(token)
            .clock(VirtualClock::new())
            .after_first_attempt(Err("refused"), Verdict::Retry),
    )
    .unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.last_error(), Some(&"refused"));
}

#[test]
fn a_cancelled_token_stops_before_the_next_attempt() {
    let token = CancelToken::new();
    let t = token.clone();
    let mut calls = 0;
    let err = (|_: Attempt| {
        calls += 1;
        t.cancel();
        Err::<(), _>("down")
    })
    .retry_blocking(policy(5, &[1; 5]))
    .cancel_on(token)
    .clock(VirtualClock::new())
    .call()
    .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(err.reason(), StopReason::Cancelled);
}

#[test]
fn blocking_cancel_mid_sleep_wakes_promptly() {
    // Real clock, real thread: a one-hour wait cut short by a cancel from
    // another thread. No timing assertion: the test would hang if it failed.
    let token = CancelToken::new();
    let t = token.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        t.cancel();
    });
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(policy(5, &[3600; 5]))
        .cancel_on(token)
        .call()
        .unwrap_err();
    canceller.join().unwrap();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 1);
}

#[test]
fn cancellation_after_the_deadline_reports_deadline() {
    let clock = VirtualClock::new();
    let token = CancelToken::new();
    let t = token.clone();
    let c = clock.clone();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(5)
        .max_elapsed(secs(10))
        .build()
        .unwrap();
    let err = (|_: Attempt| {
        c.sleep_blocking(secs(11)); // the attempt overran the deadline
        t.cancel(); // and whoever waited gave up
        Err::<(), _>("slow")
    })
    .retry_blocking(&policy)
    .cancel_on(token)
    .clock(clock)
    .call()
    .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
}

#[test]
fn a_zero_attempt_policy_is_a_config_error() {
    let err = RetryPolicy::with_schedule(Fixed(vec![]))
        .max_attempts(0)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "max_attempts");
}

// ---- async executor, on tokio's paused clock ----

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_attempts_happen_at_the_scheduled_instants() {
    let t0 = TokioClock.now();
    let times = std::sync::Mutex::new(Vec::new());
    let result = (|a: Attempt| {
        times.lock().unwrap().push(TokioClock.now() - t0);
        async move {
            if a.number < 3 {
                Err("down")
            } else {
                Ok(a.number)
            }
        }
    })
    .retry(policy(5, &[1, 2, 4]))
    .await;
    assert_eq!(result, Ok(3));
    assert_eq!(*times.lock().unwrap(), [secs(0), secs(1), secs(3)]);
}

/// Cancels `token` after `delay` on tokio's clock; the task returns the
/// instant of the cancel.
#[cfg(feature = "tokio")]
fn cancel_after(token: &CancelToken, delay: Duration) -> tokio::task::JoinHandle<Instant> {
    let token = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        token.cancel();
        TokioClock.now()
    })
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_cancel_mid_sleep_returns_in_the_same_instant() {
    let token = CancelToken::new();
    let policy = policy(5, &[3600; 5]);
    let fut = (|_: Attempt| async { Err::<(), _>("down") })
        .retry(&policy)
        .cancel_on(token.clone())
        .into_future();
    let handle = cancel_after(&token, secs(10));
    let err = fut.await.unwrap_err();
    let returned_at = TokioClock.now();
    let cancelled_at = handle.await.unwrap();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(
        returned_at, cancelled_at,
        "stopped at the virtual instant of the cancel"
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_cancel_during_the_first_attempt_stops_at_once() {
    // A lean call with a token: its first attempt runs without any
    // per-call state, and a cancel still ends it promptly.
    let token = CancelToken::new();
    let policy = policy(5, &[1; 5]);
    let fut = (|_: Attempt| async {
        tokio::time::sleep(secs(3600)).await;
        Ok::<_, &str>(())
    })
    .retry(&policy)
    .cancel_on(token.clone())
    .into_future();
    let handle = cancel_after(&token, secs(10));
    let err = fut.await.unwrap_err();
    let returned_at = TokioClock.now();
    assert_eq!(returned_at, handle.await.unwrap());
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 1, "the abandoned attempt counts");
    assert!(err.last_error().is_none());
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_a_cancelled_token_stops_before_the_first_attempt() {
    let token = CancelToken::new();
    token.cancel();
    let calls = AtomicU32::new(0);
    let err = (|_: Attempt| {
        calls.fetch_add(1, Ordering::Relaxed);
        async { Ok::<_, &str>(()) }
    })
    .retry(policy(5, &[1; 5]))
    .cancel_on(token)
    .await
    .unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 0);
    assert_eq!(calls.load(Ordering::Relaxed), 0, "the operation never ran");
}

#[cfg(all(feature = "tokio", target_pointer_width = "64"))]
#[test]
fn the_async_future_stays_small() {
    // The running stage lives behind one pointer: the future is the
    // operation's own future plus the options (policy, cancel registration,
    // name, deadline), whatever the clock's timer or the hook's future.
    let policy = policy(5, &[1; 5]);
    let op = |_: Attempt| async { Ok::<u64, std::io::Error>(1) };
    let op_future = std::mem::size_of_val(&op(Attempt::new(1)));
    let fut = op.retry(&policy).into_future();
    let size = std::mem::size_of_val(&fut);
    assert!(
        size <= op_future + 96,
        "{size} bytes around a {op_future}-byte operation future"
    );
}

#[cfg(feature = "tokio")]
#[tokio::test]
#[should_panic(expected = "polled after it completed")]
async fn async_polling_after_completion_panics_clearly() {
    use std::future::Future;
    let policy = policy(5, &[1; 5]);
    let mut fut = std::pin::pin!(
        (|_: Attempt| async { Ok::<_, &str>(1) })
            .retry(&policy)
            .into_future()
    );
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_ready());
    let _ = fut.as_mut().poll(&mut cx);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_attempt_timeout_drops_the_attempt_and_retries() {
    let t0 = TokioClock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(3)
        .attempt_timeout(secs(2))
        .build()
        .unwrap();
    let result = (|a: Attempt| async move {
        if a.number < 3 {
            std::future::pending::<()>().await; // hangs
        }
        Ok::<_, ()>(a.number)
    })
    .retry(&policy)
    .await;
    assert_eq!(result, Ok(3));
    // two timeouts of 2 s, two waits of 1 s
    assert_eq!(TokioClock.now() - t0, secs(6));
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_deadline_cuts_a_hanging_attempt() {
    let t0 = TokioClock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 5]))
        .max_attempts(3)
        .max_elapsed(secs(5))
        .build()
        .unwrap();
    let err = (|_: Attempt| async { std::future::pending::<Result<(), &str>>().await })
        .retry(&policy)
        .name("hang")
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert!(err.timed_out());
    assert_eq!(TokioClock.now() - t0, secs(5));
    assert_eq!(
        err.to_string(),
        "hang failed after 1 attempt in 5.0s (deadline exceeded): attempt timed out"
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn async_notify_hook_is_awaited_before_the_sleep() {
    let t0 = TokioClock.now();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let l = log.clone();
    let result = (|a: Attempt| async move { if a.is_first() { Err("x") } else { Ok(()) } })
        .retry(policy(2, &[1]))
        .notify_async(move |n: &Notice<&str>| {
            let (attempt, delay) = (n.attempt, n.wait);
            let l = l.clone();
            async move {
                tokio::time::sleep(secs(10)).await; // a slow hook
                l.lock().unwrap().push((attempt, delay));
            }
        })
        .await;
    assert_eq!(result, Ok(()));
    assert_eq!(*log.lock().unwrap(), [(1, secs(1))]);
    assert_eq!(TokioClock.now() - t0, secs(11));
}

#[test]
fn dropping_the_future_drops_the_attempt() {
    struct Live(Arc<AtomicU32>);
    impl Drop for Live {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let live = Arc::new(AtomicU32::new(0));
    let l = live.clone();
    let policy = policy(3, &[1, 1]);
    let mut fut = Box::pin(
        (move |_: Attempt| {
            l.fetch_add(1, Ordering::SeqCst);
            let guard = Live(l.clone());
            async move {
                let _guard = guard;
                std::future::pending::<Result<(), ()>>().await
            }
        })
        .retry(&policy)
        .clock(VirtualClock::manual())
        .into_future(),
    );
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(live.load(Ordering::SeqCst), 1);
    drop(fut);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn virtual_clock_async_executor_runs_without_a_runtime() {
    let clock = VirtualClock::new();
    let t0: Instant = clock.now();
    let result = futures::executor::block_on(
        (|a: Attempt| async move { if a.number < 3 { Err(()) } else { Ok(a.number) } })
            .retry(policy(3, &[5, 5]))
            .clock(clock.clone())
            .into_future(),
    );
    assert_eq!(result, Ok(3));
    assert_eq!(clock.now() - t0, secs(10));
}

/// A clock that counts how often it is read, around a virtual clock.
#[derive(Debug, Clone, Default)]
struct CountingClock {
    inner: VirtualClock,
    reads: Arc<AtomicU32>,
}

impl Clock for CountingClock {
    fn now(&self) -> Instant {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.now()
    }
    fn sleep_blocking(&self, d: Duration) {
        self.inner.sleep_blocking(d);
    }
}

impl crate::AsyncClock for CountingClock {
    type Sleep = crate::clock::VirtualSleep;
    fn sleep(&self, d: Duration) -> Self::Sleep {
        self.inner.sleep(d)
    }
}

/// A schedule that counts its draws.
#[derive(Debug, Default)]
struct CountingSchedule(AtomicU32);

impl Schedule for CountingSchedule {
    fn next_delay(&self, state: &mut ScheduleState, _: &mut Rng) -> Option<Duration> {
        self.0.fetch_add(1, Ordering::SeqCst);
        state.retries += 1;
        Some(secs(1))
    }
}

#[test]
fn the_success_path_reads_no_clock_and_draws_nothing() {
    let clock = CountingClock::default();
    let policy = RetryPolicy::with_schedule(CountingSchedule::default())
        .max_attempts(3)
        .build()
        .unwrap();
    let r = (|_: Attempt| Ok::<_, ()>(1))
        .retry_blocking(&policy)
        .clock(clock.clone())
        .call();
    assert_eq!(r, Ok(1));
    let r = futures::executor::block_on(
        (|_: Attempt| async { Ok::<_, ()>(2) })
            .retry(&policy)
            .clock(clock.clone())
            .into_future(),
    );
    assert_eq!(r, Ok(2));
    assert_eq!(clock.reads.load(Ordering::SeqCst), 0, "no clock read");
    assert_eq!(
        policy.schedule().0.load(Ordering::SeqCst),
        0,
        "no delay drawn"
    );

    // One failure reads the clock and draws once.
    let r = (|a: Attempt| if a.is_first() { Err(()) } else { Ok(3) })
        .retry_blocking(&policy)
        .clock(clock.clone())
        .call();
    assert_eq!(r, Ok(3));
    assert!(clock.reads.load(Ordering::SeqCst) >= 1);
    assert_eq!(policy.schedule().0.load(Ordering::SeqCst), 1);
}

#[test]
fn the_ambient_deadline_bounds_every_call_in_its_scope() {
    let clock = VirtualClock::new();
    let ambient = crate::Deadline::after(clock.now(), secs(25));
    let err = crate::deadline::scope(ambient, || {
        (|_: Attempt| Err::<(), _>("down"))
            .retry_blocking(policy(10, &[10; 10]))
            .clock(clock.clone())
            .call()
            .unwrap_err()
    });
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(clock.elapsed(), secs(20));
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn the_ambient_deadline_reaches_an_async_call_and_its_attempts() {
    use crate::deadline::WithDeadlineExt;
    let t0 = TokioClock.now();
    let ambient = crate::Deadline::after(t0, secs(25));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let err = async move {
        (move |a: Attempt| {
            s.lock().unwrap().push(a.deadline);
            async { Err::<(), _>("down") }
        })
        .retry(policy(10, &[10; 10]))
        .await
        .unwrap_err()
    }
    .with_deadline(ambient)
    .await;
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(TokioClock.now() - t0, secs(20));
    assert!(seen.lock().unwrap().iter().all(|d| *d == Some(ambient)));
}

#[test]
fn each_attempt_runs_under_its_own_deadline() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1); 3]))
        .max_attempts(2)
        .max_elapsed(secs(10))
        .attempt_timeout(secs(4))
        .build()
        .unwrap();
    let mut ambient = Vec::new();
    let _ = (|a: Attempt| {
        assert_eq!(crate::deadline::current(), a.deadline);
        ambient.push(crate::deadline::current().map(|d| d.instant() - t0));
        Err::<(), _>(())
    })
    .retry_blocking(&policy)
    .clock(clock)
    .call();
    assert_eq!(ambient, [Some(secs(4)), Some(secs(5))]);
    assert_eq!(
        crate::deadline::current(),
        None,
        "the scope ends with the attempt"
    );
}

#[test]
fn an_async_attempt_sees_its_deadline_as_the_ambient_one() {
    let clock = VirtualClock::new();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1)]))
        .max_attempts(2)
        .attempt_timeout(secs(3))
        .build()
        .unwrap();
    let result = futures::executor::block_on(
        (|a: Attempt| async move {
            Ok::<_, ()>(crate::deadline::current() == a.deadline && a.deadline.is_some())
        })
        .retry(&policy)
        .clock(clock)
        .into_future(),
    );
    assert_eq!(result, Ok(true));
}

/// A control that grants every retry and counts grants and refunds.
#[derive(Debug, Default)]
struct Ledger {
    granted: AtomicU32,
    refunded: AtomicU32,
}

impl RetryControl for Ledger {
    fn record(&self, _: Outcome) {}
    fn allow_retry(&self) -> Result<(), Refusal> {
        self.granted.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn refund(&self, grant: crate::control::Grant) {
        assert_eq!(grant, crate::control::Grant::Retry);
        self.refunded.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_retry_cancelled_before_it_runs_is_refunded() {
    let ledger = Arc::new(Ledger::default());
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(3600); 5]))
        .max_attempts(5)
        .control(ledger.clone())
        .build()
        .unwrap();
    let token = CancelToken::new();
    let t = token.clone();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        t.cancel();
    });
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .cancel_on(token)
        .call()
        .unwrap_err();
    canceller.join().unwrap();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(ledger.granted.load(Ordering::SeqCst), 1);
    assert_eq!(
        ledger.refunded.load(Ordering::SeqCst),
        1,
        "the unused grant went back"
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_async_retry_cancelled_mid_sleep_is_refunded_but_a_used_one_is_not() {
    let ledger = Arc::new(Ledger::default());
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1), secs(3600)]))
        .max_attempts(5)
        .control(ledger.clone())
        .build()
        .unwrap();
    let token = CancelToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(secs(60)).await;
        t.cancel();
    });
    let err = (|_: Attempt| async { Err::<(), _>("down") })
        .retry(&policy)
        .cancel_on(token)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!(err.attempts(), 2);
    // Two grants: the first was used by attempt 2, the second was pending
    // in the one-hour wait when the call was cancelled.
    assert_eq!(ledger.granted.load(Ordering::SeqCst), 2);
    assert_eq!(ledger.refunded.load(Ordering::SeqCst), 1);
}

/// The operation makes each attempt's future with the attempt's deadline as
/// the ambient one, so code that reads it before the future is polled (a
/// `tower::Service::call`) sees the attempt's deadline, not the call's.
#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_attempt_is_made_with_its_deadline_ambient() {
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1)]))
        .max_attempts(2)
        .attempt_timeout(secs(5))
        .max_elapsed(secs(60))
        .build()
        .unwrap();
    let start = TokioClock.now();
    let seen = std::cell::RefCell::new(Vec::new());
    let out = (|a: Attempt| {
        seen.borrow_mut()
            .push((crate::deadline::current(), a.deadline));
        async move {
            if a.is_first() {
                Err("reset")
            } else {
                Ok(a.number)
            }
        }
    })
    .retry(&policy)
    .await;
    assert_eq!(out, Ok(2));
    let seen = seen.into_inner();
    assert_eq!(seen.len(), 2);
    for (i, (ambient, own)) in seen.into_iter().enumerate() {
        assert_eq!(ambient, own, "attempt {}", i + 1);
        // Attempt 1 at 0 s, attempt 2 after the 1 s wait: each gets 5 s.
        let expect = start + secs(5) + secs(i as u64);
        assert_eq!(own.map(crate::Deadline::instant), Some(expect));
    }
}

#[test]
fn the_notice_says_when_and_how_much_time_is_left() {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1), secs(2), secs(4), secs(8)]))
        .max_attempts(10)
        .max_elapsed(secs(10))
        .build()
        .unwrap();
    let mut notices = Vec::new();
    let err = (|_: Attempt| Err::<(), _>("down"))
        .retry_blocking(&policy)
        .clock(clock.clone())
        .notify(|n: &Notice<&str>| {
            notices.push((n.attempt, n.wait, n.time_left, n.at - t0));
        })
        .call()
        .unwrap_err();
    // Waits of 1, 2 and 4 s fit in 10 s; the 8 s one (from t = 7 s) would
    // end past the deadline, so it is never announced nor taken.
    assert_eq!(
        notices,
        [
            (1, secs(1), Some(secs(10)), secs(0)),
            (2, secs(2), Some(secs(9)), secs(1)),
            (3, secs(4), Some(secs(7)), secs(3)),
        ]
    );
    assert!(notices.iter().all(|(_, wait, left, _)| Some(*wait) < *left));
    assert_eq!(err.reason(), StopReason::Deadline);
}

fn retry_503(r: &Result<u16, &str>) -> Verdict {
    match r {
        Ok(503) | Err(_) => Verdict::Retry,
        Ok(_) => Verdict::Success,
    }
}

#[test]
fn a_report_tells_a_success_from_an_ok_value_that_ran_out() {
    // Retried 503s until the attempts are spent: the last one comes back,
    // and the report says retries ran out.
    let report = (|_: Attempt| Ok::<u16, &str>(503))
        .retry_blocking(policy(3, &[1, 2]))
        .classify(retry_503)
        .clock(VirtualClock::new())
        .report()
        .call();
    assert_eq!(report.result.as_ref().ok(), Some(&503));
    assert_eq!(report.stop, Some(StopReason::Exhausted));
    assert!(!report.succeeded());
    assert_eq!((report.attempts, report.waited), (3, secs(3)));

    // A success after two failures.
    let report = (|a: Attempt| if a.number < 3 { Ok(503) } else { Ok(200) })
        .retry_blocking(policy(5, &[1, 2, 4]))
        .classify(retry_503)
        .clock(VirtualClock::new())
        .report()
        .call();
    assert_eq!(report.result.as_ref().ok(), Some(&200));
    assert_eq!(report.stop, None);
    assert!(report.succeeded());
    assert_eq!((report.attempts, report.waited), (3, secs(3)));

    // A success at once: nothing waited.
    let report = (|_: Attempt| Ok::<u16, &str>(200))
        .retry_blocking(policy(5, &[1]))
        .clock(VirtualClock::new())
        .report()
        .call();
    assert_eq!(
        (report.attempts, report.stop, report.waited),
        (1, None, secs(0))
    );
    assert_eq!(report.into_result().ok(), Some(200));

    // A failure: the report's stop is the error's reason.
    let report = (|_: Attempt| Err::<u16, _>("forbidden"))
        .retry_blocking(policy(5, &[1]))
        .classify(|_: &Result<u16, &str>| Verdict::Stop)
        .clock(VirtualClock::new())
        .report()
        .call();
    assert_eq!(report.stop, Some(StopReason::Permanent));
    assert_eq!(report.result.unwrap_err().reason(), StopReason::Permanent);
}

#[test]
fn a_report_of_a_refused_call_counts_no_attempt() {
    #[derive(Debug)]
    struct Shut;
    impl RetryControl for Shut {
        fn admit(&self) -> Result<(), Refusal> {
            Err(Refusal { by: "breaker" })
        }
        fn record(&self, _: Outcome) {}
        fn allow_retry(&self) -> Result<(), Refusal> {
            Ok(())
        }
    }
    let policy = RetryPolicy::with_schedule(Fixed(vec![secs(1)]))
        .max_attempts(3)
        .control(Arc::new(Shut))
        .build()
        .unwrap();
    let report = (|_: Attempt| Ok::<u16, &str>(200))
        .retry_blocking(&policy)
        .clock(VirtualClock::new())
        .report()
        .call();
    assert_eq!(
        (report.attempts, report.stop),
        (0, Some(StopReason::Throttled))
    );
    let report = futures::executor::block_on(
        (|_: Attempt| std::future::ready(Ok::<u16, &str>(200)))
            .retry(&policy)
            .clock(VirtualClock::new())
            .report()
            .into_future(),
    );
    assert_eq!(
        (report.attempts, report.stop),
        (0, Some(StopReason::Throttled))
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn an_async_report_says_how_the_call_ended() {
    let t0 = TokioClock.now();
    let report = (|_: Attempt| async { Ok::<u16, &str>(503) })
        .retry(policy(3, &[1, 2]))
        .classify(retry_503)
        .report()
        .await;
    assert_eq!(report.result.as_ref().ok(), Some(&503));
    assert_eq!(report.stop, Some(StopReason::Exhausted));
    assert_eq!((report.attempts, report.waited), (3, secs(3)));
    assert_eq!(TokioClock.now() - t0, secs(3));

    let report = (|a: Attempt| async move { if a.number < 2 { Ok(503) } else { Ok(200) } })
        .retry(policy(3, &[1, 2]))
        .classify(retry_503)
        .report()
        .await;
    assert_eq!(
        (report.attempts, report.stop, report.waited),
        (2, None, secs(1))
    );

    // The lean path, reported: one attempt, no stop.
    let report = (|_: Attempt| async { Ok::<u16, &str>(200) })
        .retry(policy(3, &[1, 2]))
        .report()
        .await;
    assert_eq!(
        (report.attempts, report.stop, report.waited),
        (1, None, secs(0))
    );

    // A deadline that cuts the next wait stops the call as `Deadline`,
    // which the plain result (an `Ok(503)`) cannot say.
    let report = (|_: Attempt| async { Ok::<u16, &str>(503) })
        .retry(policy(5, &[10, 10]))
        .classify(retry_503)
        .deadline(crate::Deadline::after(TokioClock.now(), secs(5)))
        .report()
        .await;
    assert_eq!(report.stop, Some(StopReason::Deadline));
    assert_eq!((report.attempts, report.waited), (1, secs(0)));

    // Cancelled mid-wait.
    let token = CancelToken::new();
    let _cancel = cancel_after(&token, secs(1));
    let report = (|_: Attempt| async { Err::<u16, _>("down") })
        .retry(policy(5, &[10, 10]))
        .cancel_on(token)
        .report()
        .await;
    assert_eq!(report.stop, Some(StopReason::Cancelled));
    assert_eq!((report.attempts, report.waited), (1, secs(10)));
}

proptest::proptest! {
    /// `max_attempts` on the backoff and on the policy: one rule, reported
    /// by `build()`: unset on the policy, the backoff's holds; set, it must
    /// not exceed the backoff's; and a failing call makes exactly that many.
    #[test]
    fn max_attempts_in_two_places_follows_one_rule(
        on_backoff in proptest::option::of(1u32..8),
        on_policy in proptest::option::of(1u32..8),
    ) {
        let mut backoff = crate::Backoff::constant(secs(1));
        if let Some(n) = on_backoff {
            backoff = backoff.max_attempts(n);
        }
        let mut builder = RetryPolicy::builder().backoff(backoff.build().unwrap());
        if let Some(n) = on_policy {
            builder = builder.max_attempts(n);
        }
        let built = builder.build();
        match (on_backoff, on_policy) {
            (Some(b), Some(p)) if p > b => {
                let err = built.unwrap_err();
                proptest::prop_assert_eq!(err.field(), "max_attempts");
                let names_both = format!("{p} (the backoff's: {b})");
                proptest::prop_assert!(err.to_string().contains(&names_both), "{}", err);
            }
            _ => {
                let policy = built.unwrap();
                let expected = on_policy.or(on_backoff).unwrap_or(3);
                proptest::prop_assert_eq!(policy.max_attempts(), expected);
                let err = (|_: Attempt| Err::<(), _>("down"))
                    .retry_blocking(&policy)
                    .clock(VirtualClock::new())
                    .call()
                    .unwrap_err();
                proptest::prop_assert_eq!(err.attempts(), expected);
                proptest::prop_assert_eq!(err.reason(), StopReason::Exhausted);
                // A policy derived from it keeps the rule.
                let once = policy.to_builder().max_attempts(1).build().unwrap();
                proptest::prop_assert_eq!(once.max_attempts(), 1);
            }
        }
    }
}

/// What an attempt of the report property's script answers and how the
/// classifier judges it.
#[derive(Debug, Clone, Copy)]
enum Step {
    Ok200,
    Ok503,
    Err,
    ErrHint(u64),
    Fatal,
    Forbid,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Step::Ok200),
        Just(Step::Ok503),
        Just(Step::Err),
        (0u64..5).prop_map(Step::ErrHint),
        Just(Step::Fatal),
        Just(Step::Forbid),
    ]
}

proptest::proptest! {
    /// The report agrees with what happened, in both executors: its attempts
    /// are the operation's calls, its stop is `None` exactly when the last
    /// outcome was judged a success, its result is the plain executor's, and
    /// its wait is the sum of the waits taken.
    #[test]
    fn a_report_tells_what_happened(
        script in proptest::collection::vec(step(), 1..8),
        attempts in 1u32..8,
        deadline_s in proptest::option::of(1u64..30),
    ) {
        let answer = |n: u32| script[((n - 1) as usize).min(script.len() - 1)];
        let classify = move |r: &Result<u16, (u32, Step)>| match r {
            Ok(200) => Verdict::Success,
            Ok(_) => Verdict::Retry,
            Err((_, Step::ErrHint(s))) => Verdict::RetryAfter(secs(*s)),
            Err((_, Step::Fatal)) => Verdict::Stop,
            Err((_, Step::Forbid)) => Verdict::StopSending,
            Err(_) => Verdict::Retry,
        };
        let op = move |a: Attempt| match answer(a.number) {
            Step::Ok200 => Ok(200),
            Step::Ok503 => Ok(503),
            other => Err((a.number, other)),
        };
        let mut builder = RetryPolicy::with_schedule(Fixed(vec![secs(1), secs(2), secs(4), secs(8), secs(16), secs(32), secs(64)]))
            .max_attempts(attempts);
        if let Some(s) = deadline_s {
            builder = builder.max_elapsed(secs(s));
        }
        let policy = builder.build().unwrap();

        let clock = VirtualClock::new();
        let t0 = clock.now();
        let mut calls = 0u32;
        let mut waits = Duration::ZERO;
        let report = (|a: Attempt| { calls += 1; op(a) })
            .retry_blocking(&policy)
            .classify(classify)
            .notify(|n: &Notice<(u32, Step)>| waits += n.wait)
            .clock(clock.clone())
            .report()
            .call();
        let plain = (|a: Attempt| op(a))
            .retry_blocking(&policy)
            .classify(classify)
            .clock(VirtualClock::new())
            .call();
        proptest::prop_assert_eq!(report.attempts, calls);
        proptest::prop_assert_eq!(report.waited, waits);
        proptest::prop_assert_eq!(clock.now() - t0, waits, "the waits taken are the waits reported");
        let last_succeeded = classify(&op(Attempt::new(calls))) == Verdict::Success;
        proptest::prop_assert_eq!(report.stop.is_none(), last_succeeded);
        proptest::prop_assert_eq!(report.succeeded(), last_succeeded);
        match (&report.result, &plain) {
            (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b),
            (Err(a), Err(b)) => {
                proptest::prop_assert_eq!(a.reason(), b.reason());
                proptest::prop_assert_eq!(Some(a.reason()), report.stop);
                proptest::prop_assert_eq!(a.attempts(), calls);
            }
            _ => proptest::prop_assert!(false, "report {:?} vs plain {:?}", report.result, plain),
        }

        // The async executor reports the same, on a virtual clock.
        let async_report = futures::executor::block_on(
            (|a: Attempt| std::future::ready(op(a)))
                .retry(&policy)
                .classify(classify)
                .clock(VirtualClock::new())
                .report()
                .into_future(),
        );
        proptest::prop_assert_eq!(async_report.attempts, report.attempts);
        proptest::prop_assert_eq!(async_report.stop, report.stop);
        proptest::prop_assert_eq!(async_report.waited, report.waited);

        // So does a call whose first attempt the caller made itself and
        // handed over (what steadfast-tower's retry layer does after a lean
        // first attempt that did not succeed).
        let first = op(Attempt::new(1));
        let verdict = classify(&first);
        if !(verdict == Verdict::Success && first.is_ok()) {
            let resumed = futures::executor::block_on(
                (|a: Attempt| std::future::ready(op(a)))
                    .retry(&policy)
                    .classify(classify)
                    .clock(VirtualClock::new())
                    .report()
                    .after_first_attempt(first, verdict),
            );
            proptest::prop_assert_eq!(resumed.attempts, report.attempts);
            proptest::prop_assert_eq!(resumed.stop, report.stop);
            proptest::prop_assert_eq!(resumed.waited, report.waited);
            proptest::prop_assert_eq!(resumed.result.is_ok(), report.result.is_ok());
        }
    }
}
