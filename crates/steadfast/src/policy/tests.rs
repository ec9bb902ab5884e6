//! The rules the policies share, on virtual time.

use std::time::Duration;

use proptest::prelude::*;

use super::{Decision, HedgePolicy, RetryPolicy, Wait};
use crate::backoff::Backoff;
use crate::call::{StopReason, Verdict};
use crate::clock::{Clock, VirtualClock};
use crate::deadline::Deadline;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A server hint longer than `max_delay` is charged to the schedule's
/// total-delay budget as the wait that really happens (the cap), not as the
/// hint: one `Retry-After: 3600` under `max_delay(10s)` and
/// `max_total_delay(60s)` leaves 50 s of budget, not none.
#[test]
fn a_capped_hint_charges_the_total_delay_budget_what_was_waited() {
    let backoff = Backoff::constant(secs(1))
        .max_total_delay(secs(60))
        .build()
        .expect("a valid backoff");
    let policy = RetryPolicy::builder()
        .backoff(backoff)
        .max_attempts(10)
        .max_delay(secs(10))
        .build()
        .expect("a valid policy");
    let clock = VirtualClock::new();
    let mut call = policy.start(&clock, None);
    assert_eq!(
        policy.decide(&mut call, Verdict::RetryAfter(secs(3600)), &clock),
        Decision::Retry(secs(10))
    );
    clock.advance(secs(10));
    // 10 s of the 60 s budget spent: the schedule goes on.
    assert_eq!(
        policy.decide(&mut call, Verdict::Retry, &clock),
        Decision::Retry(secs(1))
    );
    assert_eq!(call.waited(), secs(11));
    assert_eq!(
        call.schedule_state()
            .map(crate::backoff::ScheduleState::total),
        Some(secs(11))
    );
}

#[test]
fn one_name_caps_every_wait_in_both_policies() {
    let retry = RetryPolicy::builder()
        .max_delay(secs(2))
        .build()
        .expect("a valid policy");
    let hedge = HedgePolicy::builder(Duration::from_millis(5))
        .max_delay(secs(2))
        .build()
        .expect("a valid policy");
    assert_eq!(retry.limits().max_delay(), hedge.limits().max_delay());
    let now = VirtualClock::new().now();
    for limits in [retry.limits(), hedge.limits()] {
        assert_eq!(limits.wait(secs(9), None, now), Wait::Capped(secs(2)));
        assert_eq!(limits.wait(secs(1), None, now), Wait::AsWanted(secs(1)));
    }
}

#[test]
fn a_hint_the_deadline_cannot_hold_stops_the_call_and_says_so() {
    let policy = RetryPolicy::builder()
        .max_delay(secs(10))
        .build()
        .expect("a valid policy");
    let clock = VirtualClock::new();
    let deadline = Deadline::after(clock.now(), secs(2));
    assert_eq!(
        policy
            .limits()
            .wait(secs(3600), Some(deadline), clock.now()),
        Wait::PastDeadline
    );
    let mut call = policy.start(&clock, Some(deadline));
    assert_eq!(
        policy.decide(&mut call, Verdict::RetryAfter(secs(3600)), &clock),
        Decision::Stop(StopReason::Deadline)
    );
}

proptest! {
    /// The wait is never longer than the cap, never reaches past the
    /// deadline, and is the wanted one whenever that fits both.
    #[test]
    fn the_wait_rule_holds_for_any_wish_cap_and_deadline(
        wanted_ms in 0u64..10_000_000,
        cap_ms in 0u64..1_000_000,
        left_ms in proptest::option::of(0u64..2_000_000),
    ) {
        let policy = RetryPolicy::builder()
            .max_delay(Duration::from_millis(cap_ms))
            .build()
            .expect("a valid policy");
        let now = VirtualClock::new().now();
        let deadline = left_ms.map(|ms| Deadline::after(now, Duration::from_millis(ms)));
        let wanted = Duration::from_millis(wanted_ms);
        let cap = Duration::from_millis(cap_ms);
        match policy.limits().wait(wanted, deadline, now) {
            Wait::AsWanted(d) => {
                prop_assert_eq!(d, wanted);
                prop_assert!(d <= cap);
                prop_assert!(deadline.is_none_or(|x| d < x.remaining(now)));
            }
            Wait::Capped(d) => {
                prop_assert_eq!(d, cap);
                prop_assert!(wanted > cap);
                prop_assert!(deadline.is_none_or(|x| d < x.remaining(now)));
            }
            Wait::PastDeadline => {
                let x = deadline.expect("only a deadline refuses a wait");
                prop_assert!(wanted.min(cap) >= x.remaining(now));
            }
        }
    }
}
