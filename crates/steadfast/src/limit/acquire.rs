//! [`Acquire`]: the future of a slot, through the limit's queue.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::concurrency::ConcurrencyLimit;
use super::permit::Permit;
use super::queue::{Left, Waiter};
use crate::call::LimitRefused;

/// The future of [`ConcurrencyLimit::acquire`]: a slot at once if one is
/// free, else a place in the limit's queue until a slot is handed over; a
/// refusal at once when the limit has no queue or its queue is full.
///
/// It does not time itself: whoever awaits it bounds the wait (the
/// executors race it with their clock for the queue's
/// [`max_wait`](ConcurrencyLimit::max_queue_wait) and the call's deadline)
/// and, when the time is up, calls [`give_up`](Self::give_up). Dropped
/// while queued, it leaves the queue (and gives back a slot handed to it at
/// that very moment).
///
/// ```
/// use std::time::Duration;
/// use steadfast::limit::{ConcurrencyLimit, Signal};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limit = ConcurrencyLimit::fixed(1).queue(8, Duration::from_secs(1)).build()?;
/// let first = limit.acquire().await?;
/// let waiting = tokio::spawn({
///     let limit = limit.clone();
///     async move { limit.acquire().await.map(|p| p.limit().in_flight()) }
/// });
/// tokio::task::yield_now().await; // the second waits in the queue
/// assert_eq!(limit.snapshot().queued, 1);
/// first.finish(Signal::Success); // its slot goes to the waiter
/// assert_eq!(waiting.await?, Ok(1));
/// # Ok(()) }
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Acquire {
    limit: ConcurrencyLimit,
    waiter: Option<Arc<Waiter>>,
}

impl Acquire {
    pub(super) fn new(limit: ConcurrencyLimit) -> Self {
        Self {
            limit,
            waiter: None,
        }
    }

    /// Stops waiting after `waited`: the refusal, or the slot if one was
    /// handed over at the last moment.
    ///
    /// # Errors
    /// The refusal, naming the limit and saying how long it waited.
    pub fn give_up(mut self, waited: Duration) -> Result<Permit, LimitRefused> {
        if let Some(waiter) = self.waiter.take()
            && self.limit.leave(&waiter) == Left::WithSlot
        {
            return Ok(self.limit.handed_over());
        }
        Err(self.limit.refusal(waited))
    }

    /// Whether it waits in the queue (it found every slot taken).
    #[must_use]
    pub fn is_queued(&self) -> bool {
        self.waiter.is_some()
    }
}

impl Future for Acquire {
    type Output = Result<Permit, LimitRefused>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(waiter) = &self.waiter {
            waiter.register(cx.waker());
            if waiter.granted() {
                self.waiter = None;
                return Poll::Ready(Ok(self.limit.handed_over()));
            }
            return Poll::Pending;
        }
        if let Some(permit) = self.limit.try_take() {
            return Poll::Ready(Ok(permit));
        }
        let Some(waiter) = self.limit.join_queue() else {
            return Poll::Ready(Err(self.limit.refusal(Duration::ZERO)));
        };
        waiter.register(cx.waker());
        // A slot freed between the refusal and the join is served now.
        self.limit.serve_queue();
        if waiter.granted() {
            return Poll::Ready(Ok(self.limit.handed_over()));
        }
        self.waiter = Some(waiter);
        Poll::Pending
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        if let Some(waiter) = self.waiter.take()
            && self.limit.leave(&waiter) == Left::WithSlot
        {
            drop(self.limit.handed_over());
        }
    }
}

impl fmt::Debug for Acquire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("limit", &self.limit.name())
            .field("queued", &self.waiter.is_some())
            .finish()
    }
}
