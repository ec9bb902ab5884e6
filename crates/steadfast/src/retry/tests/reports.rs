//! Reports: how a call ended, attempts and waits, in both executors.

use std::future::IntoFuture;
use std::sync::Arc;

use super::*;
use crate::call::{Attempt, StopReason, Verdict};
use crate::clock::VirtualClock;
use crate::control::{Outcome, Refusal, RetryControl};
use crate::retry::{BlockingRetryable, Notice, Retryable};

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
        .deadline(crate::deadline::Deadline::after(TokioClock.now(), secs(5)))
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
                    .after_first_attempt(first, verdict, crate::policy::gate::Ticket::FREE),
            );
            proptest::prop_assert_eq!(resumed.attempts, report.attempts);
            proptest::prop_assert_eq!(resumed.stop, report.stop);
            proptest::prop_assert_eq!(resumed.waited, report.waited);
            proptest::prop_assert_eq!(resumed.result.is_ok(), report.result.is_ok());
        }
    }
}
