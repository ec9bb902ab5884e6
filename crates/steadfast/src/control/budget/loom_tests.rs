//! Model checks of the budget's withdrawals, deposits and refunds under racing threads.

use super::*;
use loom::sync::Arc;
use loom::thread;
use std::time::Instant;

/// A budget (ttl 10 s) on `clock`, shared between model threads.
fn shared(percent: f64, min_per_sec: u32, clock: &Stepped) -> Arc<RetryBudget<Stepped>> {
    Arc::new(
        RetryBudget::builder()
            .percent(percent)
            .min_per_sec(min_per_sec)
            .build_with_clock(clock.clone())
            .expect("valid settings"),
    )
}

/// `threads` threads race for the `worth` retries a budget at `percent`
/// holds after two calls: at most `worth` are granted, the window counts
/// exactly the granted ones (refusals undone), and every refusal is
/// counted once.
fn racing_withdrawals(percent: f64, threads: u64, worth: usize) {
    let b = shared(percent, 0, &Stepped::new()); // time stands still
    b.admit().unwrap();
    b.admit().unwrap();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let b = Arc::clone(&b);
            thread::spawn(move || b.allow_retry().is_ok())
        })
        .collect();
    let granted = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .filter(|&ok| ok)
        .count();
    assert!(granted <= worth);
    assert_eq!(b.snapshot().retries, granted as u64);
    assert_eq!(b.snapshot().refusals, threads - granted as u64);
}

/// Two threads race for the last retry: at most one gets it.
#[test]
fn racing_withdrawals_never_overdraw() {
    loom::model(|| racing_withdrawals(50.0, 2, 1));
}

/// Concurrent deposits are all counted.
#[test]
fn concurrent_deposits_are_not_lost() {
    loom::model(|| {
        let b = shared(10.0, 10, &Stepped::new());
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let b = Arc::clone(&b);
                thread::spawn(move || b.admit().unwrap())
            })
            .collect();
        b.admit().unwrap();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(b.snapshot().requests, 3);
    });
}

/// A clock moved by hand between model steps (its offset is not part of
/// the model: only the main thread moves it, before spawning).
#[derive(Debug, Clone)]
struct Stepped(Instant, std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Stepped {
    fn new() -> Self {
        Self(Instant::now(), std::sync::Arc::default())
    }
    fn set_millis(&self, millis: u64) {
        self.1.store(millis, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for Stepped {
    fn now(&self) -> Instant {
        self.0 + Duration::from_millis(self.1.load(std::sync::atomic::Ordering::SeqCst))
    }
    fn sleep_blocking(&self, _: Duration) {}
}

/// Three threads race for two retries' worth: at most two are granted.
#[test]
fn three_racing_withdrawals_never_overdraw() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| racing_withdrawals(100.0, 3, 2));
}

/// A refunded deposit from a past slot (the cached part of the window)
/// races a withdrawal: the withdrawal never spends the refunded
/// deposit's share twice, and afterwards the cache agrees with the
/// window (a fresh withdrawal is decided as the full sum says).
#[test]
fn refund_of_a_past_deposit_racing_a_withdrawal() {
    loom::model(|| {
        let clock = Stepped::new();
        let b = shared(100.0, 0, &clock);
        b.admit().unwrap();
        b.admit().unwrap(); // two retries' worth, in slot 0
        clock.set_millis(1500); // slot 1: slot 0 is now cached as past
        assert!(b.allow_retry().is_ok()); // caches the past, one left
        let granted = refund_racing_withdrawal(&b, Grant::Admit);
        let snap = b.snapshot();
        assert_eq!(snap.requests, 1);
        assert_eq!(snap.retries, 1 + u64::from(granted));
        // At most the two deposits' worth was ever spent.
        assert!(snap.available >= -1.0);
        // Whatever the order, the cache now says what the window says.
        assert_eq!(b.allow_retry().is_ok(), snap.available >= 1.0);
    });
}

/// Refunds `grant` on one thread while another asks for a retry; whether
/// the retry was granted.
fn refund_racing_withdrawal(b: &Arc<RetryBudget<Stepped>>, grant: Grant) -> bool {
    let refund = {
        let b = Arc::clone(b);
        thread::spawn(move || b.refund(grant))
    };
    let withdraw = {
        let b = Arc::clone(b);
        thread::spawn(move || b.allow_retry().is_ok())
    };
    refund.join().unwrap();
    withdraw.join().unwrap()
}

/// A refunded withdrawal from a past slot (raising the balance) races a
/// withdrawal; afterwards the cache has caught up with the refund.
#[test]
fn refund_of_a_past_withdrawal_reaches_the_cache() {
    loom::model(|| {
        let clock = Stepped::new();
        let b = shared(100.0, 0, &clock);
        b.admit().unwrap();
        assert!(b.allow_retry().is_ok()); // slot 0: one deposit, one retry
        clock.set_millis(1500);
        assert!(b.allow_retry().is_err()); // caches the past: nothing left
        let granted = refund_racing_withdrawal(&b, Grant::Retry);
        let snap = b.snapshot();
        assert_eq!(snap.retries, u64::from(granted));
        assert!(snap.available >= 0.0);
        assert_eq!(b.allow_retry().is_ok(), snap.available >= 1.0);
    });
}
