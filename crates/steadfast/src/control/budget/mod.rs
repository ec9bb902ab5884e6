//! The retry budget: retries as a percentage of recent calls, plus a floor.

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

use std::fmt;
use std::time::Duration;

use super::slots::{Counter, TimeWindow};
use super::{Grant, Outcome, Refusal, RefusingFlag, RetryControl, report_transition};
use crate::clock::{Clock, Stopwatch, SystemClock};
use crate::config_error::ConfigError;
use crate::sync::{AtomicI64, AtomicU64, Ordering, StripedCounter};

const NAME: &str = "retry budget";

/// One retry, in the budget's fixed-point unit: thousandths of a percent of
/// one call (a call at `percent` deposits `percent * 1000` units).
const WITHDRAWAL: i128 = 100_000;

const REQUESTS: Counter = Counter::A;
const RETRIES: Counter = Counter::B;

/// Allows retries as a percentage of recent calls plus a minimum number per
/// second, over a sliding window of `ttl` (Finagle's `RetryBudget`, also
/// tower's `TpsBudget`).
///
/// Every call deposits on [`admit`](RetryControl::admit); every retry or
/// hedge withdraws on [`allow_retry`](RetryControl::allow_retry). Both expire
/// after `ttl`. A retry is allowed while
///
/// ```text
/// min_per_sec · ttl  +  percent/100 · calls(ttl)  −  retries(ttl)  ≥  1
/// ```
///
/// The arithmetic is exact fixed point: a call deposits `percent · 1000`
/// units and a retry costs 100 000, so 10 % means exactly one retry per 10
/// calls, and 0.5 % one per 200. (tower's `TpsBudget` turns a ratio below 1
/// into a whole number of deposits per retry by truncating `1 / ratio`, so 60 %
/// grants a retry per call: tower issue #857.) `percent` is rounded to
/// 0.001 %.
///
/// The window is 10 slots of `ttl / 10` each, so calls and retries leave it
/// in steps of `ttl / 10`. Time comes from the injected [`Clock`], so tests
/// and the simulator run on virtual time.
///
/// **Concurrency.** Each operation reads the clock once. A deposit is one
/// `fetch_add` on the current slot's call counter. A withdrawal first
/// looks (read-only) whether a retry's worth is left: the 9 past slots'
/// contribution comes from a cache keyed by the epoch and a generation
/// counter (summed again only when the slot turns or a past slot changes),
/// the current slot's from its two counters. It then counts the retry with
/// one `fetch_add` on the current slot's retry counter, whose result
/// includes every racing withdrawal counted before it, checks the balance
/// again with that count, and takes the retry back if the balance went
/// negative. Two racing withdrawals can therefore both see each other and
/// both be refused when only one retry was left (conservative), but the
/// budget never grants more than it holds. The other changes that lower the
/// balance (a refunded deposit) are bracketed by the generation counter,
/// which a withdrawal reads before its look and after its count: if it
/// moved, the withdrawal sums the whole window again. A withdrawal counted
/// in a slot that turned meanwhile is taken back and tried once more in the
/// new slot. Records are ignored: the budget counts calls and retries, not
/// outcomes.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::{Clock, VirtualClock};
/// use steadfast::control::{RetryBudget, RetryControl};
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// let clock = VirtualClock::new();
/// let budget = RetryBudget::builder()
///     .percent(10.0)
///     .min_per_sec(0)
///     .ttl(Duration::from_secs(10))
///     .build_with_clock(clock.clone())?;
/// for _ in 0..20 {
///     budget.admit().unwrap();
/// }
/// assert!(budget.allow_retry().is_ok());
/// assert!(budget.allow_retry().is_ok());
/// assert_eq!(budget.allow_retry().unwrap_err().by, "retry budget");
/// clock.sleep_blocking(Duration::from_secs(10)); // everything expires
/// assert_eq!(budget.snapshot().requests, 0);
/// # Ok(()) }
/// ```
pub struct RetryBudget<C: Clock = SystemClock> {
    time: Stopwatch<C>,
    window: TimeWindow,
    deposit: i128,
    reserve: i128,
    percent_milli: u64,
    min_per_sec: u32,
    ttl: Duration,
    flag: RefusingFlag,
    /// 1 + the epoch of the last refusal (0: never).
    last_refusal: AtomicU64,
    /// Written on every refusal, by any thread: striped, off the lines the
    /// hot path reads.
    refusals: StripedCounter,
    /// The generation of the past slots' contents: incremented before and
    /// after a change that lowers the balance other than a withdrawal in the
    /// current slot (a refunded deposit), so odd while one is in flight, and
    /// by 2 after any other change to a slot that may be past already (a
    /// late deposit, a refunded or taken-back withdrawal). See `allow_retry`.
    generation: AtomicU64,
    /// `past_units` is the balance contribution (deposits − withdrawals, in
    /// units) of the 9 slots before the epoch in `past_key`, read when
    /// `past_key` was tagged with the generation in its low half; `BUSY`
    /// while a thread rewrites it. Recomputed when the slot turns or the
    /// generation moves.
    past_key: AtomicU64,
    past_units: AtomicI64,
}

/// `past_key` while being rewritten; never a real key (generations in keys
/// are even).
const BUSY: u64 = u64::MAX;
/// `past_key` before the first computation; odd too.
const NO_KEY: u64 = u64::MAX - 2;

#[inline]
fn past_key(epoch: u64, generation: u64) -> u64 {
    (epoch << 32) | (generation & 0xFFFF_FFFF)
}

/// Builds a [`RetryBudget`]; see [`RetryBudget::builder`].
///
/// ```
/// use std::time::Duration;
/// use steadfast::control::RetryBudget;
/// let err = RetryBudget::builder().ttl(Duration::from_millis(10)).build().unwrap_err();
/// assert_eq!(err.field(), "ttl");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBudgetBuilder {
    ttl: Duration,
    min_per_sec: u32,
    percent: f64,
}

/// The state of a [`RetryBudget`] at one moment, for telemetry.
///
/// ```
/// use steadfast::control::{RetryBudget, RetryControl};
/// let budget = RetryBudget::builder().percent(50.0).min_per_sec(0).build().unwrap();
/// budget.admit().unwrap();
/// budget.admit().unwrap();
/// let snap = budget.snapshot();
/// assert_eq!((snap.requests, snap.retries), (2, 0));
/// assert_eq!(snap.available, 1.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBudgetSnapshot {
    /// Calls deposited within the window.
    pub requests: u64,
    /// Retries withdrawn within the window.
    pub retries: u64,
    /// Retries the budget would allow now (fractional: 0.5 is half of the
    /// next retry's cost).
    pub available: f64,
    /// Whether the budget is in its refusing state: it refused, and has not
    /// yet granted a retry in a later tenth of the ttl.
    pub refusing: bool,
    /// Retries refused so far.
    pub refusals: u64,
}

impl RetryBudget {
    /// A builder with Finagle's defaults: `ttl` 10 s, 10 retries per second
    /// minimum, 20 % of calls.
    ///
    /// ```
    /// use steadfast::control::RetryBudget;
    /// let budget = RetryBudget::builder().build().unwrap();
    /// assert_eq!(budget.snapshot().available, 100.0); // 10/s over 10 s
    /// ```
    #[must_use]
    pub const fn builder() -> RetryBudgetBuilder {
        RetryBudgetBuilder {
            ttl: Duration::from_secs(10),
            min_per_sec: 10,
            percent: 20.0,
        }
    }
}

impl<C: Clock> RetryBudget<C> {
    /// The current state, for telemetry.
    ///
    /// ```
    /// use steadfast::control::{RetryBudget, RetryControl};
    /// let budget = RetryBudget::builder().min_per_sec(1).build().unwrap();
    /// budget.allow_retry().unwrap();
    /// assert_eq!(budget.snapshot().retries, 1);
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> RetryBudgetSnapshot {
        let (requests, retries) = self.window.sums(self.epoch());
        RetryBudgetSnapshot {
            requests,
            retries,
            available: self.balance(requests, retries) as f64 / WITHDRAWAL as f64,
            refusing: self.flag.get(),
            refusals: self.refusals.sum(),
        }
    }

    /// The settings: `(ttl, min_per_sec, percent)`, the percent as rounded.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::control::RetryBudget;
    /// let budget = RetryBudget::builder().percent(0.1234).build().unwrap();
    /// assert_eq!(budget.settings(), (Duration::from_secs(10), 10, 0.123));
    /// ```
    #[must_use]
    pub fn settings(&self) -> (Duration, u32, f64) {
        (
            self.ttl,
            self.min_per_sec,
            self.percent_milli as f64 / 1000.0,
        )
    }

    /// The one clock read of an operation.
    #[inline]
    fn epoch(&self) -> u64 {
        self.window.current(self.time.elapsed_nanos())
    }

    #[inline]
    fn balance(&self, requests: u64, retries: u64) -> i128 {
        self.reserve + self.units(requests, retries)
    }

    /// What `requests` deposits and `retries` withdrawals add to the balance.
    #[inline]
    fn units(&self, requests: u64, retries: u64) -> i128 {
        self.deposit * i128::from(requests) - WITHDRAWAL * i128::from(retries)
    }

    /// The balance contribution of the 9 slots before `epoch`'s, as of
    /// `generation` (read before this call): from the cache when it holds
    /// exactly that, else summed (and cached for the next caller).
    #[inline]
    fn past_units(&self, epoch: u64, generation: u64) -> i128 {
        let want = past_key(epoch, generation);
        if self.past_key.load(Ordering::SeqCst) == want {
            let units = self.past_units.load(Ordering::SeqCst);
            // Unchanged around the read: `units` was written for `want`.
            if self.past_key.load(Ordering::SeqCst) == want {
                return i128::from(units);
            }
        }
        self.sum_past_units(epoch, generation, want)
    }

    #[cold]
    fn sum_past_units(&self, epoch: u64, generation: u64, want: u64) -> i128 {
        let (requests, retries) = self.window.past_sums(epoch);
        let units = self.units(requests, retries);
        // Cache it, unless a change is in flight (odd generation), someone
        // is writing the cache, or it was cached meanwhile. The past slots
        // hold at most 9 · (2³² − 1) events each way, so `units` fits.
        let key = self.past_key.load(Ordering::SeqCst);
        if generation.is_multiple_of(2)
            && key != BUSY
            && key != want
            && let Ok(stored) = i64::try_from(units)
            && self
                .past_key
                .compare_exchange(key, BUSY, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.past_units.store(stored, Ordering::SeqCst);
            self.past_key.store(want, Ordering::SeqCst);
        }
        units
    }

    /// Makes the cached past be summed again (after a change that can only
    /// raise the balance, so a reader that misses it is only conservative).
    #[inline]
    fn past_changed(&self) {
        self.generation.fetch_add(2, Ordering::SeqCst);
    }

    /// Counts one withdrawal, if the balance allows it; `false` means
    /// refused, `None` that the slot turned under it (taken back: try again).
    #[inline]
    fn try_withdraw(&self, epoch: u64) -> Option<bool> {
        let generation = self.generation.load(Ordering::SeqCst);
        let past = self.past_units(epoch, generation);
        let (requests, retries) = self.window.counts_at(epoch);
        // A read-only look first: an empty budget (the usual state while it
        // refuses) is refused without writing to the shared counters.
        if self.reserve + past + self.units(requests, retries) < WITHDRAWAL {
            return Some(false);
        }
        let stamp = self.window.add(epoch, RETRIES);
        if stamp.epoch() != epoch & 0xFFFF_FFFF || self.window.latest() != epoch {
            // Counted in a slot that is no longer the current one, so maybe
            // already left out of a cached past: take it back.
            self.window.undo(stamp, RETRIES);
            self.past_changed();
            return None;
        }
        let unchanged =
            generation.is_multiple_of(2) && self.generation.load(Ordering::SeqCst) == generation;
        let balance = if unchanged {
            // Since the look, only withdrawals in this slot can have lowered
            // the balance: deposits raise it, the past is fixed for this
            // epoch and generation, and a refunded deposit would have moved
            // the generation. The `fetch_add`'s count includes every withdrawal in
            // this slot that came before this one.
            self.reserve + past + self.units(requests, stamp.count())
        } else {
            // A refund raced: sum the whole window, this withdrawal and
            // every racing one included.
            let (requests, retries) = self.window.sums(epoch);
            self.balance(requests, retries)
        };
        if balance >= 0 {
            return Some(true);
        }
        self.window.undo(stamp, RETRIES);
        if self.window.latest() != epoch {
            self.past_changed();
        }
        Some(false)
    }

    /// Tracks the refusing state: up on a refusal, down on the first grant
    /// in a later slot than the last refusal.
    #[inline]
    fn note(&self, refused: bool, epoch: u64) {
        let change = if refused {
            if self.last_refusal.load(Ordering::Relaxed) != epoch + 1 {
                self.last_refusal.store(epoch + 1, Ordering::Relaxed);
            }
            self.flag.note(true, false)
        } else if self.flag.get() {
            let recovered = epoch + 1 > self.last_refusal.load(Ordering::Relaxed);
            self.flag.note(false, recovered)
        } else {
            None
        };
        if let Some(now_refusing) = change {
            report_transition(NAME, now_refusing, &self.snapshot());
        }
    }
}

impl RetryBudgetBuilder {
    /// How long a deposit or a withdrawal counts; 1 s to 60 s (Finagle's
    /// bounds).
    #[must_use]
    pub const fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Retries allowed per second whatever the traffic (the reserve is
    /// `min_per_sec · ttl`), for clients that call rarely.
    #[must_use]
    pub const fn min_per_sec(mut self, min_per_sec: u32) -> Self {
        self.min_per_sec = min_per_sec;
        self
    }

    /// Retries allowed as a percentage of calls: `10.0` is one retry per 10
    /// calls, `0.5` one per 200, `200.0` two per call. From 0 to 1000,
    /// rounded to 0.001 %; 0 leaves only the per-second minimum. (Unlike
    /// tower's `retry_percent`, this is a percentage, not a ratio.)
    #[must_use]
    pub const fn percent(mut self, percent: f64) -> Self {
        self.percent = percent;
        self
    }

    /// Builds the budget on the system clock.
    ///
    /// # Errors
    ///
    /// As [`build_with_clock`](Self::build_with_clock).
    pub fn build(self) -> Result<RetryBudget, ConfigError> {
        self.build_with_clock(SystemClock)
    }

    /// Builds the budget on `clock`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when `ttl` is outside 1 s..=60 s, or `percent` is
    /// NaN, infinite, negative, above 1000, or positive but below 0.0005
    /// (it would round to 0).
    pub fn build_with_clock<C: Clock>(self, clock: C) -> Result<RetryBudget<C>, ConfigError> {
        if self.ttl < Duration::from_secs(1) || self.ttl > Duration::from_secs(60) {
            return Err(ConfigError::new(
                NAME,
                "ttl",
                "must be between 1 s and 60 s",
                self.ttl,
            ));
        }
        if !self.percent.is_finite() || !(0.0..=1000.0).contains(&self.percent) {
            return Err(ConfigError::new(
                NAME,
                "percent",
                "must be a finite number in 0..=1000",
                self.percent,
            ));
        }
        // In range, so the product fits easily.
        let percent_milli = (self.percent * 1000.0).round() as u64;
        if percent_milli == 0 && self.percent > 0.0 {
            return Err(ConfigError::new(
                NAME,
                "percent",
                "must be 0 or at least 0.0005 (it is rounded to 0.001 %)",
                self.percent,
            ));
        }
        let ttl_millis = i128::try_from(self.ttl.as_millis()).unwrap_or(60_000);
        // min_per_sec · ttl retries, in units.
        let reserve = i128::from(self.min_per_sec) * ttl_millis * WITHDRAWAL / 1000;
        Ok(RetryBudget {
            window: TimeWindow::new(self.ttl),
            time: Stopwatch::new(clock),
            deposit: i128::from(percent_milli),
            reserve,
            percent_milli,
            min_per_sec: self.min_per_sec,
            ttl: self.ttl,
            flag: RefusingFlag::new(),
            last_refusal: AtomicU64::new(0),
            refusals: StripedCounter::new(),
            generation: AtomicU64::new(0),
            past_key: AtomicU64::new(NO_KEY),
            past_units: AtomicI64::new(0),
        })
    }
}

impl<C: Clock> RetryControl for RetryBudget<C> {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Deposits one call; never refuses.
    #[inline]
    fn admit(&self) -> Result<(), Refusal> {
        let epoch = self.epoch();
        let stamp = self.window.add(epoch, REQUESTS);
        if stamp.epoch() != epoch & 0xFFFF_FFFF || self.window.latest() != epoch {
            // Counted in a slot that may be in a cached past already.
            self.past_changed();
        }
        Ok(())
    }

    /// The budget counts calls and retries, not outcomes.
    #[inline]
    fn record(&self, _outcome: Outcome) {}

    #[inline]
    fn allow_retry(&self) -> Result<(), Refusal> {
        let now = self.time.elapsed_nanos();
        let mut epoch = self.window.current(now);
        // A second turn only when the slot turned between the look and the
        // count (the same `now` then maps to the newer epoch).
        let granted = match self.try_withdraw(epoch) {
            Some(granted) => granted,
            None => {
                epoch = self.window.current(now);
                self.try_withdraw(epoch).unwrap_or(false)
            }
        };
        if granted {
            self.note(false, epoch);
            return Ok(());
        }
        self.refusals.increment();
        self.note(true, epoch);
        Err(Refusal { by: NAME })
    }

    /// Takes back a deposit (the call was not sent after all: another
    /// control refused it) or a withdrawal (the retry was not sent), from the
    /// most recent slot of the window that holds one.
    fn refund(&self, grant: Grant) {
        let epoch = self.epoch();
        match grant {
            Grant::Admit => {
                // Lowers the balance: bracketed for `allow_retry`'s check.
                self.generation.fetch_add(1, Ordering::SeqCst);
                self.window.take_back(epoch, REQUESTS);
                self.generation.fetch_add(1, Ordering::SeqCst);
            }
            Grant::Retry => {
                let back = self.window.take_back(epoch, RETRIES);
                if back != Some(0) || self.window.latest() != epoch {
                    self.past_changed();
                }
            }
        }
    }
}

impl<C: Clock> fmt::Debug for RetryBudget<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("ttl", &self.ttl)
            .field("min_per_sec", &self.min_per_sec)
            .field("percent_milli", &self.percent_milli)
            .field("state", &self.snapshot())
            .finish()
    }
}
