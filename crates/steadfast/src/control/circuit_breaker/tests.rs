#![allow(clippy::float_cmp)] // the compared ratios are exact by construction

use std::sync::{Arc, Barrier};

use proptest::prelude::*;

use super::*;
use crate::backoff::{Backoff, Jitter};
use crate::clock::{InstantsOnly, VirtualClock};
use crate::config_error::ConfigError;
use crate::control::tests::events_of;

const SEC: Duration = Duration::from_secs(1);

fn breaker(builder: CircuitBreakerBuilder, clock: &VirtualClock) -> CircuitBreaker<VirtualClock> {
    builder
        .build_with_clock(clock.clone())
        .expect("valid settings")
}

/// A count window of the last 10 calls (blocks of one), opening at 5 calls
/// and half of them failing, with a 5 s break.
fn small() -> CircuitBreakerBuilder {
    CircuitBreaker::builder()
        .name("dep")
        .window(WindowKind::Count(10))
        .min_calls(5)
        .failure_ratio(0.5)
        .break_duration(5 * SEC)
}

fn fail(b: &impl RetryControl, n: usize) {
    for _ in 0..n {
        b.record(Outcome::RetryableFailure);
    }
}

fn succeed(b: &impl RetryControl, n: usize) {
    for _ in 0..n {
        b.record(Outcome::Success);
    }
}

/// Opens `b` (on the `small` settings).
fn open(b: &CircuitBreaker<VirtualClock>) {
    fail(b, 5);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn minimum_throughput_holds_a_breaker_closed() {
    let clock = VirtualClock::new();
    // Polly's shape: 30 s window, at least 100 calls.
    let b = breaker(CircuitBreaker::builder().failure_ratio(0.1), &clock);
    fail(&b, 99);
    assert_eq!(
        b.state(),
        BreakerState::Closed,
        "99 of 99 failed, but 99 < 100"
    );
    assert_eq!((b.snapshot().calls, b.snapshot().failures), (99, 99));
    fail(&b, 1);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn the_ratio_must_be_reached() {
    let clock = VirtualClock::new();
    let b = breaker(
        CircuitBreaker::builder().min_calls(10).failure_ratio(0.3),
        &clock,
    );
    succeed(&b, 8);
    fail(&b, 3); // 3 of 11: 0.27
    assert_eq!(b.state(), BreakerState::Closed);
    fail(&b, 1); // 4 of 12: 0.33
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.snapshot().openings, 1);
    // A success never opens a breaker, whatever the window holds.
    let b = breaker(
        CircuitBreaker::builder().min_calls(3).failure_ratio(0.5),
        &clock,
    );
    fail(&b, 1);
    succeed(&b, 1);
    assert_eq!(b.state(), BreakerState::Closed);
    succeed(&b, 1); // 1 of 3
    fail(&b, 1); // 2 of 4: exactly the ratio
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn failures_leave_a_time_window() {
    let clock = VirtualClock::new();
    let b = breaker(
        CircuitBreaker::builder()
            .window(WindowKind::Time(10 * SEC))
            .min_calls(4),
        &clock,
    );
    fail(&b, 3);
    clock.advance(10 * SEC); // the three failures' slot has left the window
    assert_eq!(b.snapshot().calls, 0);
    fail(&b, 3);
    assert_eq!(
        b.state(),
        BreakerState::Closed,
        "only 3 calls in the window"
    );
    clock.advance(9 * SEC); // still in it
    fail(&b, 1);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn a_count_window_keeps_the_last_calls() {
    let clock = VirtualClock::new();
    let b = breaker(small().min_calls(9), &clock);
    fail(&b, 4);
    succeed(&b, 20); // the failures are pushed out
    assert_eq!(b.snapshot().failures, 0);
    fail(&b, 4);
    assert_eq!(b.state(), BreakerState::Closed, "4 of 9");
    fail(&b, 1);
    assert_eq!(b.state(), BreakerState::Open, "5 of 9");
}

#[test]
fn an_open_breaker_refuses_everything_and_says_for_how_long() {
    let clock = VirtualClock::new();
    let b = breaker(small(), &clock);
    open(&b);
    clock.advance(Duration::from_millis(1200));
    assert_eq!(b.admit(), Err(Refusal { by: "dep" }));
    assert_eq!(b.allow_retry(), Err(Refusal { by: "dep" }));
    assert_eq!(b.retry_after("dep"), Some(Duration::from_millis(3800)));
    assert_eq!(b.retry_after("other"), None);
    // Outcomes of calls let through before the break decide nothing.
    succeed(&b, 10);
    assert_eq!(b.state(), BreakerState::Open);
    let snap = b.snapshot();
    assert_eq!(snap.refusals, 2);
    assert_eq!(snap.next_probe_in, Some(Duration::from_millis(3800)));
}

#[test]
fn a_probe_success_closes_with_an_empty_window() {
    let clock = VirtualClock::new();
    let b = breaker(small(), &clock);
    open(&b);
    clock.advance(5 * SEC);
    assert_eq!(b.snapshot().next_probe_in, Some(Duration::ZERO));
    assert!(b.admit().is_ok());
    assert_eq!(b.state(), BreakerState::HalfOpen);
    assert_eq!(b.snapshot().probes, 1);
    assert!(b.admit().is_err(), "one probe at a time");
    assert!(b.allow_retry().is_err(), "retries and hedges too");
    succeed(&b, 1);
    assert_eq!(b.state(), BreakerState::Closed);
    let snap = b.snapshot();
    assert_eq!((snap.calls, snap.failures, snap.reopenings), (0, 0, 0));
    // The failures that opened it are gone: it takes five new ones.
    fail(&b, 4);
    assert_eq!(b.state(), BreakerState::Closed);
    fail(&b, 1);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn a_probe_failure_opens_again() {
    let clock = VirtualClock::new();
    let b = breaker(small(), &clock);
    open(&b);
    clock.advance(5 * SEC);
    assert!(b.admit().is_ok());
    fail(&b, 1);
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.snapshot().reopenings, 1);
    assert_eq!(b.snapshot().openings, 2);
    assert_eq!(b.retry_after("dep"), Some(5 * SEC));
}

#[test]
fn at_most_k_probes_per_round() {
    let clock = VirtualClock::new();
    let b = breaker(small().probes(3), &clock);
    open(&b);
    clock.advance(5 * SEC);
    let granted = (0..10).filter(|_| b.admit().is_ok()).count();
    assert_eq!(granted, 3);
    assert_eq!(b.snapshot().probes, 3);
    // The first outcome decides, for every probe in flight.
    fail(&b, 1);
    assert_eq!(b.state(), BreakerState::Open);
    succeed(&b, 2); // the other probes' late successes are ignored
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn racing_threads_get_exactly_k_probes() {
    for k in [1, 2, 5] {
        let clock = VirtualClock::new();
        let b = Arc::new(breaker(small().probes(k), &clock));
        open(&b);
        clock.advance(5 * SEC);
        let barrier = Arc::new(Barrier::new(8));
        let granted: usize = (0..8)
            .map(|_| {
                let (b, barrier) = (Arc::clone(&b), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    (0..50).filter(|_| b.admit().is_ok()).count()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().expect("no panic"))
            .sum();
        assert_eq!(granted, k as usize);
        assert_eq!(b.snapshot().refusals, 400 - u64::from(k));
    }
}

#[test]
fn an_abandoned_probe_gives_its_slot_back() {
    let clock = VirtualClock::new();
    let b = breaker(small(), &clock);
    open(&b);
    clock.advance(5 * SEC);
    assert!(b.admit().is_ok());
    assert!(b.admit().is_err());
    b.refund(Grant::Admit); // the probe was never sent
    assert_eq!(b.snapshot().probes, 0);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    // An outcome while no probe is out decides nothing...
    fail(&b, 1);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    // ...and the next caller probes.
    assert!(b.allow_retry().is_ok());
    succeed(&b, 1);
    assert_eq!(b.state(), BreakerState::Closed);
    // Refunds outside half-open change nothing.
    b.refund(Grant::Retry);
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn probes_that_never_report_are_replaced_after_the_probe_timeout() {
    let clock = VirtualClock::new();
    let b = breaker(small().probe_timeout(2 * SEC), &clock);
    open(&b);
    clock.advance(5 * SEC);
    assert!(b.admit().is_ok()); // a probe whose caller goes away
    clock.advance(Duration::from_millis(1999));
    assert!(b.admit().is_err());
    assert_eq!(b.retry_after("dep"), Some(Duration::from_millis(1)));
    clock.advance(Duration::from_millis(1));
    assert!(b.admit().is_ok(), "a new round");
    assert!(b.admit().is_err());
    assert_eq!(b.state(), BreakerState::HalfOpen);
}

#[test]
fn isolate_and_reset() {
    let clock = VirtualClock::new();
    let b = breaker(small(), &clock);
    fail(&b, 4);
    b.isolate();
    assert_eq!(b.state(), BreakerState::Isolated);
    clock.advance(Duration::from_secs(3600));
    assert!(b.admit().is_err(), "no break ends an isolation");
    assert_eq!(b.retry_after("dep"), None);
    assert_eq!(b.snapshot().next_probe_in, None);
    succeed(&b, 1);
    assert_eq!(b.state(), BreakerState::Isolated);
    b.reset();
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.snapshot().calls, 0, "the window starts empty");
    fail(&b, 4);
    assert_eq!(b.state(), BreakerState::Closed);
    // Isolating an open breaker, and resetting a closed one.
    fail(&b, 1);
    b.isolate();
    b.isolate();
    assert_eq!(b.state(), BreakerState::Isolated);
    b.reset();
    b.reset();
    assert!(b.admit().is_ok());
}

#[test]
fn breaks_grow_with_consecutive_openings_and_stop_at_the_cap() {
    let clock = VirtualClock::new();
    let backoff = Backoff::exponential()
        .initial(SEC)
        .max_delay(8 * SEC)
        .jitter(Jitter::None)
        .build()
        .expect("valid backoff");
    let b = breaker(small().break_backoff(backoff), &clock);
    open(&b);
    let mut breaks = Vec::new();
    for _ in 0..6 {
        breaks.push(b.retry_after("dep").expect("open"));
        clock.advance(*breaks.last().expect("one"));
        assert!(b.admit().is_ok());
        fail(&b, 1);
    }
    assert_eq!(breaks, [1, 2, 4, 8, 8, 8].map(|s| s * SEC));
    // A success closes and starts the breaks over.
    clock.advance(8 * SEC);
    assert!(b.admit().is_ok());
    succeed(&b, 1);
    open(&b);
    assert_eq!(b.retry_after("dep"), Some(SEC));
}

#[test]
fn slow_calls_count_as_failures() {
    let clock = VirtualClock::new();
    let b = breaker(small().slow_call(Duration::from_millis(500)), &clock);
    assert!(b.wants_durations());
    assert!(!breaker(small(), &clock).wants_durations());
    for _ in 0..4 {
        b.record_timed(Outcome::Success, Duration::from_millis(500));
    }
    b.record_timed(Outcome::Success, Duration::from_millis(499));
    assert_eq!((b.snapshot().calls, b.snapshot().failures), (5, 4));
    b.record_timed(Outcome::Success, SEC);
    assert_eq!(b.state(), BreakerState::Open);
    // A slow probe is a failed probe.
    clock.advance(5 * SEC);
    assert!(b.admit().is_ok());
    b.record_timed(Outcome::Success, SEC);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn every_state_change_is_an_event() {
    let events = events_of(|| {
        let clock = VirtualClock::new();
        let b = breaker(small(), &clock);
        open(&b);
        clock.advance(5 * SEC);
        assert!(b.admit().is_ok());
        assert!(b.admit().is_err());
        fail(&b, 1);
        clock.advance(5 * SEC);
        assert!(b.admit().is_ok());
        succeed(&b, 1);
        b.isolate();
        b.reset();
    });
    let change = |from: &str, to: &str| format!("circuit breaker changed state: {from} -> {to}");
    assert_eq!(
        events,
        [
            change("closed", "open"),
            change("open", "half-open"),
            change("half-open", "open"),
            change("open", "half-open"),
            change("half-open", "closed"),
            change("closed", "isolated"),
            change("isolated", "closed"),
        ]
    );
}

#[test]
fn works_on_a_clock_without_ticks() {
    let clock = VirtualClock::new();
    let b = small()
        .window(WindowKind::Time(10 * SEC))
        .build_with_clock(InstantsOnly(clock.clone()))
        .expect("valid");
    fail(&b, 5);
    assert_eq!(b.state(), BreakerState::Open);
    clock.advance(5 * SEC);
    assert!(b.admit().is_ok());
}

#[test]
fn bad_settings_name_their_field() {
    let field = |b: CircuitBreakerBuilder| -> &'static str {
        b.build()
            .map(drop)
            .map_err(|e: ConfigError| e.field())
            .unwrap_err()
    };
    let b = CircuitBreaker::builder;
    assert_eq!(field(b().failure_ratio(0.0)), "failure_ratio");
    assert_eq!(field(b().failure_ratio(1.01)), "failure_ratio");
    assert_eq!(field(b().failure_ratio(f64::NAN)), "failure_ratio");
    assert_eq!(
        field(b().window(WindowKind::Time(Duration::from_millis(99)))),
        "window"
    );
    assert_eq!(
        field(b().window(WindowKind::Time(Duration::from_secs(86_401)))),
        "window"
    );
    assert_eq!(field(b().window(WindowKind::Count(15))), "window");
    assert_eq!(field(b().window(WindowKind::Count(0))), "window");
    assert_eq!(field(b().window(WindowKind::Count(10_000_010))), "window");
    assert_eq!(field(b().min_calls(0)), "min_calls");
    assert_eq!(field(b().break_duration(Duration::ZERO)), "break_duration");
    assert_eq!(
        field(b().probe_timeout(Duration::from_secs(86_401))),
        "probe_timeout"
    );
    assert_eq!(field(b().probes(0)), "probes");
    assert_eq!(field(b().probes(4096)), "probes");
    assert_eq!(field(b().slow_call(Duration::ZERO)), "slow_call");
    let err = b().name("payments").probes(0).build().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid payments: `probes` must be 1 to 4095 (got 0)"
    );
    assert!(b().failure_ratio(1.0).probes(4095).build().is_ok());
}

/// What the model does on one step.
#[derive(Debug, Clone, Copy)]
enum Op {
    Admit,
    Retry,
    Record(bool),
    Refund,
    Advance(u64),
    Isolate,
    Reset,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Admit),
        2 => Just(Op::Retry),
        6 => any::<bool>().prop_map(Op::Record),
        1 => Just(Op::Refund),
        3 => (0u64..7000).prop_map(Op::Advance),
        1 => Just(Op::Isolate),
        1 => Just(Op::Reset),
    ]
}

/// The breaker's rules, sequentially, on a count window of `10·block`
/// calls (blocks of `block`), in milliseconds.
#[derive(Debug)]
struct Model {
    block: usize,
    min_calls: usize,
    ratio_ppm: u64,
    probes_max: u32,
    state: BreakerState,
    outcomes: Vec<bool>,
    probes: u32,
    opens: u32,
    deadline: u64,
    now: u64,
}

const BREAK_MS: u64 = 5000;
const PROBE_TIMEOUT_MS: u64 = 3000;

impl Model {
    fn permit(&mut self) -> bool {
        match self.state {
            BreakerState::Closed => true,
            BreakerState::Isolated => false,
            BreakerState::Open if self.now >= self.deadline => {
                self.state = BreakerState::HalfOpen;
                self.probes = 1;
                self.deadline = self.now + PROBE_TIMEOUT_MS;
                true
            }
            BreakerState::Open => false,
            BreakerState::HalfOpen if self.probes < self.probes_max => {
                self.probes += 1;
                true
            }
            BreakerState::HalfOpen if self.now >= self.deadline => {
                self.probes = 1;
                self.deadline = self.now + PROBE_TIMEOUT_MS;
                true
            }
            BreakerState::HalfOpen => false,
        }
    }

    fn record(&mut self, failed: bool) {
        match self.state {
            BreakerState::Closed => {
                self.outcomes.push(failed);
                let len = self.outcomes.len();
                // The blocks end at the last one with a call in it.
                let kept = len.min(9 * self.block + (len - 1) % self.block + 1);
                let window = &self.outcomes[len - kept..];
                let failures = window.iter().filter(|&&f| f).count() as u64;
                let calls = window.len() as u64;
                if failed
                    && window.len() >= self.min_calls
                    && failures * 1_000_000 >= self.ratio_ppm * calls
                {
                    self.state = BreakerState::Open;
                    self.opens = 0;
                    self.deadline = self.now + BREAK_MS;
                }
            }
            BreakerState::HalfOpen if self.probes > 0 => {
                if failed {
                    self.state = BreakerState::Open;
                    self.opens += 1;
                    self.probes = 0;
                    self.deadline = self.now + BREAK_MS;
                } else {
                    self.close();
                }
            }
            _ => {}
        }
    }

    fn close(&mut self) {
        self.state = BreakerState::Closed;
        self.outcomes.clear();
        self.probes = 0;
        self.opens = 0;
    }
}

proptest! {
    /// The lock-free breaker against the sequential model: the same answer
    /// to every question, the same state, probes and re-openings after
    /// every step.
    #[test]
    fn matches_the_sequential_model(
        block in 1usize..4,
        min_calls in 1usize..12,
        ratio in prop_oneof![Just(0.2), Just(0.5), Just(1.0)],
        probes_max in 1u32..4,
        ops in proptest::collection::vec(op(), 0..300),
    ) {
        let clock = VirtualClock::new();
        // A count window holds at most its size (a larger minimum is a
        // configuration error).
        let min_calls = min_calls.min(10 * block);
        let b = breaker(
            CircuitBreaker::builder()
                .window(WindowKind::Count(10 * block as u32))
                .min_calls(min_calls as u32)
                .failure_ratio(ratio)
                .probes(probes_max)
                .break_duration(Duration::from_millis(BREAK_MS))
                .probe_timeout(Duration::from_millis(PROBE_TIMEOUT_MS)),
            &clock,
        );
        let mut model = Model {
            block,
            min_calls,
            ratio_ppm: (ratio * 1e6) as u64,
            probes_max,
            state: BreakerState::Closed,
            outcomes: Vec::new(),
            probes: 0,
            opens: 0,
            deadline: 0,
            now: 0,
        };
        for op in ops {
            match op {
                Op::Admit => prop_assert_eq!(b.admit().is_ok(), model.permit()),
                Op::Retry => prop_assert_eq!(b.allow_retry().is_ok(), model.permit()),
                Op::Record(failed) => {
                    b.record(if failed { Outcome::RetryableFailure } else { Outcome::Success });
                    model.record(failed);
                }
                Op::Refund => {
                    b.refund(Grant::Admit);
                    if model.state == BreakerState::HalfOpen && model.probes > 0 {
                        model.probes -= 1;
                    }
                }
                Op::Advance(ms) => {
                    clock.advance(Duration::from_millis(ms));
                    model.now += ms;
                }
                Op::Isolate => {
                    b.isolate();
                    model.state = BreakerState::Isolated;
                    model.probes = 0;
                }
                Op::Reset => {
                    b.reset();
                    model.close();
                }
            }
            let snap = b.snapshot();
            prop_assert_eq!(snap.state, model.state);
            prop_assert_eq!(snap.probes, if model.state == BreakerState::HalfOpen { model.probes } else { 0 });
            prop_assert_eq!(snap.reopenings, model.opens);
        }
    }
}
