//! [`RateLimit`]: one or more quotas, all of which must admit a call,
//! shared by every clone; each quota's state is one timestamp, moved by
//! one compare-and-swap.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::gcra::{Cell, Step};
use super::quota::Quota;
use crate::call::RateRefused;
use crate::clock::AnyStopwatch;
use crate::clock::{Clock, SystemClock};
use crate::config_error::ConfigError;
use crate::sync::{AtomicU64, CachePadded, Ordering};

/// The name a limit has unless given one.
pub const DEFAULT_RATE_LIMIT_NAME: &str = "rate limit";

/// Nanoseconds on the limit's clock since it was built.
/// One quota and its theoretical arrival time, on a cache line of its own
/// (threads moving it do not evict the constants the others read).
struct Slot {
    quota: Quota,
    cell: Cell,
    tat: CachePadded<AtomicU64>,
}

struct Shared {
    name: &'static str,
    slots: Box<[Slot]>,
    now: AnyStopwatch,
    /// Added to every refusal's wait: how far the clock's reading may trail.
    lag: Duration,
}

/// A rate limit: calls per period with a burst, by the generic cell rate
/// algorithm (GCRA); several [`Quota`]s combined ("10 per second and 100
/// per minute") admit a call only if every one does. Clones share the
/// state, so one limit built once caps every clone of a service and every
/// connection's copy of it.
///
/// [`check`](Self::check) refuses at once with the exact time until the
/// call would be admitted; [`reserve`](Self::reserve) books the call's
/// turn if it comes within a bound (the executors bound it by the call's
/// deadline too), so that callers who wait are admitted in order, each at
/// its own instant, without a herd when a period turns.
///
/// **Time.** The limit reads its clock once per call. The system clock's
/// cheap read on Linux is the coarse monotonic clock (a tick of 1 to 4 ms):
/// it never runs ahead of real time, so a limit on it never admits more
/// than its quotas; a refusal's `retry_after` may be up to one tick longer
/// than needed, and calls due within one tick of each other may be admitted
/// together. A quota whose interval is under a few milliseconds wants a
/// precise clock ([`build_with_clock`](RateLimitBuilder::build_with_clock)
/// with [`TokioClock`](https://docs.rs/steadfast/latest/steadfast/clock/struct.TokioClock.html)
/// or a clock of your own).
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::VirtualClock;
/// use steadfast::rate::{Quota, RateLimit};
///
/// let clock = VirtualClock::manual();
/// let limit = RateLimit::builder()
///     .name("maps api")
///     .quota(Quota::per_second(2)?)
///     .build_with_clock(clock.clone())?;
/// assert!(limit.check().is_ok());
/// assert!(limit.check().is_ok());
/// let refused = limit.check().unwrap_err();
/// assert_eq!((refused.by, refused.retry_after), ("maps api", Some(Duration::from_millis(500))));
/// clock.advance(Duration::from_millis(500));
/// assert!(limit.check().is_ok());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RateLimit {
    shared: Arc<Shared>,
}

impl RateLimit {
    /// A limit to configure: at least one [`quota`](RateLimitBuilder::quota).
    pub fn builder() -> RateLimitBuilder {
        RateLimitBuilder {
            name: DEFAULT_RATE_LIMIT_NAME,
            quotas: Vec::new(),
        }
    }

    /// A limit of one quota, on the system clock.
    ///
    /// ```
    /// use steadfast::rate::{Quota, RateLimit};
    /// let limit = RateLimit::new(Quota::per_second(100)?);
    /// assert!(limit.check().is_ok());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    #[must_use]
    pub fn new(quota: Quota) -> Self {
        Self::from_parts(DEFAULT_RATE_LIMIT_NAME, vec![quota], SystemClock)
    }

    fn from_parts<C: Clock>(name: &'static str, quotas: Vec<Quota>, clock: C) -> Self {
        let slots = quotas
            .into_iter()
            .map(|quota| Slot {
                quota,
                cell: quota.cell(),
                tat: CachePadded(AtomicU64::new(0)),
            })
            .collect();
        let now = AnyStopwatch::new(clock);
        Self {
            shared: Arc::new(Shared {
                name,
                slots,
                lag: Duration::from_nanos(now.lag_nanos()),
                now,
            }),
        }
    }

    /// The limit's name, as refusals carry it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.shared.name
    }

    /// The quotas, in the order they were given.
    pub fn quotas(&self) -> impl Iterator<Item = Quota> + '_ {
        self.shared.slots.iter().map(|s| s.quota)
    }

    /// Admits a call of cost 1 now, or refuses it with the time until it
    /// would be admitted. Reads the clock once; one compare-and-swap per
    /// quota; no allocation.
    ///
    /// # Errors
    /// [`RateRefused`] when a quota has no room now.
    #[inline]
    pub fn check(&self) -> Result<(), RateRefused> {
        self.check_n(1)
    }

    /// Admits a call of cost `cost` (a weighted call: a batch of `cost`
    /// requests, a request that counts `cost` times) now, or refuses it.
    ///
    /// # Errors
    /// [`RateRefused`] when a quota has no room now; its `retry_after` is
    /// `None` if `cost` is above a quota's burst (it never fits).
    pub fn check_n(&self, cost: u32) -> Result<(), RateRefused> {
        // Admitted now (no wait allowed): nothing to give back later.
        self.take(cost, Duration::ZERO).map(|_| ())
    }

    /// Books a call of cost `cost` if it can be admitted within `max_wait`:
    /// the [`Reservation`] says how long to wait first (zero if admitted
    /// now). Dropping the reservation before [`admit`](Reservation::admit)
    /// gives its share back (the caller was cancelled while it waited).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::rate::{Quota, RateLimit};
    ///
    /// let clock = VirtualClock::manual();
    /// let limit = RateLimit::builder().quota(Quota::per_second(10)?.with_burst(1)?).build_with_clock(clock)?;
    /// let first = limit.reserve(1, Duration::from_secs(1)).unwrap();
    /// let second = limit.reserve(1, Duration::from_secs(1)).unwrap();
    /// assert_eq!((first.wait(), second.wait()), (Duration::ZERO, Duration::from_millis(100)));
    /// // A third would wait 200 ms: more than it may.
    /// let refused = limit.reserve(1, Duration::from_millis(150)).unwrap_err();
    /// assert_eq!(refused.retry_after, Some(Duration::from_millis(200)));
    /// drop(second); // its caller went away: the turn is free again
    /// assert_eq!(limit.reserve(1, Duration::from_millis(150)).unwrap().wait(), Duration::from_millis(100));
    /// first.admit();
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    ///
    /// # Errors
    /// [`RateRefused`] with the wait the call would need, when that is
    /// more than `max_wait` (nothing is booked).
    pub fn reserve(&self, cost: u32, max_wait: Duration) -> Result<Reservation, RateRefused> {
        let (wait, at) = self.take(cost, max_wait)?;
        Ok(Reservation {
            limit: self.clone(),
            cost,
            at,
            wait: Duration::from_nanos(wait),
            live: true,
        })
    }

    /// Takes `cost` from every quota if each admits it within `max_wait`
    /// (the wait, and the instant it was taken at); gives back what it took
    /// if one does not.
    fn take(&self, cost: u32, max_wait: Duration) -> Result<(u64, u64), RateRefused> {
        let shared = &self.shared;
        let now = shared.now.elapsed_nanos();
        let bound = u64::try_from(max_wait.as_nanos()).unwrap_or(u64::MAX);
        let mut wait = 0_u64;
        for (i, slot) in shared.slots.iter().enumerate() {
            let mut tat = slot.tat.0.load(Ordering::Acquire);
            loop {
                let (next, this_wait) = match slot.cell.step(tat, now, cost) {
                    Step::Admit(next) => (next, 0),
                    Step::Later { wait, tat: next } if wait <= bound => (next, wait),
                    Step::Later { .. } => {
                        self.give_back(&shared.slots[..i], cost, now);
                        // The wait until every quota admits it (if one never will: none).
                        let needed = self
                            .wait_needed(i, cost, now)
                            .map(|n| Duration::from_nanos(n.max(wait)));
                        return Err(self.refused(needed));
                    }
                    Step::Never => {
                        self.give_back(&shared.slots[..i], cost, now);
                        return Err(self.refused(None));
                    }
                };
                match slot.tat.0.compare_exchange_weak(
                    tat,
                    next,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => {
                        wait = wait.max(this_wait);
                        break;
                    }
                    Err(current) => tat = current,
                }
            }
        }
        Ok((wait, now))
    }

    /// The wait the quotas from `from` on would ask of `cost` now, `None`
    /// if one never admits it (read only: for a refusal's exact
    /// `retry_after`).
    fn wait_needed(&self, from: usize, cost: u32, now: u64) -> Option<u64> {
        self.shared.slots[from..].iter().try_fold(0, |most, slot| {
            match slot
                .cell
                .step(slot.tat.0.load(Ordering::Acquire), now, cost)
            {
                Step::Later { wait, .. } => Some(most.max(wait)),
                Step::Admit(_) => Some(most),
                Step::Never => None,
            }
        })
    }

    fn give_back(&self, slots: &[Slot], cost: u32, now: u64) {
        for slot in slots {
            let _ = slot
                .tat
                .0
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tat| {
                    Some(slot.cell.give_back(tat, now, cost))
                });
        }
    }

    fn refused(&self, retry_after: Option<Duration>) -> RateRefused {
        RateRefused {
            by: self.shared.name,
            // A caller back after exactly this long finds the clock's
            // reading at least at the time it was told, however it lags.
            retry_after: retry_after.map(|d| d.saturating_add(self.shared.lag)),
        }
    }

    /// How long until a call of cost `cost` would be admitted: zero if
    /// now, `None` if never (a cost above a quota's burst). It reads only:
    /// nothing is charged or booked, so a dashboard or a test can ask at
    /// any time; the wait is what a refused [`check_n`](Self::check_n)
    /// would say (padded by the clock's lag alike).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::rate::{Quota, RateLimit};
    /// let clock = VirtualClock::manual();
    /// let limit = RateLimit::builder()
    ///     .quota(Quota::per_second(2)?)
    ///     .build_with_clock(clock.clone())?;
    /// assert_eq!(limit.next_admission(1), Some(Duration::ZERO));
    /// limit.check()?;
    /// limit.check()?;
    /// assert_eq!(limit.next_admission(1), Some(Duration::from_millis(500)));
    /// assert_eq!(limit.next_admission(1), Some(Duration::from_millis(500))); // nothing charged
    /// assert_eq!(limit.next_admission(2), Some(Duration::from_secs(1)));
    /// assert_eq!(limit.next_admission(3), None); // above the burst of 2
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn next_admission(&self, cost: u32) -> Option<Duration> {
        let now = self.shared.now.elapsed_nanos();
        let wait = self.wait_needed(0, cost, now)?;
        Some(if wait == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(wait).saturating_add(self.shared.lag)
        })
    }

    /// Calls of cost 1 each quota could admit now; the fewest of them is
    /// what the limit admits.
    ///
    /// ```
    /// use steadfast::rate::{Quota, RateLimit};
    /// let limit = RateLimit::builder()
    ///     .quota(Quota::per_second(10)?)
    ///     .quota(Quota::per_minute(100)?.with_burst(3)?)
    ///     .build()?;
    /// limit.check()?;
    /// assert_eq!(limit.remaining(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn remaining(&self) -> u64 {
        let now = self.shared.now.elapsed_nanos();
        self.shared
            .slots
            .iter()
            .map(|s| s.cell.remaining(s.tat.0.load(Ordering::Acquire), now))
            .min()
            .unwrap_or(0)
    }
}

impl RateLimit {
    /// Each quota, with the calls of cost 1 it could admit now.
    ///
    /// ```
    /// use steadfast::rate::{Quota, RateLimit};
    /// let limit = RateLimit::builder()
    ///     .quota(Quota::per_second(10)?)
    ///     .quota(Quota::per_minute(100)?.with_burst(3)?)
    ///     .build()?;
    /// limit.check()?;
    /// let left: Vec<u64> = limit.remaining_by_quota().map(|(_, n)| n).collect();
    /// assert_eq!(left, [9, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remaining_by_quota(&self) -> impl Iterator<Item = (Quota, u64)> + '_ {
        let now = self.shared.now.elapsed_nanos();
        self.shared.slots.iter().map(move |s| {
            (
                s.quota,
                s.cell.remaining(s.tat.0.load(Ordering::Acquire), now),
            )
        })
    }
}

impl fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("name", &self.shared.name)
            .field("quotas", &self.quotas().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// A call's turn, booked by [`RateLimit::reserve`]: wait
/// [`wait`](Self::wait), then [`admit`](Self::admit). Dropped before that,
/// it gives its share of every quota back.
#[must_use = "a reservation dropped unadmitted gives its turn back"]
pub struct Reservation {
    limit: RateLimit,
    cost: u32,
    at: u64,
    wait: Duration,
    live: bool,
}

impl Reservation {
    /// How long the call must wait before it is sent (zero: now).
    #[must_use]
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The call goes: its share stays taken.
    pub fn admit(mut self) {
        self.live = false;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.live {
            let now = self.limit.shared.now.elapsed_nanos().max(self.at);
            self.limit
                .give_back(&self.limit.shared.slots, self.cost, now);
        }
    }
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("limit", &self.limit.shared.name)
            .field("cost", &self.cost)
            .field("wait", &self.wait)
            .finish()
    }
}

/// Configures a [`RateLimit`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until built"]
pub struct RateLimitBuilder {
    name: &'static str,
    quotas: Vec<Quota>,
}

impl RateLimitBuilder {
    /// The name refusals carry (default [`DEFAULT_RATE_LIMIT_NAME`]).
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// A quota the limit keeps; with several, a call must fit every one.
    pub fn quota(mut self, quota: Quota) -> Self {
        self.quotas.push(quota);
        self
    }

    /// The limit, on the system clock.
    ///
    /// # Errors
    /// A [`ConfigError`] if no quota was given, or more than 8.
    pub fn build(self) -> Result<RateLimit, ConfigError> {
        self.build_with_clock(SystemClock)
    }

    /// The limit, reading `clock` (a
    /// [`VirtualClock`](crate::clock::VirtualClock) in tests and the
    /// simulator).
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_with_clock<C: Clock>(self, clock: C) -> Result<RateLimit, ConfigError> {
        super::quota::check_count("rate limit", &self.quotas)?;
        Ok(RateLimit::from_parts(self.name, self.quotas, clock))
    }
}
