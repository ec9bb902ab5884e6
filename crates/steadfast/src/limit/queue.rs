//! The bounded queue of a concurrency limit: attempts that wait for a slot,
//! served in order. Used only once every slot is taken; a slot that is
//! free never touches it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Wake, Waker};
use std::thread::Thread;
use std::time::Duration;

use futures_util::task::AtomicWaker;

use crate::sync::{AtomicU8, AtomicU64, Ordering};

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const ABANDONED: u8 = 2;

/// One attempt waiting for a slot.
#[derive(Debug)]
pub(super) struct Waiter {
    state: AtomicU8,
    waker: AtomicWaker,
}

impl Waiter {
    fn new() -> Self {
        Self {
            state: AtomicU8::new(WAITING),
            waker: AtomicWaker::new(),
        }
    }

    /// Whether a slot was handed to this waiter.
    pub(super) fn granted(&self) -> bool {
        self.state.load(Ordering::Acquire) == GRANTED
    }

    /// Registers the task (or thread) to wake when a slot is handed over.
    pub(super) fn register(&self, waker: &Waker) {
        self.waker.register(waker);
    }
}

/// How an abandoned waiter left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Left {
    /// Before a slot reached it.
    Empty,
    /// With a slot handed over at the last moment, which the caller now
    /// owns and must give back.
    WithSlot,
}

/// The queue: waiters in arrival order, and how many there are (read
/// without the lock by every release, which must hand its slot on only
/// when someone waits).
#[derive(Debug)]
pub(super) struct Queue {
    capacity: usize,
    max_wait: Duration,
    waiters: Mutex<VecDeque<Arc<Waiter>>>,
    len: AtomicU64,
}

impl Queue {
    pub(super) fn new(capacity: usize, max_wait: Duration) -> Self {
        Self {
            capacity,
            max_wait,
            waiters: Mutex::new(VecDeque::with_capacity(capacity.min(1024))),
            len: AtomicU64::new(0),
        }
    }

    /// The longest an attempt may wait in it.
    pub(super) fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Waiters now.
    pub(super) fn len(&self) -> u64 {
        self.len.load(Ordering::SeqCst)
    }

    /// Joins the queue; `None` when it is full.
    pub(super) fn join(&self) -> Option<Arc<Waiter>> {
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if waiters.len() >= self.capacity {
            return None;
        }
        let waiter = Arc::new(Waiter::new());
        waiters.push_back(Arc::clone(&waiter));
        self.len.store(waiters.len() as u64, Ordering::SeqCst);
        Some(waiter)
    }

    /// Leaves the queue (a waiter that timed out or was dropped).
    pub(super) fn leave(&self, waiter: &Arc<Waiter>) -> Left {
        match waiter
            .state
            .compare_exchange(WAITING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
                waiters.retain(|w| !Arc::ptr_eq(w, waiter));
                self.len.store(waiters.len() as u64, Ordering::SeqCst);
                Left::Empty
            }
            Err(_) => Left::WithSlot,
        }
    }

    /// Hands slots to waiters, oldest first, for as long as `take` finds
    /// one free. A waiter that left in the meantime gives its slot back
    /// through `give_back` and the next one is tried.
    pub(super) fn serve(&self, take: impl Fn() -> bool, give_back: impl Fn()) {
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        while !waiters.is_empty() && take() {
            let Some(waiter) = waiters.pop_front() else {
                give_back();
                break;
            };
            match waiter.state.compare_exchange(
                WAITING,
                GRANTED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => waiter.waker.wake(),
                Err(_) => give_back(),
            }
        }
        self.len.store(waiters.len() as u64, Ordering::SeqCst);
    }
}

/// Wakes a blocked thread: the waker of a blocking wait.
#[derive(Debug)]
pub(super) struct ThreadWaker(pub(super) Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}
