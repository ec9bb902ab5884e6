//! Model checks of the transitions under racing threads.

use loom::sync::Arc;
use loom::thread;

use super::*;
use crate::clock::VirtualClock;

const BREAK: Duration = Duration::from_secs(5);

/// A breaker on a count window of 10 calls that opens at 2 calls with half
/// of them failing, with `probes` probes; and its clock.
fn shared(probes: u32) -> (Arc<CircuitBreaker<VirtualClock>>, VirtualClock) {
    let clock = VirtualClock::new();
    let breaker = CircuitBreaker::builder()
        .window(WindowKind::Count(10))
        .min_calls(2)
        .probes(probes)
        .break_duration(BREAK)
        .build_with_clock(clock.clone())
        .expect("valid settings");
    (Arc::new(breaker), clock)
}

/// Opens the breaker and lets the break pass (before any thread starts).
fn half_open_due(b: &CircuitBreaker<VirtualClock>, clock: &VirtualClock) {
    b.record(Outcome::RetryableFailure);
    b.record(Outcome::RetryableFailure);
    assert_eq!(b.state(), BreakerState::Open);
    clock.advance(BREAK);
}

fn spawn<T: 'static>(
    b: &Arc<CircuitBreaker<VirtualClock>>,
    f: impl FnOnce(&CircuitBreaker<VirtualClock>) -> T + 'static,
) -> thread::JoinHandle<T> {
    let b = Arc::clone(b);
    thread::spawn(move || f(&b))
}

/// Three threads race to probe a breaker whose break is over: exactly `k`
/// get through, whichever thread moves it to half-open.
fn exactly_k_probes(k: u32) {
    let (b, clock) = shared(k);
    half_open_due(&b, &clock);
    let handles: Vec<_> = (0..2).map(|_| spawn(&b, |b| b.admit().is_ok())).collect();
    let mine = b.allow_retry().is_ok();
    let granted = handles
        .into_iter()
        .map(|h| h.join().expect("no panic"))
        .chain([mine])
        .filter(|&ok| ok)
        .count();
    assert_eq!(granted, k as usize);
    let snap = b.snapshot();
    assert_eq!(snap.state, BreakerState::HalfOpen);
    assert_eq!(snap.probes, k);
    assert_eq!(snap.refusals, 3 - u64::from(k));
}

#[test]
fn one_probe_among_racing_threads() {
    loom::model(|| exactly_k_probes(1));
}

#[test]
fn two_probes_among_racing_threads() {
    loom::model(|| exactly_k_probes(2));
}

/// Two probes fail at once: the breaker opens again exactly once, with
/// its break set.
#[test]
fn racing_probe_failures_reopen_once() {
    loom::model(|| {
        let (b, clock) = shared(2);
        half_open_due(&b, &clock);
        assert!(b.admit().is_ok());
        assert!(b.admit().is_ok());
        let h = spawn(&b, |b| b.record(Outcome::RetryableFailure));
        b.record(Outcome::RetryableFailure);
        h.join().expect("no panic");
        let snap = b.snapshot();
        assert_eq!(snap.state, BreakerState::Open);
        assert_eq!(snap.openings, 2);
        assert_eq!(snap.reopenings, 1);
        assert_eq!(b.retry_after(b.name()), Some(BREAK));
    });
}

/// A probe success races a probe failure: the first one decides, and the
/// state agrees with the counts whichever it was.
#[test]
fn racing_probe_outcomes_decide_once() {
    loom::model(|| {
        let (b, clock) = shared(2);
        half_open_due(&b, &clock);
        assert!(b.admit().is_ok());
        assert!(b.admit().is_ok());
        let h = spawn(&b, |b| b.record(Outcome::Success));
        b.record(Outcome::RetryableFailure);
        h.join().expect("no panic");
        let snap = b.snapshot();
        match snap.state {
            // The success came first; the failure then counted in the
            // (new, empty) window.
            BreakerState::Closed => {
                assert_eq!((snap.openings, snap.reopenings), (1, 0));
                assert!(snap.calls <= 1);
            }
            BreakerState::Open => {
                assert_eq!((snap.openings, snap.reopenings), (2, 1));
                assert_eq!(b.retry_after(b.name()), Some(BREAK));
            }
            other => panic!("unexpected state {other}"),
        }
    });
}

/// Two failures trip the breaker at once: it opens once, and a racing
/// caller is either let through (before) or refused (after), never stuck
/// on a break without an end.
#[test]
fn racing_trips_open_once() {
    loom::model(|| {
        let (b, _clock) = shared(1);
        b.record(Outcome::RetryableFailure);
        let h = spawn(&b, |b| b.record(Outcome::RetryableFailure));
        let admit = spawn(&b, |b| b.admit().is_ok());
        b.record(Outcome::RetryableFailure);
        h.join().expect("no panic");
        let _ = admit.join().expect("no panic");
        let snap = b.snapshot();
        assert_eq!(snap.state, BreakerState::Open);
        assert_eq!(snap.openings, 1);
        assert_eq!(b.retry_after(b.name()), Some(BREAK));
    });
}

/// An abandoned probe's refund races a new caller: the slot is never
/// lost (no half-open with nothing in flight) and never doubled.
#[test]
fn refund_racing_a_probe() {
    loom::model(|| {
        let (b, clock) = shared(1);
        half_open_due(&b, &clock);
        assert!(b.admit().is_ok());
        let refund = spawn(&b, |b| b.refund(Grant::Admit));
        let probe = spawn(&b, |b| b.admit().is_ok());
        refund.join().expect("no panic");
        let probed = probe.join().expect("no panic");
        assert_eq!(b.snapshot().probes, u32::from(probed));
        // Whatever the order, one more probe is possible now or was taken.
        assert_eq!(b.admit().is_ok(), !probed);
    });
}
