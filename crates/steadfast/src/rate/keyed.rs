//! [`KeyedRateLimit`]: the same quotas kept apart per key (per API key,
//! per tenant, per client address), in a bounded set of keys.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash, RandomState};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::gcra::{Cell, Step};
use super::key_map::KeyMap;
use super::limiter::DEFAULT_RATE_LIMIT_NAME;
use super::quota::MAX_QUOTAS;
use super::quota::Quota;
use crate::call::RateRefused;
use crate::clock::AnyStopwatch;
use crate::clock::{Clock, SystemClock};
use crate::config_error::ConfigError;

/// Shards of the key set: threads checking different keys rarely share a
/// lock.
const SHARDS: usize = 16;

/// The keys a limit keeps unless told otherwise.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// One key's theoretical arrival times, one per quota.
type Tats = [u64; MAX_QUOTAS];

struct Shared<K> {
    name: &'static str,
    quotas: Box<[Quota]>,
    cells: Box<[Cell]>,
    shards: Box<[Mutex<KeyMap<K, Tats>>]>,
    per_shard: usize,
    hasher: RandomState,
    now: AnyStopwatch,
    /// Added to every refusal's wait: how far the clock's reading may trail.
    lag: Duration,
}

/// A rate limit per key: every key gets the same [`Quota`]s and a state of
/// its own, so one tenant's burst does not spend another's. The set of
/// keys is bounded ([`max_keys`](KeyedRateLimitBuilder::max_keys), default
/// [`DEFAULT_MAX_KEYS`], kept as 16 shards of a sixteenth each): when a
/// new key finds its shard full, the shard drops every key whose quotas are
/// all full again (they hold no information); if every key in it is busy,
/// it drops the one closest to full again (its next call may then get a
/// fresh burst early: the bound is on memory, and says so).
///
/// Each check hashes the key once (the hash picks the shard and finds the
/// key in it) and holds one of 16 shard locks for a few arithmetic steps;
/// a new key allocates when its shard's map grows.
///
/// ```
/// use std::time::Duration;
/// use steadfast::clock::VirtualClock;
/// use steadfast::rate::{KeyedRateLimit, Quota};
///
/// let clock = VirtualClock::manual();
/// let per_tenant = KeyedRateLimit::builder()
///     .name("per tenant")
///     .quota(Quota::per_second(1)?)
///     .build_with_clock(clock.clone())?;
/// assert!(per_tenant.check(&"acme").is_ok());
/// assert!(per_tenant.check(&"globex").is_ok()); // a key of its own
/// let refused = per_tenant.check(&"acme").unwrap_err();
/// assert_eq!(refused.retry_after, Some(Duration::from_secs(1)));
/// assert_eq!(per_tenant.keys(), 2);
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub struct KeyedRateLimit<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for KeyedRateLimit<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K: Hash + Eq + Clone> KeyedRateLimit<K> {
    /// A keyed limit to configure: at least one quota.
    pub fn builder() -> KeyedRateLimitBuilder<K> {
        KeyedRateLimitBuilder {
            name: DEFAULT_RATE_LIMIT_NAME,
            quotas: Vec::new(),
            max_keys: DEFAULT_MAX_KEYS,
            _key: PhantomData,
        }
    }

    /// Admits a call of cost 1 for `key` now, or refuses it with the time
    /// until it would be admitted.
    ///
    /// # Errors
    /// [`RateRefused`] when one of the key's quotas has no room now.
    pub fn check<Q>(&self, key: &Q) -> Result<(), RateRefused>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.take(key, 1, Duration::ZERO).map(|_| ())
    }

    /// Admits a call of cost `cost` for `key` now, or refuses it.
    ///
    /// # Errors
    /// [`RateRefused`]; its `retry_after` is `None` if `cost` is above a
    /// quota's burst.
    pub fn check_n<Q>(&self, key: &Q, cost: u32) -> Result<(), RateRefused>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.take(key, cost, Duration::ZERO).map(|_| ())
    }

    /// Books a call of cost `cost` for `key` if it can be admitted within
    /// `max_wait`: the wait before it may go. (A keyed booking is not given
    /// back if the caller goes away.)
    ///
    /// # Errors
    /// [`RateRefused`] with the wait the call would need, when that is
    /// more than `max_wait` (nothing is booked).
    pub fn reserve<Q>(
        &self,
        key: &Q,
        cost: u32,
        max_wait: Duration,
    ) -> Result<Duration, RateRefused>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.take(key, cost, max_wait).map(Duration::from_nanos)
    }

    /// Keys held now.
    #[must_use]
    pub fn keys(&self) -> usize {
        self.shared
            .shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    /// The limit's name, as refusals carry it.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.shared.name
    }

    /// Whether `key` is held: it made a call whose share of a quota has
    /// not come back yet, or has not been evicted since. Reads only.
    ///
    /// ```
    /// use steadfast::rate::{KeyedRateLimit, Quota};
    /// let limit = KeyedRateLimit::<String>::builder().quota(Quota::per_second(1)?).build()?;
    /// assert!(!limit.holds("alice"));
    /// limit.check("alice")?;
    /// assert!(limit.holds("alice"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn holds<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.held(key).is_some()
    }

    /// Calls of cost 1 `key` could make now: the fewest any of its quotas
    /// admits (a key not held, each quota's burst). Reads only: nothing is
    /// charged and no key is added.
    ///
    /// ```
    /// use steadfast::rate::{KeyedRateLimit, Quota};
    /// let limit = KeyedRateLimit::<String>::builder()
    ///     .quota(Quota::per_second(10)?.with_burst(3)?)
    ///     .build()?;
    /// assert_eq!(limit.remaining("alice"), 3);
    /// limit.check("alice")?;
    /// assert_eq!(limit.remaining("alice"), 2);
    /// assert_eq!(limit.remaining("bob"), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn remaining<Q>(&self, key: &Q) -> u64
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let now = self.shared.now.elapsed_nanos();
        let tats = self.held(key).unwrap_or([0; MAX_QUOTAS]);
        self.shared
            .cells
            .iter()
            .zip(tats)
            .map(|(cell, tat)| cell.remaining(tat, now))
            .min()
            .unwrap_or(0)
    }

    /// How long until a call of cost `cost` for `key` would be admitted:
    /// zero if now (a key not held is admitted now), `None` if never (a
    /// cost above a quota's burst). It reads only: the key is neither
    /// charged nor added, and its place in the eviction order is unchanged.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::rate::{KeyedRateLimit, Quota};
    /// let clock = VirtualClock::manual();
    /// let limit = KeyedRateLimit::<String>::builder()
    ///     .quota(Quota::per_second(1)?)
    ///     .build_with_clock(clock.clone())?;
    /// limit.check("alice")?;
    /// assert_eq!(limit.next_admission("alice", 1), Some(Duration::from_secs(1)));
    /// assert_eq!(limit.next_admission("bob", 1), Some(Duration::ZERO));
    /// assert_eq!(limit.keys(), 1); // asking about bob did not add him
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn next_admission<Q>(&self, key: &Q, cost: u32) -> Option<Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let shared = &self.shared;
        let now = shared.now.elapsed_nanos();
        let tats = self.held(key).unwrap_or([0; MAX_QUOTAS]);
        let mut wait = 0_u64;
        for (i, cell) in shared.cells.iter().enumerate() {
            match cell.step(tats[i], now, cost) {
                Step::Admit(_) => {}
                Step::Later { wait: w, .. } => wait = wait.max(w),
                Step::Never => return None,
            }
        }
        Some(if wait == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(wait).saturating_add(shared.lag)
        })
    }

    /// The key's arrival times, if it is held (a copy, read under its
    /// shard's lock; nothing changed).
    fn held<Q>(&self, key: &Q) -> Option<Tats>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let shared = &self.shared;
        let hash = shared.hasher.hash_one(key);
        let shard = usize::try_from((hash >> 32) % SHARDS as u64).unwrap_or(0);
        let mut map = shared.shards[shard]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.get_mut(hash, key).as_deref().copied()
    }

    fn take<Q>(&self, key: &Q, cost: u32, max_wait: Duration) -> Result<u64, RateRefused>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let shared = &self.shared;
        let bound = u64::try_from(max_wait.as_nanos()).unwrap_or(u64::MAX);
        let hash = shared.hasher.hash_one(key);
        // Bits the shard's table uses for neither its buckets (the low
        // ones) nor its tags (the top seven).
        let shard = usize::try_from((hash >> 32) % SHARDS as u64).unwrap_or(0);
        let mut map = shared.shards[shard]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = shared.now.elapsed_nanos();
        let refused = |retry_after: Option<Duration>| RateRefused {
            by: shared.name,
            retry_after: retry_after.map(|d| d.saturating_add(shared.lag)),
        };
        let held = map.get_mut(hash, key);
        let tats = held.as_deref().copied().unwrap_or([0; MAX_QUOTAS]);
        let mut next = tats;
        let mut wait = 0_u64;
        for (i, cell) in shared.cells.iter().enumerate() {
            match cell.step(tats[i], now, cost) {
                Step::Admit(t) => next[i] = t,
                Step::Later { wait: w, tat } => {
                    next[i] = tat;
                    wait = wait.max(w);
                }
                Step::Never => return Err(refused(None)),
            }
        }
        if wait > bound {
            return Err(refused(Some(Duration::from_nanos(wait))));
        }
        if let Some(tats) = held {
            *tats = next;
        } else {
            if map.len() >= shared.per_shard {
                evict(&mut map, now, shared.cells.len());
            }
            map.insert_new(hash, key.to_owned(), next);
        }
        Ok(wait)
    }
}

/// Makes room in a full shard: drops every key whose quotas are full again
/// (all its TATs are past), else the key closest to that.
fn evict<K: Eq>(map: &mut KeyMap<K, Tats>, now: u64, quotas: usize) {
    let latest = |tats: &Tats| tats[..quotas].iter().copied().max().unwrap_or(0);
    let before = map.len();
    map.retain(|tats| latest(tats) > now);
    if map.len() < before {
        return;
    }
    // Every key is busy: drop the one whose quotas are full again soonest.
    map.remove_least_by(latest);
}

impl<K> fmt::Debug for KeyedRateLimit<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimit")
            .field("name", &self.shared.name)
            .field("quotas", &self.shared.quotas)
            .field("max_keys", &(self.shared.per_shard * SHARDS))
            .finish_non_exhaustive()
    }
}

/// Configures a [`KeyedRateLimit`].
#[must_use = "a builder does nothing until built"]
pub struct KeyedRateLimitBuilder<K> {
    name: &'static str,
    quotas: Vec<Quota>,
    max_keys: usize,
    _key: PhantomData<fn(K)>,
}

impl<K> fmt::Debug for KeyedRateLimitBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedRateLimitBuilder")
            .field("name", &self.name)
            .field("quotas", &self.quotas)
            .field("max_keys", &self.max_keys)
            .finish()
    }
}

impl<K: Hash + Eq + Clone> KeyedRateLimitBuilder<K> {
    /// The name refusals carry (default [`DEFAULT_RATE_LIMIT_NAME`]).
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// A quota every key keeps; with several, a call must fit every one.
    pub fn quota(mut self, quota: Quota) -> Self {
        self.quotas.push(quota);
        self
    }

    /// The most keys held at once (default [`DEFAULT_MAX_KEYS`]; rounded up
    /// to a multiple of 16, the shards).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The limit, on the system clock.
    ///
    /// # Errors
    /// A [`ConfigError`] if no quota was given or more than 8, or
    /// `max_keys` is zero.
    pub fn build(self) -> Result<KeyedRateLimit<K>, ConfigError> {
        self.build_with_clock(SystemClock)
    }

    /// The limit, reading `clock`.
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_with_clock<C: Clock>(self, clock: C) -> Result<KeyedRateLimit<K>, ConfigError> {
        super::quota::check_count("keyed rate limit", &self.quotas)?;
        if self.max_keys == 0 {
            return Err(ConfigError::new(
                "keyed rate limit",
                "max_keys",
                "must be at least 1",
                self.max_keys,
            ));
        }
        let now = AnyStopwatch::new(clock);
        Ok(KeyedRateLimit {
            shared: Arc::new(Shared {
                lag: Duration::from_nanos(now.lag_nanos()),
                name: self.name,
                cells: self.quotas.iter().map(Quota::cell).collect(),
                quotas: self.quotas.into_boxed_slice(),
                shards: (0..SHARDS).map(|_| Mutex::new(KeyMap::default())).collect(),
                per_shard: self.max_keys.div_ceil(SHARDS),
                hasher: RandomState::new(),
                now,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tats(latest: u64) -> Tats {
        let mut t = [0; MAX_QUOTAS];
        t[0] = latest;
        t
    }

    #[test]
    fn a_full_shard_drops_its_idle_keys_first_and_else_the_one_idle_soonest() {
        let mut map: KeyMap<&str, Tats> = KeyMap::default();
        map.insert_new(1, "idle", tats(50));
        map.insert_new(2, "also idle", tats(100));
        map.insert_new(3, "busy", tats(900));
        evict(&mut map, 100, 1);
        assert_eq!(
            map.keys().into_iter().copied().collect::<Vec<_>>(),
            ["busy"]
        );
        map.insert_new(4, "busier", tats(5_000));
        map.insert_new(4, "busiest", tats(9_000));
        evict(&mut map, 100, 1);
        let mut left: Vec<_> = map.keys().into_iter().copied().collect();
        left.sort_unstable();
        assert_eq!(left, ["busier", "busiest"]);
    }
}
