//! Load amplification, measured: the real blocking retry executor and
//! `RetryPolicy` on a `VirtualClock`, against a backend that fails every
//! attempt for a while, then recovers. Deterministic (seeded random
//! failures, virtual time), never sleeps for real.
//!
//! 10,000 calls, one every 10 ms (100 s of traffic); the outage is 20 s to
//! 60 s. Each call may make 3 attempts, 1 ms apart. "Amplification" is the
//! attempts the backend received during the outage divided by the calls
//! started during it: about 3.0 for plain retries.
//!
//! Figures (printed with `--nocapture`) go into BENCHMARKS.md.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use steadfast::backoff::Rng;
use steadfast::clock::{Clock, VirtualClock};
use steadfast::control::{AdaptiveThrottle, AllOf, FailureWindow, RetryBudget, TokenBucket};
use steadfast::{Attempt, Backoff, BlockingRetryable, RetryControl, RetryPolicy};

const CALLS: u64 = 10_000;
const SPACING: Duration = Duration::from_millis(10);
const OUTAGE: Range<Duration> = Duration::from_secs(20)..Duration::from_secs(60);
/// The budget's ttl: its window, and the transient at the outage's onset.
const BUDGET_TTL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unavailable;

#[derive(Debug, Default)]
struct Stats {
    calls: u64,
    succeeded: u64,
    /// Calls started, and attempts received, in `window` (see `run`).
    calls_in: u64,
    attempts_in: u64,
    /// The same, from one budget ttl after the outage began (steady state).
    steady_calls: u64,
    steady_attempts: u64,
}

impl Stats {
    fn amplification(&self) -> f64 {
        self.attempts_in as f64 / self.calls_in as f64
    }
    fn steady_amplification(&self) -> f64 {
        self.steady_attempts as f64 / self.steady_calls as f64
    }
    fn success_rate(&self) -> f64 {
        self.succeeded as f64 / self.calls as f64
    }
}

/// Runs the 10,000 calls. `outage`: whether the backend goes down;
/// `failure_rate`: independent random failures otherwise.
fn run(
    make_control: impl FnOnce(&VirtualClock) -> Option<Arc<dyn RetryControl>>,
    outage: bool,
    failure_rate: f64,
) -> Stats {
    let clock = VirtualClock::new();
    let t0 = clock.now();
    // A constant 1 ms between attempts (the policy's `max_attempts` limits them).
    let constant = Backoff::constant(Duration::from_millis(1))
        .build()
        .expect("valid backoff");
    let mut builder = RetryPolicy::builder().backoff(constant).max_attempts(3);
    if let Some(control) = make_control(&clock) {
        builder = builder.control(control);
    }
    let policy = builder.build().expect("valid policy");
    let mut rng = Rng::with_seed(2024);
    let mut stats = Stats::default();
    let steady = OUTAGE.start + BUDGET_TTL..OUTAGE.end;
    let since = |at: Instant| at.saturating_duration_since(t0);
    for i in 0..CALLS {
        let start = t0 + SPACING * u32::try_from(i).expect("small");
        let now = clock.now();
        if now < start {
            clock.sleep_blocking(start - now);
        }
        let started = since(clock.now());
        let in_outage = outage && OUTAGE.contains(&started);
        stats.calls += 1;
        stats.calls_in += u64::from(in_outage);
        stats.steady_calls += u64::from(outage && steady.contains(&started));
        let result = (|_: Attempt| {
            let at = since(clock.now());
            let down = outage && OUTAGE.contains(&at);
            stats.attempts_in += u64::from(down);
            stats.steady_attempts += u64::from(outage && steady.contains(&at));
            if down || rng.unit_f64() < failure_rate {
                Err(Unavailable)
            } else {
                Ok(())
            }
        })
        .retry_blocking(&policy)
        .when(|_: &Unavailable| true)
        .clock(clock.clone())
        .call();
        stats.succeeded += u64::from(result.is_ok());
    }
    stats
}

fn token_bucket(_: &VirtualClock) -> Option<Arc<dyn RetryControl>> {
    let bucket = TokenBucket::builder()
        .max_tokens(10)
        .token_ratio(0.1)
        .build();
    Some(Arc::new(bucket.expect("valid")))
}

fn budget(clock: &VirtualClock) -> Option<Arc<dyn RetryControl>> {
    let budget = RetryBudget::builder()
        .percent(10.0)
        .min_per_sec(0)
        .ttl(BUDGET_TTL)
        .build_with_clock(clock.clone());
    Some(Arc::new(budget.expect("valid")))
}

fn plain(_: &VirtualClock) -> Option<Arc<dyn RetryControl>> {
    None
}

#[test]
fn plain_retries_triple_the_load() {
    let s = run(plain, true, 0.0);
    eprintln!("plain: amplification {:.4}", s.amplification());
    assert!(
        (2.95..=3.0).contains(&s.amplification()),
        "{}",
        s.amplification()
    );
    assert_eq!(s.calls_in, 4000);
}

#[test]
fn token_bucket_stops_retries_in_an_outage() {
    let s = run(token_bucket, true, 0.0);
    eprintln!("token bucket: amplification {:.4}", s.amplification());
    // Five failures take the full bucket (10) to the threshold (5); after
    // that only first attempts go out.
    assert!(s.amplification() <= 1.1, "{}", s.amplification());
    assert!(s.attempts_in - s.calls_in <= 5);
    // And it recovers: every call after the outage succeeds.
    assert_eq!(s.succeeded, CALLS - s.calls_in);
}

#[test]
fn budget_caps_retries_at_ten_percent() {
    let s = run(budget, true, 0.0);
    eprintln!(
        "retry budget 10 %: amplification {:.4} over the whole outage, {:.4} from 1 ttl in",
        s.amplification(),
        s.steady_amplification()
    );
    // Retries are counted in the same sliding window as the calls, so over
    // any ttl-long stretch they are at most 10 % of its calls. The outage
    // here is a whole number of ttl windows, aligned with the budget's slots,
    // so the whole outage is capped at 1.1 too; unaligned, the bound would be
    // 10 % of the calls in the windows covering it (one ttl more).
    assert!(s.amplification() <= 1.1, "{}", s.amplification());
    assert!(
        s.steady_amplification() <= 1.1,
        "{}",
        s.steady_amplification()
    );
    // And the budget does let retries through: very nearly the full 10 %.
    assert!(s.amplification() >= 1.09, "{}", s.amplification());
    assert_eq!(s.succeeded, CALLS - s.calls_in);
}

#[test]
fn controls_let_random_failures_through() {
    for (name, control) in [
        ("token bucket", token_bucket as fn(&VirtualClock) -> _),
        ("retry budget", budget),
    ] {
        let s = run(control, false, 0.01);
        eprintln!(
            "{name}, 1 % random failures: {:.4} % succeeded",
            100.0 * s.success_rate()
        );
        assert!(s.success_rate() >= 0.999, "{name}: {}", s.success_rate());
    }
    let s = run(plain, false, 0.01);
    assert!(s.success_rate() >= 0.999);
}

/// The other controls, for the record: the failure window, client-side
/// throttling (which also sheds first attempts, so the backend sees fewer
/// attempts than calls), and the bucket and the budget together.
#[test]
fn other_controls_in_the_same_outage() {
    let window = |_: &VirtualClock| -> Option<Arc<dyn RetryControl>> {
        let w = FailureWindow::builder().bytes(16).threshold(16).build();
        Some(Arc::new(w.expect("valid")))
    };
    let sre = |clock: &VirtualClock| -> Option<Arc<dyn RetryControl>> {
        let t = AdaptiveThrottle::builder()
            .window(Duration::from_secs(10))
            .seed(7)
            .build_with_clock(clock.clone());
        Some(Arc::new(t.expect("valid")))
    };
    let both = |clock: &VirtualClock| -> Option<Arc<dyn RetryControl>> {
        Some(Arc::new(AllOf::new(vec![
            token_bucket(clock).expect("some"),
            budget(clock).expect("some"),
        ])))
    };
    let w = run(window, true, 0.0);
    eprintln!("failure window: amplification {:.4}", w.amplification());
    assert!(w.amplification() <= 1.1);
    let t = run(sre, true, 0.0);
    eprintln!(
        "adaptive throttle (K = 2): amplification {:.4}",
        t.amplification()
    );
    // K = 2: the backend keeps seeing up to about twice what it accepts
    // (nothing here), so attempts fall well below calls.
    assert!(t.amplification() < 1.0);
    let b = run(both, true, 0.0);
    eprintln!(
        "token bucket + budget: amplification {:.4}",
        b.amplification()
    );
    assert!(b.amplification() <= 1.1);
}
