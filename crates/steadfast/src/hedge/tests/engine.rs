//! The decision engine (`HedgePolicy` driven by hand): its configuration,
//! and its promises under random events.

use proptest::prelude::*;

use super::*;
use crate::call::{AttemptSet, StopReason, Verdict};
use crate::clock::VirtualClock;
use crate::policy::{HedgeAction, HedgeDecision, HedgeState};

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

/// A hedged copy is told how long the call waited with nothing in flight
/// before it: zero while earlier copies run, the pushback's hold when the
/// last copy in flight failed.
#[test]
fn a_copy_knows_the_wait_before_it() {
    let policy = HedgePolicy::builder(ms(100))
        .max_attempts(3)
        .build()
        .expect("a valid policy");
    let clock = VirtualClock::manual();
    let mut call = policy.start(&clock, None);
    let HedgeAction::Send(first) = policy.send_due(&mut call, &clock) else {
        panic!("the first copy goes at once");
    };
    assert_eq!(first.waited, Duration::ZERO);
    clock.advance(ms(100));
    let HedgeAction::Send(second) = policy.send_due(&mut call, &clock) else {
        panic!("the hedge is due");
    };
    assert_eq!(second.waited, Duration::ZERO, "copy 1 is still in flight");
    clock.advance(ms(10));
    policy.on_outcome(&mut call, 1, Verdict::Retry, &clock);
    policy.on_outcome(&mut call, 2, Verdict::RetryAfter(ms(300)), &clock);
    assert!(matches!(
        policy.send_due(&mut call, &clock),
        HedgeAction::WaitUntil(_)
    ));
    clock.advance(ms(300));
    let HedgeAction::Send(third) = policy.send_due(&mut call, &clock) else {
        panic!("the pushback is over");
    };
    assert_eq!((third.number, third.waited), (3, ms(300)));
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
        max_delay in 0u64..2000,
        limit in proptest::option::of(1u64..4000),
        allow in proptest::collection::vec(proptest::bool::weighted(0.8), 0..8),
        events in proptest::collection::vec(event(), 0..40),
    ) {
        let budget = Arc::new(Budget { allow, asked: AtomicU32::new(0), granted: AtomicU32::new(0) });
        let mut b = HedgePolicy::builder(ms(delay))
            .max_attempts(max_attempts)
            .max_delay(ms(max_delay))
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

        let pump = |call: &mut HedgeState,
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
                                let until = clock.now() + d.min(ms(max_delay));
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
