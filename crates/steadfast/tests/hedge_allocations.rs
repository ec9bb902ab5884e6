//! Proves what the hedging executor's success path allocates: nothing when
//! the first copy succeeds before the hedging delay, whether it answers on
//! the first poll or after the hedge timer was armed. (The timer itself is
//! the clock's: a clock whose sleep is free is used here, to count only the
//! executor's own work.)
//!
//! A counting global allocator sees every allocation of the process, so this
//! test runs without the parallel test harness (`harness = false`).

#![allow(clippy::print_stdout)] // a harness-less test reports its own result

use std::future::{Future, IntoFuture};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use steadfast::call::HedgeStats;
use steadfast::clock::{AsyncClock, Clock};
use steadfast::{Attempt, CancelToken, HedgePolicy, Hedgeable};

mod counting;

use counting::allocations_during;

/// A clock frozen at one instant whose sleeps never end and cost nothing.
#[derive(Debug, Clone)]
struct Frozen(Instant);

impl Clock for Frozen {
    fn now(&self) -> Instant {
        self.0
    }
    fn sleep_blocking(&self, _: Duration) {}
}

impl AsyncClock for Frozen {
    type Sleep = std::future::Pending<()>;
    fn sleep(&self, _: Duration) -> Self::Sleep {
        std::future::pending()
    }
}

/// Ready on the second poll.
struct YieldOnce(bool, u32);

impl Future for YieldOnce {
    type Output = Result<u32, &'static str>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.0 {
            Poll::Ready(Ok(self.1))
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

fn main() {
    let policy = HedgePolicy::builder(Duration::from_millis(10))
        .max_attempts(3)
        .build()
        .expect("valid policy");
    let shared = Arc::new(policy.clone());
    let clock = Frozen(Instant::now());
    let token = CancelToken::new();
    let mut cx = Context::from_waker(Waker::noop());
    let mut checks = 0;

    // Warm up lazily initialised statics (tracing's callsite registry, ...)
    // and the token's waiter slots (grown once, then reused).
    for _ in 0..3 {
        let fut = (|a: Attempt| YieldOnce(false, a.number))
            .hedge(&policy)
            .clock(clock.clone())
            .cancel_on(token.clone())
            .into_future();
        let mut fut = pin!(fut);
        while fut.as_mut().poll(&mut cx).is_pending() {}
    }

    let n = allocations_during(|| {
        let fut = (|a: Attempt| std::future::ready(Ok::<_, &str>(a.number)))
            .hedge(&policy)
            .clock(clock.clone())
            .into_future();
        assert!(matches!(pin!(fut).poll(&mut cx), Poll::Ready(Ok(1))));
    });
    assert_eq!(n, 0, "first copy ready at once: {n} allocations");
    checks += 1;

    let n = allocations_during(|| {
        let mut sent = 0;
        let fut = (|a: Attempt| YieldOnce(false, a.number))
            .hedge(shared.clone())
            .clock(clock.clone())
            .when(|e: &&str| !e.is_empty())
            .cancel_on(token.clone())
            .name("fetch")
            .on_finish(|s: &HedgeStats| sent = s.sent)
            .into_future();
        let mut fut = pin!(fut);
        assert!(
            fut.as_mut().poll(&mut cx).is_pending(),
            "the timer is armed"
        );
        assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(1))));
        assert_eq!(sent, 1);
    });
    assert_eq!(
        n, 0,
        "first copy pending once, every option: {n} allocations"
    );
    checks += 1;

    // Sending one hedge: the executor's own cost is the `FuturesUnordered`
    // (made once per call that hedges) and one task node per hedge.
    let virtual_clock = steadfast::clock::VirtualClock::manual();
    let mut one_hedge = || {
        let fut = (|a: Attempt| {
            let first = a.is_first();
            async move {
                if first {
                    std::future::pending::<()>().await;
                }
                Ok::<_, &str>(a.number)
            }
        })
        .hedge(&policy)
        .clock(virtual_clock.clone())
        .into_future();
        let mut fut = pin!(fut);
        let mut n = allocations_during(|| assert!(fut.as_mut().poll(&mut cx).is_pending()));
        // Moving virtual time is the test's doing, not the executor's.
        virtual_clock.advance(Duration::from_millis(10));
        n += allocations_during(|| {
            assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Ok(2))));
        });
        n
    };
    let _ = one_hedge(); // warm up the virtual clock's list of sleepers
    let n = one_hedge();
    assert!(n <= 3, "one hedge: {n} allocations");
    println!("hedge_allocations: one hedge costs {n} allocations");
    checks += 1;

    println!("hedge_allocations: {checks} passed, 0 failed");
}
