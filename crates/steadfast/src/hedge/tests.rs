//! Hedging tests, all on virtual time (tokio's paused clock with
//! `TokioClock`, or a manual `VirtualClock` for the decision engine).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::{AdaptiveDelay, AttemptSet, HedgeAction, HedgeDecision, HedgePolicy, Hedgeable};
use crate::clock::{Clock, TokioClock, VirtualClock};
use crate::{
    Attempt, CancelToken, HedgeStats, Outcome, Refusal, RetryControl, StopReason, Verdict,
};

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

#[tokio::test(start_paused = true)]
async fn copies_go_out_every_delay_and_pile_up_in_flight() {
    let s = Script::new();
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(4)
        .max_elapsed(ms(2000))
        .build()
        .unwrap();
    let op = s.op(vec![(FOREVER, Ok(1)); 4]);
    let hedged = op.hedge(&policy).classify(classify).clock(TokioClock);
    let probe = async {
        let mut seen = Vec::new();
        for at in [1, 501, 1001, 1501] {
            tokio::time::sleep_until(tokio::time::Instant::from_std(s.t0 + ms(at))).await;
            seen.push(s.live());
        }
        seen
    };
    let (result, in_flight) = tokio::join!(hedged.into_future(), probe);
    assert_eq!(in_flight, [1, 2, 3, 4]);
    assert_eq!(s.times(), [(1, 0), (2, 500), (3, 1000), (4, 1500)]);
    let told: Vec<Vec<u32>> = s.sent.borrow().iter().map(|x| x.2.clone()).collect();
    assert_eq!(told, [vec![], vec![1], vec![1, 2], vec![1, 2, 3]]);
    let err = result.unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.stats().cancelled, 4);
    assert_eq!(s.elapsed(), ms(2000));
    assert_eq!(s.live(), 0, "every copy was dropped");
}

use std::future::{Future, IntoFuture};

#[tokio::test(start_paused = true)]
async fn a_fast_first_copy_sends_no_hedge() {
    let s = Script::new();
    let mut stats = HedgeStats::default();
    let r = s
        .op(vec![(10, Ok(1)), (10, Ok(2))])
        .hedge(policy(2, 500))
        .classify(classify)
        .on_finish(|st: &HedgeStats| stats = *st)
        .await;
    assert_eq!(r, Ok(1));
    assert_eq!(s.times(), [(1, 0)]);
    assert_eq!(
        (stats.sent, stats.winner, stats.cancelled, stats.elapsed),
        (1, Some(1), 0, ms(10))
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_copy_loses_and_is_cancelled() {
    let s = Script::new();
    let mut stats = HedgeStats::default();
    let r = s
        .op(vec![(10_000, Ok(1)), (100, Ok(2))])
        .hedge(policy(2, 500))
        .classify(classify)
        .on_finish(|st: &HedgeStats| stats = *st)
        .await;
    assert_eq!(r, Ok(2));
    assert_eq!(s.elapsed(), ms(600));
    assert_eq!(s.live(), 0, "the loser was dropped at once");
    assert_eq!((stats.sent, stats.winner, stats.cancelled), (2, Some(2), 1));
}

#[tokio::test(start_paused = true)]
async fn a_non_fatal_error_sends_the_next_copy_at_once() {
    let s = Script::new();
    let mut stats = HedgeStats::default();
    let r = s
        .op(vec![
            (100, Err(Fail::NonFatal(1))),
            (10_000, Ok(2)),
            (50, Ok(3)),
        ])
        .hedge(policy(3, 500))
        .classify(classify)
        .on_finish(|st: &HedgeStats| stats = *st)
        .await;
    assert_eq!(r, Ok(3));
    assert_eq!(s.times(), [(1, 0), (2, 100), (3, 600)]);
    assert_eq!(s.elapsed(), ms(650));
    assert_eq!(
        (stats.sent, stats.failed, stats.cancelled, stats.winner),
        (3, 1, 1, Some(3))
    );
    assert_eq!(s.live(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_fatal_error_cancels_everything_and_is_returned() {
    let s = Script::new();
    let err = s
        .op(vec![
            (10_000, Ok(1)),
            (200, Err(Fail::Fatal(2))),
            (1, Ok(3)),
        ])
        .hedge(policy(3, 500))
        .classify(classify)
        .name("lookup")
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Permanent);
    assert_eq!(err.last_error(), Some(&Fail::Fatal(2)));
    assert_eq!(
        s.times(),
        [(1, 0), (2, 500)],
        "no copy after the fatal error"
    );
    assert_eq!(s.elapsed(), ms(700));
    assert_eq!((err.stats().sent, err.stats().cancelled), (2, 1));
    assert_eq!(s.live(), 0);
    assert!(
        err.to_string()
            .starts_with("lookup failed after 2 hedged attempts")
    );
}

#[tokio::test(start_paused = true)]
async fn when_every_copy_fails_the_last_error_is_returned() {
    let s = Script::new();
    let err = s
        .op(vec![
            (300, Err(Fail::NonFatal(1))),
            (300, Err(Fail::NonFatal(2))),
            (300, Err(Fail::NonFatal(3))),
        ])
        .hedge(policy(3, 500))
        .classify(classify)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.last_error(), Some(&Fail::NonFatal(3)));
    assert_eq!(s.times(), [(1, 0), (2, 300), (3, 600)]);
    assert_eq!(s.elapsed(), ms(900));
    assert_eq!(
        (err.stats().sent, err.stats().failed, err.stats().cancelled),
        (3, 3, 0)
    );
    let retry: crate::RetryError<Fail> = err.into();
    assert_eq!(retry.attempts(), 3);
}

#[tokio::test(start_paused = true)]
async fn zero_delay_sends_every_copy_at_once() {
    let s = Script::new();
    let r = s
        .op(vec![(40, Ok(1)), (30, Ok(2)), (10, Ok(3)), (20, Ok(4))])
        .hedge(policy(4, 0))
        .classify(classify)
        .await;
    assert_eq!(r, Ok(3));
    assert_eq!(s.times(), [(1, 0), (2, 0), (3, 0), (4, 0)]);
    assert_eq!(s.elapsed(), ms(10));
    assert_eq!(s.live(), 0);
}

#[tokio::test(start_paused = true)]
async fn pushback_delays_the_next_copy_then_the_delay_resumes() {
    let s = Script::new();
    let r = s
        .op(vec![
            (100, Err(Fail::Pushback(1, 2000))),
            (10_000, Ok(2)),
            (10, Ok(3)),
        ])
        .hedge(policy(3, 500))
        .classify(classify)
        .await;
    assert_eq!(r, Ok(3));
    // Copy 2 was due at 500 but the server asked for 2 s at 100 ms.
    assert_eq!(s.times(), [(1, 0), (2, 2100), (3, 2600)]);
}

#[tokio::test(start_paused = true)]
async fn pushback_is_capped_by_max_pushback() {
    let s = Script::new();
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(2)
        .max_pushback(ms(1000))
        .build()
        .unwrap();
    let r = s
        .op(vec![(100, Err(Fail::Pushback(1, 60_000))), (10, Ok(2))])
        .hedge(&policy)
        .classify(classify)
        .await;
    assert_eq!(r, Ok(2));
    assert_eq!(s.times(), [(1, 0), (2, 1100)]);
}

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

#[tokio::test(start_paused = true)]
async fn a_refused_hedge_is_not_sent() {
    let s = Script::new();
    let control = Arc::new(TestControl {
        allow: 1,
        ..Default::default()
    });
    let mut stats = HedgeStats::default();
    let r = s
        .op(vec![
            (1800, Ok(1)),
            (FOREVER, Ok(2)),
            (1, Ok(3)),
            (1, Ok(4)),
        ])
        .hedge(controlled(4, 500, &control))
        .classify(classify)
        .on_finish(|st: &HedgeStats| stats = *st)
        .await;
    assert_eq!(r, Ok(1));
    assert_eq!(
        s.times(),
        [(1, 0), (2, 500)],
        "copy 3 was refused, 4 never asked"
    );
    assert_eq!(control.asked.load(Ordering::SeqCst), 2);
    assert_eq!(control.successes.load(Ordering::SeqCst), 1);
    assert_eq!(stats.refused_by, Some("test budget"));
    assert_eq!(s.live(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_with_nothing_in_flight_ends_the_call() {
    let s = Script::new();
    let control = Arc::new(TestControl::default());
    let err = s
        .op(vec![(100, Err(Fail::NonFatal(1))), (1, Ok(2))])
        .hedge(controlled(3, 500, &control))
        .classify(classify)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Throttled);
    assert_eq!(err.last_error(), Some(&Fail::NonFatal(1)));
    assert_eq!(err.stats().refused_by, Some("test budget"));
    assert_eq!(s.times(), [(1, 0)]);
    assert_eq!(s.elapsed(), ms(100));
    assert_eq!(control.failures.load(Ordering::SeqCst), 1);
    assert!(err.to_string().contains("hedge refused by test budget"));
}

#[tokio::test(start_paused = true)]
async fn dropping_the_call_drops_every_copy() {
    let s = Script::new();
    let hedged = s
        .op(vec![(FOREVER, Ok(1)); 3])
        .hedge(policy(3, 100))
        .classify(classify);
    let r = tokio::time::timeout(ms(250), hedged.into_future()).await;
    assert!(r.is_err());
    assert_eq!(s.times().len(), 3);
    assert_eq!(s.live(), 0);
}

#[tokio::test(start_paused = true)]
async fn cancellation_stops_the_call_mid_flight() {
    let s = Script::new();
    let token = CancelToken::new();
    let canceller = {
        let token = token.clone();
        async move {
            tokio::time::sleep(ms(700)).await;
            token.cancel();
        }
    };
    let hedged = s
        .op(vec![(FOREVER, Ok(1)); 3])
        .hedge(policy(3, 500))
        .classify(classify)
        .cancel_on(token);
    let (r, ()) = tokio::join!(hedged.into_future(), canceller);
    let err = r.unwrap_err();
    assert_eq!(err.reason(), StopReason::Cancelled);
    assert_eq!((err.stats().sent, err.stats().cancelled), (2, 2));
    assert_eq!(s.elapsed(), ms(700));
    assert_eq!(s.live(), 0);
}

#[tokio::test(start_paused = true)]
async fn no_copy_is_sent_that_would_start_past_the_deadline() {
    let s = Script::new();
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(5)
        .max_elapsed(ms(1200))
        .build()
        .unwrap();
    let err = s
        .op(vec![(FOREVER, Ok(0)); 5])
        .hedge(&policy)
        .classify(classify)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(s.times(), [(1, 0), (2, 500), (3, 1000)]);
    assert_eq!(s.elapsed(), ms(1200));
}

#[tokio::test(start_paused = true)]
async fn adaptive_delay_converges_to_the_latency_quantile() {
    // Every copy takes 1..=100 ms (fixed permutations, a different one for
    // hedges). The 95th percentile of a copy's latency is 95 ms.
    let adaptive = Arc::new(
        AdaptiveDelay::builder(ms(5))
            .quantile(0.95)
            .window(200)
            .min_samples(50)
            .refresh_every(10)
            .build()
            .unwrap(),
    );
    let policy = HedgePolicy::builder(Arc::clone(&adaptive))
        .max_attempts(2)
        .build()
        .unwrap();
    let mut hedges = 0;
    let mut delays = Vec::new();
    for call in 0..2000u64 {
        let first = (call * 37) % 100 + 1;
        let second = (call * 53 + 11) % 100 + 1;
        delays.push(adaptive.current());
        let mut sent = 0;
        let r = (|a: Attempt| async move {
            let latency = if a.is_first() { first } else { second };
            tokio::time::sleep(ms(latency)).await;
            Ok::<_, ()>(a.number)
        })
        .hedge(&policy)
        .on_finish(|s: &HedgeStats| sent = s.sent)
        .await;
        assert!(r.is_ok());
        if call >= 1000 {
            hedges += sent - 1;
        }
    }
    assert_eq!(delays[0], ms(5), "the fallback before any data");
    // Calls whose first copy is slower than the delay record a latency above
    // the delay: the share above the delay is kept, so the quantile holds.
    let last = adaptive.current();
    assert!(
        (ms(94)..=ms(97)).contains(&last),
        "delay {last:?} should sit at the 95th percentile (95 ms)"
    );
    assert!(
        (30..=70).contains(&hedges),
        "about 5 % of the last 1000 calls hedged, got {hedges}"
    );
}

#[test]
fn bad_configuration_is_a_config_error() {
    let b = || HedgePolicy::builder(ms(1));
    assert_eq!(
        b().max_attempts(0).build().unwrap_err().field(),
        "max_attempts"
    );
    assert_eq!(
        b().max_attempts(33).build().unwrap_err().field(),
        "max_attempts"
    );
    assert!(b().max_attempts(32).build().is_ok());
    assert_eq!(
        b().max_elapsed(Duration::ZERO).build().unwrap_err().field(),
        "max_elapsed"
    );
}

#[test]
fn runs_on_a_manual_virtual_clock_without_a_runtime() {
    use std::task::{Context, Poll, Waker};
    let clock = VirtualClock::manual();
    let policy = policy(3, 500);
    let c2 = clock.clone();
    let hedged = (move |a: Attempt| {
        let clock = c2.clone();
        async move {
            crate::AsyncClock::sleep(&clock, ms(if a.is_first() { 10_000 } else { 100 })).await;
            Ok::<_, ()>(a.number)
        }
    })
    .hedge(&policy)
    .clock(clock.clone());
    let mut fut = Box::pin(hedged.into_future());
    let mut cx = Context::from_waker(Waker::noop());
    let mut steps = 0;
    let result = loop {
        if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            break r;
        }
        let next = clock.next_wake().expect("something waits on the clock");
        clock.advance_to(next);
        steps += 1;
        assert!(steps < 10);
    };
    assert_eq!(result, Ok(2));
    assert_eq!(clock.elapsed(), ms(600));
}

#[test]
fn a_control_refusing_the_first_copy_stops_the_call() {
    #[derive(Debug)]
    struct Closed;
    impl RetryControl for Closed {
        fn admit(&self) -> Result<(), Refusal> {
            Err(Refusal { by: "throttle" })
        }
        fn record(&self, _: Outcome) {}
        fn allow_retry(&self) -> Result<(), Refusal> {
            Ok(())
        }
    }
    let policy = HedgePolicy::builder(ms(1))
        .control(Arc::new(Closed))
        .build()
        .unwrap();
    let clock = VirtualClock::manual();
    let mut call = policy.start(&clock, None);
    assert_eq!(
        policy.send_due(&mut call, &clock),
        HedgeAction::Stop(StopReason::Throttled)
    );
    assert_eq!(call.sent(), 0);
}

#[test]
fn outcomes_of_unknown_copies_are_ignored() {
    let policy = policy(2, 10);
    let clock = VirtualClock::manual();
    let mut call = policy.start(&clock, None);
    assert!(matches!(
        policy.send_due(&mut call, &clock),
        HedgeAction::Send(_)
    ));
    assert_eq!(
        policy.on_outcome(&mut call, 7, Verdict::Success, &clock),
        HedgeDecision::Continue
    );
    assert_eq!(call.winner(), None);
}

// ---- the decision state machine, under random events ----

#[derive(Debug, Clone)]
enum Event {
    Advance(u64),
    Outcome {
        pick: usize,
        verdict: u8,
        pushback: u64,
    },
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (0u64..800).prop_map(Event::Advance),
        (0usize..8, 0u8..10, 0u64..3000).prop_map(|(pick, verdict, pushback)| Event::Outcome {
            pick,
            verdict,
            pushback
        }),
    ]
}

#[derive(Debug)]
struct Budget {
    allow: Vec<bool>,
    asked: AtomicU32,
    granted: AtomicU32,
}

impl RetryControl for Budget {
    fn record(&self, _: Outcome) {}
    fn allow_retry(&self) -> Result<(), Refusal> {
        let i = self.asked.fetch_add(1, Ordering::SeqCst) as usize;
        if self.allow.get(i).copied().unwrap_or(true) {
            self.granted.fetch_add(1, Ordering::SeqCst);
            Ok(())
        } else {
            Err(Refusal { by: "budget" })
        }
    }
}

proptest! {
    #[test]
    fn the_decision_engine_keeps_its_promises(
        max_attempts in 1u32..7,
        delay in 0u64..1000,
        max_pushback in 0u64..2000,
        limit in proptest::option::of(1u64..4000),
        allow in proptest::collection::vec(proptest::bool::weighted(0.8), 0..8),
        events in proptest::collection::vec(event(), 0..40),
    ) {
        let budget = Arc::new(Budget { allow, asked: AtomicU32::new(0), granted: AtomicU32::new(0) });
        let mut b = HedgePolicy::builder(ms(delay))
            .max_attempts(max_attempts)
            .max_pushback(ms(max_pushback))
            .control(Arc::clone(&budget) as Arc<dyn RetryControl>);
        if let Some(l) = limit {
            b = b.max_elapsed(ms(l));
        }
        let policy = b.build().unwrap();
        let clock = VirtualClock::manual();
        let t0 = clock.now();
        let mut call = policy.start(&clock, None);
        let mut sent: Vec<(u32, Instant)> = Vec::new();
        let mut in_flight = AttemptSet::new();
        let mut failure_since_send = false;
        let mut hold_until: Option<Instant> = None;
        let mut over = false;
        let mut refused = false;
        let stopped_sending = std::cell::Cell::new(false);

        let pump = |call: &mut super::HedgeState,
                        sent: &mut Vec<(u32, Instant)>,
                        in_flight: &mut AttemptSet,
                        failure_since_send: &mut bool,
                        hold_until: &Option<Instant>,
                        over: &mut bool,
                        refused: &mut bool| {
            loop {
                let asked_before = budget.asked.load(Ordering::SeqCst);
                match policy.send_due(call, &clock) {
                    HedgeAction::Send(a) => {
                        let now = clock.now();
                        prop_assert!(!*over, "nothing is sent after the call ended");
                        prop_assert!(!*refused, "nothing is sent after a refusal");
                        prop_assert!(!stopped_sending.get(), "nothing is sent after StopSending");
                        prop_assert_eq!(a.number as usize, sent.len() + 1, "copies numbered in order");
                        prop_assert!(a.number <= max_attempts);
                        prop_assert_eq!(a.in_flight, *in_flight);
                        if let Some(&(_, prev)) = sent.last() {
                            prop_assert!(now >= prev, "copies ordered in time");
                            prop_assert!(
                                now >= prev + ms(delay) || *failure_since_send,
                                "a copy before its delay needs a failure to shortcut it"
                            );
                        }
                        if let Some(h) = hold_until {
                            prop_assert!(now >= *h, "pushback is honoured");
                        }
                        if let Some(l) = limit {
                            prop_assert!(now < t0 + ms(l), "no copy starts past the deadline");
                        }
                        sent.push((a.number, now));
                        in_flight.insert(a.number);
                        *failure_since_send = false;
                    }
                    HedgeAction::Stop(reason) => {
                        if budget.asked.load(Ordering::SeqCst) > asked_before {
                            *refused = true;
                        }
                        if reason != StopReason::Deadline {
                            prop_assert!(in_flight.is_empty(), "only the deadline abandons copies in flight");
                        }
                        *over = true;
                        return Ok(());
                    }
                    HedgeAction::WaitUntil(at) => {
                        if budget.asked.load(Ordering::SeqCst) > asked_before {
                            *refused = true;
                        }
                        prop_assert!(at > clock.now());
                        return Ok(());
                    }
                    HedgeAction::WaitForOutcome => {
                        if budget.asked.load(Ordering::SeqCst) > asked_before {
                            *refused = true;
                        }
                        return Ok(());
                    }
                }
            }
        };

        pump(&mut call, &mut sent, &mut in_flight, &mut failure_since_send, &hold_until, &mut over, &mut refused)?;
        for e in events {
            if over {
                break;
            }
            match e {
                Event::Advance(d) => clock.advance(ms(d)),
                Event::Outcome { pick, verdict, pushback } => {
                    let Some(n) = in_flight.iter().nth(pick % 8) else { continue };
                    let v = match verdict {
                        0 => Verdict::Success,
                        1 => Verdict::Stop,
                        2 | 3 => Verdict::RetryAfter(ms(pushback)),
                        4 => Verdict::StopSending,
                        _ => Verdict::Retry,
                    };
                    in_flight.remove(n);
                    match policy.on_outcome(&mut call, n, v, &clock) {
                        HedgeDecision::Succeed => {
                            prop_assert_eq!(v, Verdict::Success);
                            over = true;
                        }
                        HedgeDecision::Stop(reason) => {
                            if reason != StopReason::Permanent {
                                prop_assert!(in_flight.is_empty(), "all copies failed");
                            }
                            over = true;
                        }
                        HedgeDecision::Continue => {
                            prop_assert!(v != Verdict::Stop, "a fatal failure ends the call");
                            if v == Verdict::StopSending {
                                stopped_sending.set(true);
                            }
                            failure_since_send = true;
                            if let Verdict::RetryAfter(d) = v {
                                let until = clock.now() + d.min(ms(max_pushback));
                                hold_until = Some(hold_until.map_or(until, |h| h.max(until)));
                            }
                        }
                    }
                }
            }
            if !over {
                pump(&mut call, &mut sent, &mut in_flight, &mut failure_since_send, &hold_until, &mut over, &mut refused)?;
            }
        }
        prop_assert!(sent.len() as u32 <= max_attempts, "never more than max_attempts copies");
        prop_assert_eq!(call.sent() as usize, sent.len());
        // Every hedge was granted by the control: a refused copy is never sent.
        prop_assert_eq!(sent.len().saturating_sub(1) as u32, budget.granted.load(Ordering::SeqCst));
    }
}

#[test]
fn a_hedged_call_is_send_when_its_parts_are() {
    fn assert_send<T: Send>(_: &T) {}
    let policy = Arc::new(policy(3, 10));
    let fut = (|a: Attempt| async move {
        tokio::time::sleep(ms(1)).await;
        Ok::<_, std::io::Error>(a.number)
    })
    .hedge(Arc::clone(&policy))
    .cancel_on(CancelToken::new())
    .into_future();
    assert_send(&fut);
}

#[tokio::test(start_paused = true)]
async fn copies_run_under_the_ambient_deadline() {
    let d = crate::Deadline::after(TokioClock.now(), ms(800));
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = Rc::clone(&seen);
    let hedged = (move |a: Attempt| {
        let seen = Rc::clone(&s2);
        async move {
            seen.borrow_mut()
                .push((a.number, a.deadline, crate::deadline::current()));
            tokio::time::sleep(ms(FOREVER)).await;
            Ok::<u32, ()>(a.number)
        }
    })
    .hedge(policy(3, 500));
    let err = crate::deadline::scope_async(d, hedged.into_future())
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.stats().elapsed, ms(800));
    assert_eq!(
        *seen.borrow(),
        [(1, Some(d), Some(d)), (2, Some(d), Some(d))]
    );
}

#[tokio::test(start_paused = true)]
async fn the_a6_token_bucket_stops_hedges_when_failures_mount() {
    let bucket = Arc::new(
        crate::control::TokenBucket::builder()
            .max_tokens(10)
            .token_ratio(0.1)
            .build()
            .unwrap(),
    );
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(3)
        .control(Arc::clone(&bucket) as Arc<dyn RetryControl>)
        .build()
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let err = (|a: Attempt| async move {
            tokio::time::sleep(ms(10)).await;
            Err::<u32, Fail>(Fail::NonFatal(a.number))
        })
        .hedge(&policy)
        .classify(classify)
        .await
        .unwrap_err();
        seen.push((err.stats().sent, err.reason()));
    }
    // 10 tokens; each failure takes one; hedges stop at <= 5 tokens.
    assert_eq!(
        seen,
        [
            (3, StopReason::Exhausted),
            (2, StopReason::Throttled),
            (1, StopReason::Throttled),
        ]
    );
    assert_eq!(bucket.milli_tokens(), 4000);
}

#[tokio::test(start_paused = true)]
async fn a_failure_brings_forward_a_copy_the_deadline_had_cut() {
    let s = Script::new();
    let policy = HedgePolicy::builder(ms(500))
        .max_attempts(4)
        .max_elapsed(ms(1200))
        .build()
        .unwrap();
    // Copy 4 would be due at 1500, past the deadline; copy 3 fails at 1100,
    // so copy 4 goes at once and answers in time.
    let r = s
        .op(vec![
            (FOREVER, Ok(1)),
            (FOREVER, Ok(2)),
            (100, Err(Fail::NonFatal(3))),
            (50, Ok(4)),
        ])
        .hedge(&policy)
        .classify(classify)
        .await;
    assert_eq!(r, Ok(4));
    assert_eq!(s.times(), [(1, 0), (2, 500), (3, 1000), (4, 1100)]);
}

#[test]
fn stop_sending_keeps_the_copies_in_flight_and_sends_no_more() {
    let policy = policy(3, 100);
    let clock = VirtualClock::manual();
    let mut call = policy.start(&clock, None);
    assert!(matches!(
        policy.send_due(&mut call, &clock),
        HedgeAction::Send(_)
    ));
    call.stop_sending();
    clock.advance(ms(100));
    assert_eq!(
        policy.send_due(&mut call, &clock),
        HedgeAction::WaitForOutcome
    );
    // A non-fatal failure does not bring a copy back; the call ends as
    // the caller's (or the classifier's) stop, not as exhausted.
    assert_eq!(
        policy.on_outcome(&mut call, 1, Verdict::Retry, &clock),
        HedgeDecision::Stop(StopReason::Permanent)
    );
    assert_eq!(call.sent(), 1);
}

fn forbidding(r: &Result<u32, Fail>) -> Verdict {
    match r {
        Err(Fail::Pushback(_, _)) => Verdict::StopSending,
        other => classify(other),
    }
}

#[tokio::test(start_paused = true)]
async fn stop_sending_lets_the_copies_in_flight_win() {
    let s = Script::new();
    let control = Arc::new(TestControl {
        allow: 5,
        ..TestControl::default()
    });
    let value = s
        .op(vec![
            (700, Ok(1)),
            (100, Err(Fail::Pushback(2, 0))),
            (1, Ok(3)),
        ])
        .hedge(controlled(3, 500, &control))
        .classify(forbidding)
        .await
        .unwrap();
    // Copy 2's server forbade retries at 600 ms: copy 3 (due then, at
    // once after a failure) is never sent, and copy 1 still wins at 700 ms.
    assert_eq!(value, 1);
    assert_eq!(s.times(), [(1, 0), (2, 500)]);
    assert_eq!(s.elapsed(), ms(700));
    assert_eq!(s.live(), 0);
    assert_eq!(
        control.failures.load(Ordering::SeqCst),
        1,
        "the control counts it"
    );
}

#[tokio::test(start_paused = true)]
async fn stop_sending_ends_the_call_when_the_copies_in_flight_fail() {
    let s = Script::new();
    let err = s
        .op(vec![
            (700, Err(Fail::NonFatal(1))),
            (100, Err(Fail::Pushback(2, 0))),
            (1, Ok(3)),
        ])
        .hedge(policy(3, 500))
        .classify(forbidding)
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Permanent);
    assert_eq!(err.last_error(), Some(&Fail::NonFatal(1)));
    assert_eq!(s.times(), [(1, 0), (2, 500)]);
    assert_eq!(s.elapsed(), ms(700), "copy 1 ran to its end");
    assert_eq!((err.stats().sent, err.stats().failed), (2, 2));
}

#[tokio::test(start_paused = true)]
async fn a_report_gives_the_copies_of_a_success_and_tells_an_ok_that_ran_out() {
    let s = Script::new();
    let report = s
        .op(vec![(700, Ok(1)), (100, Ok(2)), (1, Ok(3))])
        .hedge(policy(3, 500))
        .classify(classify)
        .report()
        .await;
    assert_eq!(report.result.as_ref().ok(), Some(&2));
    assert!(report.succeeded());
    assert_eq!(
        (
            report.stats.sent,
            report.stats.winner,
            report.stats.cancelled
        ),
        (2, Some(2), 1)
    );

    // Every copy answers an `Ok` the classifier retries: the last one
    // comes back, and the report says the copies ran out.
    let s = Script::new();
    let report = s
        .op(vec![(100, Ok(503)), (100, Ok(503))])
        .hedge(policy(2, 500))
        .classify(|r: &Result<u32, Fail>| match r {
            Ok(503) | Err(_) => Verdict::Retry,
            Ok(_) => Verdict::Success,
        })
        .report()
        .await;
    assert_eq!(report.result.as_ref().ok(), Some(&503));
    assert_eq!(report.stop, Some(StopReason::Exhausted));
    assert_eq!((report.stats.sent, report.stats.failed), (2, 2));

    // A failure: the report's stop is the error's reason.
    let s = Script::new();
    let report = s
        .op(vec![(100, Err(Fail::Fatal(1)))])
        .hedge(policy(2, 500))
        .classify(classify)
        .report()
        .await;
    assert_eq!(report.stop, Some(StopReason::Permanent));
    assert_eq!(
        report.into_result().unwrap_err().reason(),
        StopReason::Permanent
    );
}
