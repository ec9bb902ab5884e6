//! Keys a fleet's backend said are over their quota, until the time it
//! gave: a call for such a key is refused here, without asking again.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, PoisonError};

/// Shards of the cache: threads checking different keys rarely share a lock.
const SHARDS: usize = 16;

/// What is known of one key: calls of `cost` are refused until `until`
/// (nanoseconds on the limit's clock). A cheaper call may fit earlier, so
/// it is asked of the backend; a dearer one waits longer, by the time its
/// extra cost takes to come back (known exactly under one quota, see
/// [`OverLimit::new`]).
#[derive(Debug, Clone, Copy)]
struct Over {
    until: u64,
    cost: u32,
}

/// One shard: keys and what is known of them.
type Shard = Mutex<HashMap<Box<str>, Over>>;

/// What the cache knows of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// Nothing: ask the backend.
    Nothing,
    /// Refused for this many nanoseconds more.
    Over(u64),
    /// A dearer call is refused; this one may fit: ask the backend (and
    /// forget the entry if it is admitted).
    CheaperMayFit,
}

/// A bounded cache of keys over their quota.
pub(crate) struct OverLimit {
    shards: Box<[Shard]>,
    per_shard: usize,
    hasher: RandomState,
    /// Nanoseconds each unit of cost adds to a refusal's wait, when that is
    /// known exactly: under one quota, its interval (GCRA: a call of cost
    /// `c` fits `(c - c') × interval` after one of cost `c'`). Under
    /// several, the quota that binds a dearer call may not be the one that
    /// refused the cheaper: `None`, and a dearer call is asked.
    per_unit: Option<u64>,
}

impl OverLimit {
    /// A cache of at most about `max_keys` keys; `per_unit` is the one
    /// quota's interval in nanoseconds, or `None` under several quotas.
    pub(crate) fn new(max_keys: usize, per_unit: Option<u64>) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            per_shard: max_keys.div_ceil(SHARDS).max(1),
            hasher: RandomState::new(),
            per_unit,
        }
    }

    fn shard(&self, key: &str) -> &Shard {
        let i = usize::try_from(self.hasher.hash_one(key) % SHARDS as u64).unwrap_or(0);
        &self.shards[i]
    }

    /// What is known of a call of `cost` for `key` at `now`.
    pub(crate) fn lookup(&self, key: &str, cost: u32, now: u64) -> Known {
        let mut map = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(over) = map.get(key).copied() else {
            return Known::Nothing;
        };
        if over.until <= now {
            map.remove(key);
            Known::Nothing
        } else {
            self.judge(over, cost, now)
        }
    }

    /// [`lookup`](Self::lookup) without its side effect (an entry past
    /// its time is left for the next lookup to drop).
    pub(crate) fn peek(&self, key: &str, cost: u32, now: u64) -> Known {
        let map = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match map.get(key).copied() {
            None => Known::Nothing,
            Some(over) if over.until <= now => Known::Nothing,
            Some(over) => self.judge(over, cost, now),
        }
    }

    /// What an entry live at `now` says of a call of `cost`.
    fn judge(&self, over: Over, cost: u32, now: u64) -> Known {
        if cost == over.cost {
            Known::Over(over.until - now)
        } else if cost < over.cost {
            Known::CheaperMayFit
        } else if let Some(per_unit) = self.per_unit {
            // Refused too, for longer: its extra cost's time on top.
            let extra = u64::from(cost - over.cost).saturating_mul(per_unit);
            Known::Over((over.until - now).saturating_add(extra))
        } else {
            // Refused too, for longer than is known: the backend says how long.
            Known::Nothing
        }
    }

    /// Forgets `key` (a call for it was admitted: its quota moved, so what
    /// was known of a dearer call's wait is out of date).
    pub(crate) fn forget(&self, key: &str) {
        self.shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }

    /// Remembers that calls of `cost` for `key` are refused until `until`.
    pub(crate) fn remember(&self, key: &str, cost: u32, until: u64, now: u64) {
        let mut map = self
            .shard(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(over) = map.get_mut(key) {
            // The latest answer is the truth; keep the cheapest cost it covers.
            *over = Over { until, cost };
            return;
        }
        if map.len() >= self.per_shard {
            map.retain(|_, over| over.until > now);
            if map.len() >= self.per_shard {
                // Every entry is live: drop the one that ends soonest.
                let soonest = map
                    .iter()
                    .min_by_key(|(_, over)| over.until)
                    .map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    map.remove(&k);
                }
            }
        }
        map.insert(key.into(), Over { until, cost });
    }

    /// Keys held now.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_refused_until_its_time_then_forgotten() {
        let cache = OverLimit::new(100, None);
        cache.remember("a", 1, 1_000, 0);
        assert_eq!(cache.lookup("a", 1, 400), Known::Over(600));
        assert_eq!(cache.lookup("b", 1, 400), Known::Nothing);
        assert_eq!(cache.lookup("a", 1, 1_000), Known::Nothing);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_cheaper_call_than_the_refused_one_is_not_refused_from_the_cache() {
        let cache = OverLimit::new(100, None);
        cache.remember("a", 3, 1_000, 0);
        assert_eq!(cache.lookup("a", 2, 10), Known::CheaperMayFit);
        assert_eq!(cache.lookup("a", 3, 10), Known::Over(990));
        assert_eq!(cache.lookup("a", 5, 10), Known::Nothing);
        cache.forget("a");
        assert_eq!(cache.lookup("a", 3, 10), Known::Nothing);
    }

    #[test]
    fn a_dearer_call_under_one_quota_waits_its_extra_cost_longer() {
        // One quota with a 500 ns interval: cost 1 refused for 400 ns more
        // means cost 2 for 900, cost 4 for 1,900.
        let cache = OverLimit::new(100, Some(500));
        cache.remember("a", 1, 1_000, 0);
        assert_eq!(cache.lookup("a", 1, 600), Known::Over(400));
        assert_eq!(cache.lookup("a", 2, 600), Known::Over(900));
        assert_eq!(cache.lookup("a", 4, 600), Known::Over(1_900));
    }

    #[test]
    fn the_cache_stays_within_its_bound_dropping_what_ends_soonest() {
        let cache = OverLimit::new(SHARDS, None);
        for i in 0..10_000_u64 {
            cache.remember(&i.to_string(), 1, 1_000_000 + i, 0);
        }
        assert!(cache.len() <= SHARDS, "{}", cache.len());
        // The last key of each shard is the one that ends latest: kept.
        assert!(matches!(cache.lookup("9999", 1, 0), Known::Over(_)));
    }
}
