//! The lean path: a success reads no clock and draws no delay, and the async
//! future stays small.

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::call::Attempt;
use crate::clock::VirtualClock;
use crate::retry::{BlockingRetryable, Retryable};

#[cfg(all(feature = "tokio", target_pointer_width = "64"))]
#[test]
fn the_async_future_stays_small() {
    // The running stage lives behind one pointer: the future is the
    // operation's own future plus the options (policy, cancel registration,
    // name, deadline) and the lean first attempt's slot (one word: a lean
    // policy has no endpoint set, so no pick), whatever the clock's timer
    // or the hook's future.
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

impl crate::clock::AsyncClock for CountingClock {
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
