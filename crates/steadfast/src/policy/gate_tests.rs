//! The gate on virtual time: its order, its two modes, the bounds on every
//! wait it offers, and a ticket's slot given back exactly once.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::Limits;
use super::gate::{Admission, Ticket};
use crate::call::{Refused, Verdict};
use crate::classify::AnyError;
use crate::clock::{Clock, VirtualClock};
use crate::deadline::Deadline;
use crate::limit::ConcurrencyLimit;
use crate::rate::{Quota, RateLimit};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A clock that must not be read: the gate's common case reads none.
#[derive(Debug, Clone)]
struct Unread;

impl Clock for Unread {
    fn now(&self) -> Instant {
        panic!("the gate read the clock")
    }
    fn sleep_blocking(&self, _: Duration) {
        panic!("the gate slept")
    }
}

/// Ten turns a second, one at a time, on `clock`.
fn ten_a_second(clock: &VirtualClock) -> RateLimit {
    let quota = Quota::per_second(10).unwrap().with_burst(1).unwrap();
    RateLimit::builder()
        .name("api")
        .quota(quota)
        .build_with_clock(clock.clone())
        .unwrap()
}

fn admitted(admission: Admission) -> Ticket {
    match admission {
        Admission::Admitted(ticket) => ticket,
        other => panic!("expected a ticket, got {other:?}"),
    }
}

#[test]
fn without_limits_every_attempt_gets_a_free_ticket_and_no_clock_is_read() {
    let limits = Limits::default();
    let deadline = Deadline::at(Instant::now() + ms(1));
    let ticket = admitted(limits.admit(Some(deadline), &[], &Unread));
    assert!(!ticket.holds_slot());
    assert!(!limits.admit_now(&[], &Unread).unwrap().holds_slot());
}

#[test]
fn a_full_limit_queues_an_attempt_that_may_wait_and_refuses_one_that_may_not() {
    let clock = VirtualClock::manual();
    let limit = ConcurrencyLimit::fixed(1)
        .name("db")
        .queue(4, ms(500))
        .build_with_clock(clock.clone())
        .unwrap();
    let limits = Limits::default().with_concurrency_limit(limit.clone());
    let held = admitted(limits.admit(None, &[], &clock));
    assert_eq!(limit.in_flight(), 1);
    // May wait: a place in the queue, for the queue's own bound.
    let Admission::Queue(queue) = limits.admit(None, &[], &clock) else {
        panic!("expected a queue")
    };
    assert_eq!(queue.bound(), ms(500));
    // A deadline closer than that bounds the wait.
    let soon = Deadline::after(clock.now(), ms(120));
    let Admission::Queue(queue) = limits.admit(Some(soon), &[], &clock) else {
        panic!("expected a queue")
    };
    assert_eq!(queue.bound(), ms(120));
    // Neither asking counted a refusal.
    assert_eq!(limit.snapshot().refused, 0);
    // A deadline already past: no wait fits, refused (and counted).
    let past = Deadline::after(clock.now(), Duration::ZERO);
    let Admission::Refused(Refused::Limit(refused)) = limits.admit(Some(past), &[], &clock) else {
        panic!("expected a refusal")
    };
    assert_eq!((refused.by, refused.in_flight, refused.limit), ("db", 1, 1));
    // Never waiting (a hedged copy): refused at once.
    let Err(Refused::Limit(_)) = limits.admit_now(&[], &Unread) else {
        panic!("expected a refusal")
    };
    assert_eq!(limit.snapshot().refused, 2);
    // The held ticket, given back, frees the slot for the next one.
    held.finish(&AnyError, Verdict::Success, &Ok::<(), ()>(()), &Unread);
    assert_eq!(limit.in_flight(), 0);
    assert!(limits.admit_now(&[], &Unread).unwrap().holds_slot());
}

#[test]
fn the_rate_limit_comes_first_and_its_turn_is_taken_before_the_slot() {
    let clock = VirtualClock::manual();
    let rate = ten_a_second(&clock);
    let limit = ConcurrencyLimit::fixed(2)
        .build_with_clock(clock.clone())
        .unwrap();
    let limits = Limits::default()
        .with_rate_limit_waiting(rate.clone(), ms(300))
        .with_concurrency_limit(limit.clone());
    let first = admitted(limits.admit(None, &[], &clock));
    assert_eq!(limit.in_flight(), 1);
    // The next turn is 100 ms away: booked, and no slot is held meanwhile.
    let Admission::Turn(turn) = limits.admit(None, &[], &clock) else {
        panic!("expected a turn")
    };
    assert_eq!(turn.wait(), ms(100));
    assert_eq!(limit.in_flight(), 1);
    // A third would wait 200 ms; a deadline 150 ms away refuses it, saying when.
    let soon = Deadline::after(clock.now(), ms(150));
    let Admission::Refused(Refused::Rate(refused)) = limits.admit(Some(soon), &[], &clock) else {
        panic!("expected a refusal")
    };
    assert_eq!((refused.by, refused.retry_after), ("api", Some(ms(200))));
    // The turn comes: taken, then the concurrency limit's slot.
    clock.advance(turn.wait());
    let second = admitted(turn.take(&limits, &[], &clock));
    assert_eq!(limit.in_flight(), 2);
    drop((first, second));
    assert_eq!(limit.in_flight(), 0);
    // A copy never waits: the next turn is 100 ms away, so it is refused.
    assert!(matches!(
        limits.admit_now(&[], &Unread),
        Err(Refused::Rate(_))
    ));
}

#[test]
fn a_turn_given_up_or_dropped_goes_back_to_the_limit() {
    let clock = VirtualClock::manual();
    let rate = ten_a_second(&clock);
    let limits = Limits::default().with_rate_limit_waiting(rate.clone(), ms(1000));
    let _now = admitted(limits.admit(None, &[], &clock));
    let Admission::Turn(turn) = limits.admit(None, &[], &clock) else {
        panic!("expected a turn")
    };
    let refused = turn.give_up(&limits);
    assert_eq!((refused.by, refused.retry_after), ("api", Some(ms(100))));
    // The turn given up is free again: the next caller gets it.
    let Admission::Turn(turn) = limits.admit(None, &[], &clock) else {
        panic!("expected a turn")
    };
    assert_eq!(turn.wait(), ms(100));
    drop(turn);
    let Admission::Turn(again) = limits.admit(None, &[], &clock) else {
        panic!("expected a turn")
    };
    assert_eq!(again.wait(), ms(100));
}

#[test]
fn a_queue_that_cannot_be_waited_in_is_a_counted_refusal() {
    let clock = VirtualClock::manual();
    let limit = ConcurrencyLimit::fixed(1)
        .queue(1, ms(100))
        .build_with_clock(clock.clone())
        .unwrap();
    let limits = Limits::default().with_concurrency_limit(limit.clone());
    let _held = admitted(limits.admit(None, &[], &clock));
    let Admission::Queue(queue) = limits.admit(None, &[], &clock) else {
        panic!("expected a queue")
    };
    let refused = queue.give_up();
    assert_eq!((refused.in_flight, refused.limit), (1, 1));
    assert_eq!(limit.snapshot().refused, 1);
}

#[test]
fn a_ticket_tells_the_limit_what_its_attempt_showed() {
    let limit = ConcurrencyLimit::fixed(4).build().unwrap();
    let limits = Limits::default().with_concurrency_limit(limit.clone());
    // Finished with each verdict, dropped unfinished, timed out: every
    // path gives the slot back.
    let outcomes: [(Verdict, Result<(), ()>); 3] = [
        (Verdict::Success, Ok(())),
        (Verdict::Retry, Err(())),
        (Verdict::RetryAfter(ms(5)), Err(())),
    ];
    for (verdict, outcome) in outcomes {
        let ticket = limits.admit_now(&[], &Unread).unwrap();
        assert_eq!(limit.in_flight(), 1);
        ticket.finish(&AnyError, verdict, &outcome, &Unread);
        assert_eq!(limit.in_flight(), 0);
    }
    drop(limits.admit_now(&[], &Unread).unwrap());
    limits.admit_now(&[], &Unread).unwrap().timed_out(&Unread);
    limits
        .admit_now(&[], &Unread)
        .unwrap()
        .end(Verdict::Stop, false);
    assert_eq!(limit.in_flight(), 0);
}

/// What a caller does with the gate's answer.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Asks without waiting, keeping the ticket if it gets one.
    Now,
    /// Asks, may wait: keeps a ticket, waits in a queue (gives up, or is
    /// handed a slot when one frees), takes a turn.
    MayWait,
    /// Finishes the oldest ticket held.
    Finish,
    /// Drops the newest ticket held.
    Drop,
    /// Time passes.
    Advance(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Now),
        Just(Step::MayWait),
        Just(Step::Finish),
        Just(Step::Drop),
        (1u8..200).prop_map(Step::Advance),
    ]
}

proptest! {
    /// Whatever callers do, the concurrency limit never has more slots out
    /// than it allows, every slot held is a ticket, a copy is never offered
    /// a wait, and when every ticket is gone every slot is back.
    #[test]
    fn slots_out_always_match_tickets_held(
        slots in 1u32..4,
        queued in proptest::bool::ANY,
        rated in proptest::bool::ANY,
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let clock = VirtualClock::manual();
        let mut builder = ConcurrencyLimit::fixed(slots);
        if queued {
            builder = builder.queue(8, ms(50));
        }
        let limit = builder.build_with_clock(clock.clone()).unwrap();
        let mut limits = Limits::default().with_concurrency_limit(limit.clone());
        if rated {
            limits = limits.with_rate_limit_waiting(ten_a_second(&clock), ms(250));
        }
        let mut held: Vec<Ticket> = Vec::new();
        for step in steps {
            match step {
                Step::Now => {
                    if let Ok(ticket) = limits.admit_now(&[], &Unread) {
                        held.push(ticket);
                    }
                }
                Step::MayWait => match limits.admit(None, &[], &clock) {
                    Admission::Admitted(ticket) => held.push(ticket),
                    Admission::Turn(turn) => {
                        prop_assert!(rated);
                        prop_assert!(turn.wait() <= ms(250));
                        clock.advance(turn.wait());
                        if let Admission::Admitted(ticket) = turn.take(&limits, &[], &clock) {
                            held.push(ticket);
                        }
                    }
                    Admission::Queue(queue) => {
                        prop_assert!(queued);
                        prop_assert!(queue.bound() <= ms(50));
                        let _ = queue.give_up();
                    }
                    Admission::Refused(_) => {}
                },
                Step::Finish => {
                    if !held.is_empty() {
                        held.remove(0).finish(&AnyError, Verdict::Success, &Ok::<(), ()>(()), &Unread);
                    }
                }
                Step::Drop => {
                    held.pop();
                }
                Step::Advance(n) => clock.advance(ms(u64::from(n))),
            }
            let out = u32::try_from(held.iter().filter(|t| t.holds_slot()).count()).unwrap();
            prop_assert_eq!(limit.in_flight(), out);
            prop_assert!(out <= slots);
        }
        held.clear();
        prop_assert_eq!(limit.in_flight(), 0);
    }
}
