//! Hedging tests, all on virtual time (tokio's paused clock with
//! `TokioClock`, or a manual `VirtualClock` for the decision engine). The
//! helpers they share are here; the tests, one topic to a file, in the
//! submodules.

mod cancellation;
mod controls;
mod copies;
mod deadlines;
mod endpoints;
mod engine;
mod limits;
mod stop_sending;

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::call::{Attempt, Verdict};
use crate::clock::{Clock, TokioClock};
use crate::control::{Outcome, Refusal, RetryControl};
use crate::policy::HedgePolicy;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What a copy answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fail {
    NonFatal(u32),
    Fatal(u32),
    Pushback(u32, u64),
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

fn classify(r: &Result<u32, Fail>) -> Verdict {
    match r {
        Ok(_) => Verdict::Success,
        Err(Fail::NonFatal(_)) => Verdict::Retry,
        Err(Fail::Fatal(_)) => Verdict::Stop,
        Err(Fail::Pushback(_, d)) => Verdict::RetryAfter(ms(*d)),
    }
}

/// Counts the copies alive (their futures not yet dropped).
#[derive(Debug)]
struct Live(Arc<AtomicUsize>);

impl Live {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(count))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A copy sent: its number, when, and the copies it was told were in flight.
type Sent = (u32, Duration, Vec<u32>);

/// A scripted operation: copy `n` takes `script[n - 1].0` ms and answers
/// `script[n - 1].1`. Records when each copy went out and what it was told.
struct Script {
    t0: Instant,
    live: Arc<AtomicUsize>,
    sent: Rc<RefCell<Vec<Sent>>>,
}

impl Script {
    fn new() -> Self {
        Self {
            t0: TokioClock.now(),
            live: Arc::new(AtomicUsize::new(0)),
            sent: Rc::default(),
        }
    }

    fn op(
        &self,
        script: Vec<(u64, Result<u32, Fail>)>,
    ) -> impl FnMut(Attempt) -> std::pin::Pin<Box<dyn Future<Output = Result<u32, Fail>>>> + use<>
    {
        let (t0, live, sent) = (self.t0, Arc::clone(&self.live), Rc::clone(&self.sent));
        move |a: Attempt| {
            sent.borrow_mut().push((
                a.number,
                TokioClock.now() - t0,
                a.in_flight.iter().collect(),
            ));
            let (latency, answer) = script[(a.number - 1) as usize];
            let guard = Live::new(&live);
            Box::pin(async move {
                let _guard = guard;
                tokio::time::sleep(ms(latency)).await;
                answer
            })
        }
    }

    fn times(&self) -> Vec<(u32, u64)> {
        self.sent
            .borrow()
            .iter()
            .map(|(n, t, _)| (*n, t.as_millis() as u64))
            .collect()
    }

    fn elapsed(&self) -> Duration {
        TokioClock.now() - self.t0
    }

    fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }
}

fn policy(attempts: u32, delay_ms: u64) -> HedgePolicy {
    HedgePolicy::builder(ms(delay_ms))
        .max_attempts(attempts)
        .build()
        .unwrap()
}

const FOREVER: u64 = 36_000_000;

/// A control that allows `allow` hedges, then refuses; counts what it hears.
#[derive(Debug, Default)]
struct TestControl {
    allow: u32,
    asked: AtomicU32,
    successes: AtomicU32,
    failures: AtomicU32,
}

impl RetryControl for TestControl {
    fn record(&self, outcome: Outcome) {
        match outcome {
            Outcome::Success => self.successes.fetch_add(1, Ordering::SeqCst),
            Outcome::RetryableFailure => self.failures.fetch_add(1, Ordering::SeqCst),
        };
    }
    fn allow_retry(&self) -> Result<(), Refusal> {
        let n = self.asked.fetch_add(1, Ordering::SeqCst);
        if n < self.allow {
            Ok(())
        } else {
            Err(Refusal { by: "test budget" })
        }
    }
}

fn controlled(attempts: u32, delay_ms: u64, control: &Arc<TestControl>) -> HedgePolicy {
    HedgePolicy::builder(ms(delay_ms))
        .max_attempts(attempts)
        .control(Arc::clone(control) as Arc<dyn RetryControl>)
        .build()
        .unwrap()
}
