//! A test service that counts what the contract cares about: calls, clones,
//! and attempts still in flight (futures not yet dropped). It checks that
//! every clone is readied before it is called.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

#[derive(Debug, Default)]
struct Shared {
    calls: AtomicUsize,
    live: AtomicUsize,
    services: AtomicUsize,
    /// Attempts that fail before this many calls have finished.
    failures: usize,
    ok: u16,
    /// Wakers of attempts that wait to be finished.
    waiting: Mutex<Vec<Waker>>,
    finished: std::sync::atomic::AtomicBool,
}

/// The service: the first `failures` calls fail, later ones answer `ok`;
/// every call waits until [`Probe::finish_all`] (or forever).
#[derive(Debug)]
pub struct Probe {
    shared: Arc<Shared>,
    ready: bool,
}

impl Probe {
    pub fn failing_then(failures: usize, ok: u16) -> Self {
        let shared = Arc::new(Shared {
            failures,
            ok,
            ..Shared::default()
        });
        shared.services.fetch_add(1, Ordering::SeqCst);
        Self {
            shared,
            ready: false,
        }
    }

    pub fn calls(&self) -> usize {
        self.shared.calls.load(Ordering::SeqCst)
    }

    pub fn live(&self) -> usize {
        self.shared.live.load(Ordering::SeqCst)
    }

    /// Clones alive, this handle included.
    pub fn services(&self) -> usize {
        self.shared.services.load(Ordering::SeqCst)
    }

    /// Lets every attempt, now and later, finish at once.
    pub fn finish_all(&self) {
        self.shared.finished.store(true, Ordering::SeqCst);
        for waker in self.shared.waiting.lock().expect("lock").drain(..) {
            waker.wake();
        }
    }
}

impl Clone for Probe {
    fn clone(&self) -> Self {
        self.shared.services.fetch_add(1, Ordering::SeqCst);
        Self {
            shared: Arc::clone(&self.shared),
            ready: false,
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.shared.services.fetch_sub(1, Ordering::SeqCst);
    }
}

impl tower::Service<u32> for Probe {
    type Response = u16;
    type Error = std::io::Error;
    type Future = Call;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.ready = true;
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: u32) -> Call {
        assert!(std::mem::take(&mut self.ready), "called without poll_ready");
        let n = self.shared.calls.fetch_add(1, Ordering::SeqCst);
        self.shared.live.fetch_add(1, Ordering::SeqCst);
        Call {
            shared: Arc::clone(&self.shared),
            fail: n < self.shared.failures,
        }
    }
}

/// One call in flight.
#[derive(Debug)]
pub struct Call {
    shared: Arc<Shared>,
    fail: bool,
}

impl Future for Call {
    type Output = Result<u16, std::io::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !self.shared.finished.load(Ordering::SeqCst) {
            self.shared
                .waiting
                .lock()
                .expect("lock")
                .push(cx.waker().clone());
            return Poll::Pending;
        }
        Poll::Ready(if self.fail {
            Err(std::io::Error::other("injected failure"))
        } else {
            Ok(self.shared.ok)
        })
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.shared.live.fetch_sub(1, Ordering::SeqCst);
    }
}
