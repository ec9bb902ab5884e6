//! Proves the success path allocates nothing: a call whose first attempt
//! succeeds makes no heap allocation, in either executor, for a lean policy
//! (no control, no time limit). A controlled policy's async call makes
//! exactly one: its running stage.
//!
//! A counting global allocator sees every allocation of the process, so this
//! test runs without the parallel test harness (`harness = false`): nothing
//! else runs while a region is measured.

#![allow(clippy::print_stdout)] // a harness-less test reports its own result

use std::future::{Future, IntoFuture};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use steadfast::backoff::Backoff;
use steadfast::chaos::Chaos;
use steadfast::clock::{SystemClock, TokioClock};
use steadfast::control::TokenBucket;
use steadfast::fallback;
use steadfast::limit::{ConcurrencyLimit, Gradient2};
use steadfast::retry::{BlockingRetryable, Notice, Retryable};
use steadfast::{Attempt, CancelToken, RetryPolicy};

mod counting;

use counting::allocations_during;

fn poll_once<F: Future>(fut: F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(Waker::noop());
    pin!(fut).poll(&mut cx)
}

fn main() {
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::default())
        .build()
        .expect("valid policy");
    let shared = Arc::new(policy.clone());
    let token = CancelToken::new();
    let mut checks = 0;

    // Warm up lazily initialised statics (tracing's callsite registry, ...).
    for _ in 0..3 {
        let _ = (|_: Attempt| Ok::<_, ()>(1)).retry_blocking(&policy).call();
        let _ = poll_once(
            (|_: Attempt| std::future::ready(Ok::<_, ()>(1)))
                .retry(&policy)
                .into_future(),
        );
    }

    let n = allocations_during(|| {
        let r = (|a: Attempt| Ok::<_, &str>(a.number))
            .retry_blocking(&policy)
            .clock(SystemClock)
            .call();
        assert_eq!(r, Ok(1));
    });
    assert_eq!(n, 0, "blocking executor, success path: {n} allocations");
    checks += 1;

    let n = allocations_during(|| {
        let r = (|a: Attempt| Ok::<_, &str>(a.number))
            .retry_blocking(shared.clone())
            .when(|e: &&str| !e.is_empty())
            .notify(|_: &Notice<&str>| {})
            .cancel_on(token.clone())
            .name("fetch")
            .call();
        assert_eq!(r, Ok(1));
    });
    assert_eq!(n, 0, "blocking executor with every option: {n} allocations");
    checks += 1;

    let n = allocations_during(|| {
        let fut = (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
            .retry(&policy)
            .clock(TokioClock)
            .into_future();
        assert!(matches!(poll_once(fut), Poll::Ready(Ok(1))));
    });
    assert_eq!(n, 0, "async executor, success path: {n} allocations");
    checks += 1;

    let n = allocations_during(|| {
        let fut = (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
            .retry(shared.clone())
            .when(|e: &&str| !e.is_empty())
            .notify(|_: &Notice<&str>| {})
            .cancel_on(token.clone())
            .name("fetch")
            .into_future();
        assert!(matches!(poll_once(fut), Poll::Ready(Ok(1))));
    });
    assert_eq!(n, 0, "async executor with every option: {n} allocations");
    checks += 1;

    // A report costs nothing on the success path either.
    let n = allocations_during(|| {
        let report = (|a: Attempt| Ok::<_, &str>(a.number))
            .retry_blocking(&policy)
            .report()
            .call();
        assert_eq!((report.attempts, report.stop), (1, None));
    });
    assert_eq!(n, 0, "blocking executor, reported: {n} allocations");
    checks += 1;
    let n = allocations_during(|| {
        let fut = (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
            .retry(&policy)
            .clock(TokioClock)
            .report()
            .into_future();
        assert!(matches!(poll_once(fut), Poll::Ready(r) if r.succeeded()));
    });
    assert_eq!(n, 0, "async executor, reported: {n} allocations");
    checks += 1;

    // A fallback is the outermost step: a call that succeeds never reaches
    // it, and having one costs nothing; nor does a chaos switched off.
    let n = allocations_during(|| {
        let r = (|a: Attempt| Ok::<_, &str>(a.number))
            .retry_blocking(&policy)
            .fallback(fallback::value(0))
            .call();
        assert_eq!(r, Ok(1));
    });
    assert_eq!(n, 0, "blocking executor with a fallback: {n} allocations");
    checks += 1;
    let n = allocations_during(|| {
        let fut = (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
            .retry(&policy)
            .clock(TokioClock)
            .fallback(fallback::value(0))
            .into_future();
        assert!(matches!(poll_once(fut), Poll::Ready(Ok(1))));
    });
    assert_eq!(n, 0, "async executor with a fallback: {n} allocations");
    checks += 1;
    let off: Chaos<u32, &str> = Chaos::builder()
        .latency(1.0, std::time::Duration::from_millis(5))
        .error(1.0, || "injected")
        .build()
        .expect("valid chaos");
    let n = allocations_during(|| {
        let fut = off
            .wrap(
                |a: Attempt| std::future::ready(Ok::<_, &str>(a.number)),
                TokioClock,
            )
            .retry(&policy)
            .clock(TokioClock)
            .into_future();
        assert!(matches!(poll_once(fut), Poll::Ready(Ok(1))));
    });
    assert_eq!(
        n, 0,
        "async executor through a chaos switched off: {n} allocations"
    );
    checks += 1;

    // A concurrency limit keeps the call lean: its slot is taken and given
    // back without an allocation, fixed or adaptive, in either executor,
    // and a refusal allocates nothing either.
    let fixed = ConcurrencyLimit::fixed(8).build().expect("valid limit");
    let adaptive = ConcurrencyLimit::adaptive(Gradient2::default())
        .build()
        .expect("valid limit");
    for limit in [&fixed, &adaptive] {
        let limited = RetryPolicy::builder()
            .max_attempts(5)
            .concurrency_limit(limit.clone())
            .build()
            .expect("valid policy");
        let n = allocations_during(|| {
            let r = (|a: Attempt| Ok::<_, &str>(a.number))
                .retry_blocking(&limited)
                .call();
            assert_eq!(r, Ok(1));
        });
        assert_eq!(n, 0, "blocking executor, {limit:?}: {n} allocations");
        checks += 1;
        let n = allocations_during(|| {
            let fut = (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
                .retry(&limited)
                .clock(TokioClock)
                .into_future();
            assert!(matches!(poll_once(fut), Poll::Ready(Ok(1))));
        });
        assert_eq!(n, 0, "async executor, {limit:?}: {n} allocations");
        checks += 1;
        assert_eq!(limit.in_flight(), 0);
    }
    let one = ConcurrencyLimit::fixed(1).build().expect("valid limit");
    let held = one.try_acquire().expect("a free slot");
    let full = RetryPolicy::builder()
        .concurrency_limit(one.clone())
        .build()
        .expect("valid policy");
    let n = allocations_during(|| {
        let fut = (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
            .retry(&full)
            .clock(TokioClock)
            .into_future();
        assert!(matches!(poll_once(fut), Poll::Ready(Err(e)) if e.limit_refused().is_some()));
    });
    assert_eq!(
        n, 0,
        "async executor, refused by a full limit: {n} allocations"
    );
    checks += 1;
    drop(held);

    // A policy with a retry control is not lean: the async executor makes
    // its running stage (one allocation) to ask the control and report the
    // outcome. The blocking executor keeps that state on the stack.
    let controlled = RetryPolicy::builder()
        .max_attempts(5)
        .control(Arc::new(
            TokenBucket::builder()
                .max_tokens(10)
                .token_ratio(0.1)
                .build()
                .expect("valid token bucket"),
        ))
        .build()
        .expect("valid policy");
    let n = allocations_during(|| {
        let r = (|a: Attempt| Ok::<_, &str>(a.number))
            .retry_blocking(&controlled)
            .call();
        assert_eq!(r, Ok(1));
    });
    assert_eq!(
        n, 0,
        "blocking executor, controlled policy: {n} allocations"
    );
    checks += 1;
    let n = allocations_during(|| {
        let fut = (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
            .retry(&controlled)
            .clock(TokioClock)
            .into_future();
        assert!(matches!(poll_once(fut), Poll::Ready(Ok(1))));
    });
    assert_eq!(n, 1, "async executor, controlled policy: {n} allocations");
    checks += 1;

    // A rate limit's admission, alone and combined, keyed for a known key.
    let rate = steadfast::rate::RateLimit::builder()
        .quota(steadfast::rate::Quota::per_second(1_000_000).expect("valid"))
        .quota(steadfast::rate::Quota::per_minute(1_000_000).expect("valid"))
        .build()
        .expect("valid limit");
    let keyed = steadfast::rate::KeyedRateLimit::<u64>::builder()
        .quota(steadfast::rate::Quota::per_second(1_000_000).expect("valid"))
        .build()
        .expect("valid limit");
    keyed.check(&7).expect("admitted"); // the key's first call makes its entry
    let n = allocations_during(|| {
        for _ in 0..100 {
            rate.check().expect("admitted");
            keyed.check(&7).expect("admitted");
        }
        let refused = rate.check_n(2_000_000).expect_err("above the burst");
        assert_eq!(refused.retry_after, None);
    });
    assert_eq!(n, 0, "rate limits, admission and refusal: {n} allocations");
    checks += 1;

    // A policy with a rate limit that refuses at once stays lean: a call
    // admitted and answered at once allocates nothing, in either executor.
    let rated = RetryPolicy::builder()
        .rate_limit(rate.clone())
        .build()
        .expect("valid policy");
    assert!(rated.is_lean());
    let _ = (|_: Attempt| Ok::<_, ()>(1)).retry_blocking(&rated).call();
    let n = allocations_during(|| {
        let r = (|a: Attempt| Ok::<_, &str>(a.number))
            .retry_blocking(&rated)
            .call();
        assert_eq!(r, Ok(1));
        let fut = (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
            .retry(&rated)
            .clock(TokioClock)
            .into_future();
        assert!(matches!(poll_once(fut), Poll::Ready(Ok(1))));
    });
    assert_eq!(n, 0, "rate-limited policy, success path: {n} allocations");
    checks += 1;

    println!("success_path_allocations: {checks} passed, 0 failed");
}
