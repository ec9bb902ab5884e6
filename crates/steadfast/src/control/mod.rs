//! Adaptive retry control: shared objects that decide whether a retry (or a
//! hedge, or even a first attempt) may happen at all.
//!
//! Retries help against a blip and hurt during an outage: if every client
//! retries three times, a struggling server sees three times its load just
//! when it can least take it. A control watches the outcomes of every call
//! that shares it and, when things look bad, refuses retries (and hedges) as
//! a group. A policy still owns delays and attempt counts; a control only
//! says yes or no.
//!
//! | control | rule | source |
//! |---|---|---|
//! | [`FailureWindow`] | refuse while more than `threshold` of the last `8·n` attempts failed | ring of bits |
//! | [`TokenBucket`] | tokens: failure −1, success +ratio; refuse while tokens ≤ max/2 | gRFC A6 retry throttling |
//! | [`RetryBudget`] | retries ≤ percent of recent calls + a minimum per second | Finagle `RetryBudget` |
//! | [`AdaptiveThrottle`] | reject locally with probability `max(0, (req − K·acc) / (req + 1))` | Google SRE book, "Handling Overload" |
//! | [`CircuitBreaker`] | refuse every call for a break once the failure ratio over a window reaches a threshold; then let K probes decide | Polly v8, resilience4j |
//! | [`AllOf`] | every member must allow; refunds the members that had already said yes | steadfast |
//!
//! Every control lives behind an `Arc`, is lock-free (atomic words only; no
//! mutex on any path), exposes a typed `snapshot()` for telemetry, emits a
//! `tracing` event at `info` level when it starts refusing and when it
//! recovers, and names itself in the [`Refusal`] it returns. The events are
//! debounced so that a control hovering at its threshold does not log one
//! per call: "started refusing" comes with the first refusal, "recovered"
//! only once the control is clearly clear (the token bucket back to 3/4 of
//! `maxTokens`, the failure window down to half its threshold, the budget
//! and the throttle a full tenth of their window without a refusal).
//!
//! The retry engine, the hedger, the tower layer and the gRPC layer all take
//! an `Arc<dyn RetryControl>`; give the *same* object to the retry policy and
//! the hedging policy so hedges cannot bypass retry control:
//!
//! ```
//! use std::sync::Arc;
//! use steadfast::control::{AllOf, RetryBudget, RetryControl, TokenBucket};
//!
//! # fn main() -> Result<(), steadfast::ConfigError> {
//! let shared: Arc<dyn RetryControl> = Arc::new(AllOf::new(vec![
//!     Arc::new(TokenBucket::builder().max_tokens(10).token_ratio(0.1).build()?),
//!     Arc::new(RetryBudget::builder().percent(10.0).build()?),
//! ]));
//! let for_retries = Arc::clone(&shared);
//! let for_hedges = Arc::clone(&shared);
//! assert!(for_retries.admit().is_ok());
//! assert!(for_hedges.allow_retry().is_ok());
//! # Ok(()) }
//! ```
//!
//! ## Model checking
//!
//! The atomics come from a small shim that switches to `loom`'s under
//! `--cfg loom`; the model tests (no lost update, no torn read, no overdraw
//! under two or three threads) run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p steadfast --release --lib control::
//! ```
//!
//! `.ci/run` runs them (and the concurrency limits') with
//! `LOOM_MAX_PREEMPTIONS=2`, which bounds each model to about a minute in
//! all; without it they take about six.

mod adaptive_throttle;
mod all_of;
mod budget;
mod circuit_breaker;
mod failure_window;
mod slots;

mod token_bucket;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

pub use adaptive_throttle::{AdaptiveThrottle, AdaptiveThrottleBuilder, AdaptiveThrottleSnapshot};
pub use all_of::{AllOf, AllOfSnapshot};
pub use budget::{RetryBudget, RetryBudgetBuilder, RetryBudgetSnapshot};
pub use circuit_breaker::{
    BreakerState, CircuitBreaker, CircuitBreakerBuilder, CircuitBreakerSnapshot, WindowKind,
};
pub use failure_window::{FailureWindow, FailureWindowBuilder, FailureWindowSnapshot};
pub use token_bucket::{TokenBucket, TokenBucketBuilder, TokenBucketSnapshot};

use crate::sync::{AtomicBool, Ordering};

use crate::call::Verdict;

/// What happened to one attempt, as a control sees it.
///
/// ```
/// use steadfast::control::Outcome;
/// assert_ne!(Outcome::Success, Outcome::RetryableFailure);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The attempt succeeded (or failed in a way that says the server is
    /// healthy, such as a permanent client error).
    Success,
    /// The attempt failed in a way that would be retried: the server may be
    /// in trouble.
    RetryableFailure,
}

impl Outcome {
    /// What a control hears of an attempt whose outcome the classifier
    /// judged `verdict`: a success for [`Verdict::Success`]; a retryable
    /// failure for [`Verdict::Retry`], [`Verdict::RetryAfter`],
    /// [`Verdict::StopSending`] (a pushback that forbids retries still
    /// says the server is in trouble) and [`Verdict::Unsent`] (a refused
    /// connection says the same); nothing for [`Verdict::Stop`] (a
    /// permanent error says nothing of the server's health). The one rule
    /// every executor and layer follows.
    ///
    /// ```
    /// use steadfast::Verdict;
    /// use steadfast::control::Outcome;
    /// assert_eq!(Outcome::of(Verdict::Success), Some(Outcome::Success));
    /// assert_eq!(Outcome::of(Verdict::StopSending), Some(Outcome::RetryableFailure));
    /// assert_eq!(Outcome::of(Verdict::Stop), None);
    /// ```
    #[inline]
    #[must_use]
    pub const fn of(verdict: Verdict) -> Option<Self> {
        match verdict {
            Verdict::Success => Some(Self::Success),
            Verdict::Retry | Verdict::RetryAfter(_) | Verdict::StopSending | Verdict::Unsent => {
                Some(Self::RetryableFailure)
            }
            Verdict::Stop => None,
        }
    }
}

/// Why a control refused.
///
/// ```
/// use steadfast::control::Refusal;
/// let refusal = Refusal { by: "token bucket" };
/// assert_eq!(refusal.to_string(), "refused by token bucket");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// Which control refused (for example `"token bucket"`).
    pub by: &'static str,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused by {}", self.by)
    }
}

impl std::error::Error for Refusal {}

/// A permission a control gave and may take back: see
/// [`RetryControl::refund`].
///
/// ```
/// use steadfast::control::Grant;
/// assert_ne!(Grant::Admit, Grant::Retry);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grant {
    /// An `Ok` from [`RetryControl::admit`].
    Admit,
    /// An `Ok` from [`RetryControl::allow_retry`].
    Retry,
}

/// A shared decider of whether a call may go (again).
///
/// Executors call, in order: [`admit`](Self::admit) before a call's first
/// attempt, [`record`](Self::record) after every attempt that was classified
/// (successes and retryable failures; a permanent error is reported as a
/// [`Outcome::Success`] only by controls that choose to), and
/// [`allow_retry`](Self::allow_retry) before every retry or hedge.
///
/// ```
/// use steadfast::control::{Outcome, Refusal, RetryControl};
///
/// /// Allows retries only while the last attempt succeeded.
/// #[derive(Debug, Default)]
/// struct LastOutcome(std::sync::atomic::AtomicBool);
///
/// impl RetryControl for LastOutcome {
///     fn record(&self, outcome: Outcome) {
///         let failed = outcome == Outcome::RetryableFailure;
///         self.0.store(failed, std::sync::atomic::Ordering::Relaxed);
///     }
///     fn allow_retry(&self) -> Result<(), Refusal> {
///         if self.0.load(std::sync::atomic::Ordering::Relaxed) {
///             Err(Refusal { by: "last outcome" })
///         } else {
///             Ok(())
///         }
///     }
/// }
///
/// let control = LastOutcome::default();
/// control.record(Outcome::RetryableFailure);
/// assert_eq!(control.allow_retry(), Err(Refusal { by: "last outcome" }));
/// ```
pub trait RetryControl: fmt::Debug + Send + Sync {
    /// The name this control gives in its [`Refusal`]s and telemetry (for
    /// example `"token bucket"`).
    fn name(&self) -> &'static str {
        "retry control"
    }

    /// May a new call start? Only client-side throttling refuses first
    /// attempts; the default admits every call.
    fn admit(&self) -> Result<(), Refusal> {
        Ok(())
    }

    /// Reports the outcome of one attempt.
    fn record(&self, outcome: Outcome);

    /// May one more attempt (a retry or a hedge) be sent now? A `Ok` may
    /// consume budget.
    fn allow_retry(&self) -> Result<(), Refusal>;

    /// Takes back one permission this control granted when the attempt it
    /// allowed will not be sent after all (another control refused it, or
    /// the executor gave up for its own reason). Controls whose `Ok` costs
    /// nothing ignore it (the default); a [`RetryBudget`] gives the deposit
    /// or the withdrawal back. Call it at most once per `Ok`.
    fn refund(&self, grant: Grant) {
        let _ = grant;
    }

    /// Whether this control wants each attempt's duration
    /// ([`record_timed`](Self::record_timed)) rather than its outcome alone
    /// ([`record`](Self::record)). A policy asks once, when it is built, and
    /// only then reads the clock around its attempts; the default is `false`,
    /// so a policy whose control does not ask reads no clock for a success.
    /// A [`CircuitBreaker`] with a slow-call threshold asks.
    fn wants_durations(&self) -> bool {
        false
    }

    /// Reports the outcome of one attempt that took `duration` (from its
    /// start to its classified outcome). Executors call it, instead of
    /// [`record`](Self::record), for the controls that
    /// [want durations](Self::wants_durations); the default forgets the
    /// duration and records the outcome.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::control::{FailureWindow, Outcome, RetryControl};
    /// let window = FailureWindow::builder().build().unwrap();
    /// window.record_timed(Outcome::RetryableFailure, Duration::from_millis(30));
    /// assert_eq!(window.failures(), 1);
    /// ```
    fn record_timed(&self, outcome: Outcome, duration: Duration) {
        let _ = duration;
        self.record(outcome);
    }

    /// For a [`Refusal`] this control (or, for a combination, its member
    /// named `by`) just gave: how long it will go on refusing, when it knows.
    /// A [`CircuitBreaker`] knows: the rest of its break, after which it lets
    /// a probe through. The default, and every control whose refusals end
    /// with the traffic rather than the clock, says `None`. Executors ask it
    /// once per refused call (never on a call that was let through), to tell
    /// the caller in the error.
    fn retry_after(&self, by: &'static str) -> Option<Duration> {
        let _ = by;
        None
    }
}

impl<C: RetryControl + ?Sized> RetryControl for Arc<C> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn admit(&self) -> Result<(), Refusal> {
        (**self).admit()
    }
    fn record(&self, outcome: Outcome) {
        (**self).record(outcome);
    }
    fn allow_retry(&self) -> Result<(), Refusal> {
        (**self).allow_retry()
    }
    fn refund(&self, grant: Grant) {
        (**self).refund(grant);
    }
    fn wants_durations(&self) -> bool {
        (**self).wants_durations()
    }
    fn record_timed(&self, outcome: Outcome, duration: Duration) {
        (**self).record_timed(outcome, duration);
    }
    fn retry_after(&self, by: &'static str) -> Option<Duration> {
        (**self).retry_after(by)
    }
}

/// Race-safe, debounced detection of the "started refusing" / "recovered"
/// transitions: a flag flipped with `swap`, so exactly one of several racing
/// threads reports each flip. The flag goes up on the first sign of refusal
/// and comes down only on a stricter sign of recovery (each control says
/// which), so a control hovering at its threshold does not log an event per
/// call.
#[derive(Debug)]
pub(crate) struct RefusingFlag {
    refusing: AtomicBool,
}

impl RefusingFlag {
    pub(crate) fn new() -> Self {
        Self {
            refusing: AtomicBool::new(false),
        }
    }

    /// Whether the control is in its (reported) refusing state.
    pub(crate) fn get(&self) -> bool {
        self.refusing.load(Ordering::Relaxed)
    }

    /// Notes the control's state: `refusing` raises the flag, `recovered`
    /// (a stricter condition than `!refusing`) lowers it. Returns
    /// `Some(now_refusing)` when this call flipped the flag, and so must
    /// report the transition.
    #[inline]
    pub(crate) fn note(&self, refusing: bool, recovered: bool) -> Option<bool> {
        // A plain load first keeps the common case (no change) read-only.
        let reported = self.refusing.load(Ordering::Relaxed);
        if !reported && refusing {
            (!self.refusing.swap(true, Ordering::AcqRel)).then_some(true)
        } else if reported && recovered {
            self.refusing.swap(false, Ordering::AcqRel).then_some(false)
        } else {
            None
        }
    }
}

/// Emits the transition events every control shares.
pub(crate) fn report_transition(control: &'static str, now_refusing: bool, state: &dyn fmt::Debug) {
    if now_refusing {
        tracing::info!(control, state = ?state, "retry control started refusing");
    } else {
        tracing::info!(control, state = ?state, "retry control recovered");
    }
}

#[cfg(all(test, not(loom)))]
#[allow(clippy::float_cmp)] // the compared values are exact by construction
mod tests {
    use super::*;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    thread_local! {
        /// The messages collected on this thread, while `events_of` runs.
        static COLLECTED: std::cell::RefCell<Option<Vec<String>>> =
            const { std::cell::RefCell::new(None) };
    }

    /// The test binary's global subscriber: keeps the messages of the events
    /// emitted on a thread that is inside `events_of`, and ignores the rest.
    ///
    /// Global, not scoped per test: `tracing` caches each callsite's
    /// interest process-wide, and a scoped subscriber races with the other
    /// tests' threads (which have none) over that cache; events went missing
    /// in about one run in twenty.
    struct Collect;

    /// An event's message, and its `from` and `to` fields if it has both
    /// (a circuit breaker's state changes): `"message: from -> to"`.
    #[derive(Default)]
    struct Message {
        message: String,
        from: Option<String>,
        to: Option<String>,
    }

    impl Visit for Message {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            if field.name() == "message" {
                self.message = format!("{value:?}");
            }
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            match field.name() {
                "from" => self.from = Some(value.to_owned()),
                "to" => self.to = Some(value.to_owned()),
                _ => self.record_debug(field, &value),
            }
        }
    }

    impl Message {
        fn text(self) -> String {
            match (self.from, self.to) {
                (Some(from), Some(to)) => format!("{}: {from} -> {to}", self.message),
                _ => self.message,
            }
        }
    }

    impl Subscriber for Collect {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            COLLECTED.with_borrow_mut(|collected| {
                if let Some(messages) = collected {
                    let mut message = Message::default();
                    event.record(&mut message);
                    messages.push(message.text());
                }
            });
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// The messages of the events `f` emits on this thread.
    pub(super) fn events_of(f: impl FnOnce()) -> Vec<String> {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            tracing::subscriber::set_global_default(Collect)
                .expect("no other global subscriber in the unit tests");
        });
        // A callsite first registered by another thread just as the
        // subscriber was installed may hold a stale interest: recompute.
        tracing::callsite::rebuild_interest_cache();
        COLLECTED.set(Some(Vec::new()));
        f();
        COLLECTED.take().unwrap_or_default()
    }

    #[test]
    fn each_transition_is_reported_once() {
        let events = events_of(|| {
            let bucket = TokenBucket::builder().max_tokens(4).build().unwrap();
            for _ in 0..4 {
                bucket.record(Outcome::RetryableFailure); // crosses at 2 tokens
            }
            for _ in 0..30 {
                bucket.record(Outcome::Success); // recovered at 3 (3/4 of 4)
            }
            // Hovering at the threshold: one event, not one per call.
            let bucket = TokenBucket::builder().max_tokens(10).build().unwrap();
            for _ in 0..5 {
                bucket.record(Outcome::RetryableFailure); // 5 tokens: refusing
            }
            for _ in 0..3 {
                for _ in 0..10 {
                    bucket.record(Outcome::Success); // 6 tokens: allowed, not "recovered"
                }
                assert!(bucket.allow_retry().is_ok());
                bucket.record(Outcome::RetryableFailure); // 5 tokens: refusing
                assert!(bucket.allow_retry().is_err());
            }
            let window = FailureWindow::builder()
                .bytes(1)
                .threshold(1)
                .build()
                .unwrap();
            for _ in 0..16 {
                window.record(Outcome::RetryableFailure);
            }
            for _ in 0..8 {
                window.record(Outcome::Success);
            }
        });
        assert_eq!(
            events,
            [
                "retry control started refusing", // bucket 1 drained
                "retry control recovered",        // bucket 1 back at 3/4
                "retry control started refusing", // bucket 2, once despite hovering
                "retry control started refusing", // the window
                "retry control recovered",        // the window empty again
            ]
        );
    }

    #[test]
    fn decision_time_transitions_are_reported_once() {
        let events = events_of(|| {
            let clock = crate::clock::VirtualClock::new();
            let budget = RetryBudget::builder()
                .min_per_sec(1)
                .build_with_clock(clock.clone())
                .unwrap();
            // 10 retries in reserve, then refusals, and no event per refusal.
            for _ in 0..20 {
                let _ = budget.allow_retry();
            }
            // A grant in the same slot as the last refusal is not a recovery.
            budget.refund(Grant::Retry);
            assert!(budget.allow_retry().is_ok());
            assert!(budget.snapshot().refusing);
            // A grant a slot (ttl / 10) later is.
            budget.refund(Grant::Retry);
            crate::clock::Clock::sleep_blocking(&clock, std::time::Duration::from_secs(1));
            assert!(budget.allow_retry().is_ok());
            assert!(!budget.snapshot().refusing);
        });
        assert_eq!(
            events,
            ["retry control started refusing", "retry control recovered"]
        );
    }

    #[test]
    fn racing_flag_flips_are_reported_by_one_thread() {
        let flag = Arc::new(RefusingFlag::new());
        let flips: usize = (0..4)
            .map(|_| {
                let flag = Arc::clone(&flag);
                std::thread::spawn(move || {
                    (0..100)
                        .filter(|_| flag.note(true, false).is_some())
                        .count()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!(flips, 1);
        // Not refusing, but not recovered either: the flag stays up.
        assert_eq!(flag.note(false, false), None);
        assert_eq!(flag.note(false, true), Some(false));
        assert_eq!(flag.note(false, true), None);
    }

    /// A budget of one retry per call, with no per-second minimum.
    fn retry_per_call_budget() -> Arc<RetryBudget> {
        Arc::new(
            RetryBudget::builder()
                .percent(100.0)
                .min_per_sec(0)
                .build()
                .expect("valid settings"),
        )
    }

    #[test]
    fn all_of_refunds_the_members_that_granted() {
        let budget = retry_per_call_budget();
        let window = Arc::new(
            FailureWindow::builder()
                .bytes(1)
                .threshold(0)
                .build()
                .unwrap(),
        );
        let all = AllOf::new(vec![budget.clone(), window.clone()]);
        assert_eq!(all.name(), "all of");
        all.admit().unwrap();
        all.admit().unwrap(); // two retries' worth
        all.record(Outcome::RetryableFailure); // the window now refuses
        for _ in 0..5 {
            assert_eq!(
                all.allow_retry(),
                Err(Refusal {
                    by: "failure window"
                })
            );
        }
        // The budget granted five times and was refunded five times.
        assert_eq!(budget.snapshot().retries, 0);
        assert_eq!(budget.snapshot().available, 2.0);
        assert_eq!(
            all.snapshot().refusals,
            vec![("retry budget", 0), ("failure window", 5)]
        );
        // Once the window clears, the budget pays for exactly two retries.
        for _ in 0..8 {
            all.record(Outcome::Success);
        }
        assert!(all.allow_retry().is_ok());
        assert!(all.allow_retry().is_ok());
        assert_eq!(all.allow_retry(), Err(Refusal { by: "retry budget" }));
        // A refund through AllOf reaches the budget.
        all.refund(Grant::Retry);
        assert!(all.allow_retry().is_ok());
    }

    #[test]
    fn all_of_admit_refunds_the_deposit_when_a_later_member_refuses() {
        let budget = retry_per_call_budget();
        let throttle = Arc::new(AdaptiveThrottle::builder().seed(1).build().unwrap());
        let all = AllOf::new(vec![budget.clone(), throttle.clone()]);
        let admitted = (0..200).filter(|_| all.admit().is_ok()).count() as u64;
        // Nothing was ever accepted, so the throttle rejected most calls;
        // the budget kept deposits only for the calls that went out.
        assert!(admitted < 200);
        assert_eq!(budget.snapshot().requests, admitted);
        assert_eq!(throttle.rejections(), 200 - admitted);
    }

    #[test]
    fn an_empty_all_of_allows_everything() {
        let all = AllOf::new(vec![]);
        assert!(all.admit().is_ok());
        all.record(Outcome::RetryableFailure);
        assert!(all.allow_retry().is_ok());
    }
}
