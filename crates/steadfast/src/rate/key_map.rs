//! [`KeyMap`]: one shard of a keyed limit's key set, indexed by the hash
//! the limit already computed to pick the shard, so a check hashes its key
//! once (a `HashMap<K, _>` would hash it again for every lookup).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Passes a precomputed 64-bit hash through unchanged.
#[derive(Default)]
pub(crate) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64`s are hashed here; fold anything else in all the same.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The keys of one hash: almost always one.
enum Bucket<K, V> {
    One(K, V),
    /// Keys whose 64-bit hashes collide (astronomically rare, handled).
    Many(Vec<(K, V)>),
}

/// Keys and their values, by the keys' precomputed hashes.
pub(crate) struct KeyMap<K, V> {
    buckets: HashMap<u64, Bucket<K, V>, BuildHasherDefault<Prehashed>>,
    len: usize,
}

impl<K, V> Default for KeyMap<K, V> {
    fn default() -> Self {
        Self {
            buckets: HashMap::default(),
            len: 0,
        }
    }
}

impl<K: Eq, V> KeyMap<K, V> {
    /// The value of `key`, whose hash is `hash`.
    pub(crate) fn get_mut<Q>(&mut self, hash: u64, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        match self.buckets.get_mut(&hash)? {
            Bucket::One(k, v) => (<K as Borrow<Q>>::borrow(k) == key).then_some(v),
            Bucket::Many(entries) => entries
                .iter_mut()
                .find(|(k, _)| <K as Borrow<Q>>::borrow(k) == key)
                .map(|(_, v)| v),
        }
    }

    /// Adds `key` (not in the map) with `value`.
    pub(crate) fn insert_new(&mut self, hash: u64, key: K, value: V) {
        self.len += 1;
        match self.buckets.remove(&hash) {
            None => {
                self.buckets.insert(hash, Bucket::One(key, value));
            }
            Some(Bucket::One(k, v)) => {
                self.buckets
                    .insert(hash, Bucket::Many(vec![(k, v), (key, value)]));
            }
            Some(Bucket::Many(mut entries)) => {
                entries.push((key, value));
                self.buckets.insert(hash, Bucket::Many(entries));
            }
        }
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Keeps the keys whose value `keep` says yes to.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        let mut len = 0;
        self.buckets.retain(|_, bucket| match bucket {
            Bucket::One(_, v) => {
                let kept = keep(v);
                len += usize::from(kept);
                kept
            }
            Bucket::Many(entries) => {
                entries.retain(|(_, v)| keep(v));
                len += entries.len();
                !entries.is_empty()
            }
        });
        self.len = len;
    }

    /// Drops the key whose value is least by `by`.
    pub(crate) fn remove_least_by(&mut self, by: impl Fn(&V) -> u64) {
        let mut least: Option<(u64, usize, u64)> = None;
        let mut consider = |hash: u64, i: usize, value: u64| {
            if least.is_none_or(|(_, _, l)| value < l) {
                least = Some((hash, i, value));
            }
        };
        for (&hash, bucket) in &self.buckets {
            match bucket {
                Bucket::One(_, v) => consider(hash, 0, by(v)),
                Bucket::Many(entries) => {
                    for (i, (_, v)) in entries.iter().enumerate() {
                        consider(hash, i, by(v));
                    }
                }
            }
        }
        let Some((hash, i, _)) = least else { return };
        self.len -= 1;
        if let Some(Bucket::Many(entries)) = self.buckets.get_mut(&hash) {
            entries.swap_remove(i);
            if !entries.is_empty() {
                return;
            }
        }
        self.buckets.remove(&hash);
    }

    /// The keys, for tests.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> Vec<&K> {
        self.buckets
            .values()
            .flat_map(|bucket| match bucket {
                Bucket::One(k, _) => vec![k],
                Bucket::Many(entries) => entries.iter().map(|(k, _)| k).collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_hash_are_kept_apart() {
        let mut map = KeyMap::default();
        map.insert_new(7, "a", 1);
        map.insert_new(7, "b", 2);
        map.insert_new(9, "c", 3);
        assert_eq!(map.len(), 3);
        assert_eq!(map.get_mut(7, "a").copied(), Some(1));
        assert_eq!(map.get_mut(7, "b").copied(), Some(2));
        assert_eq!(map.get_mut(7, "c"), None);
        assert_eq!(map.get_mut(9, "c").copied(), Some(3));
        map.remove_least_by(|&v| v);
        assert_eq!(map.get_mut(7, "a"), None);
        assert_eq!(map.get_mut(7, "b").copied(), Some(2));
        map.retain(|&v| v > 2);
        assert_eq!((map.len(), map.keys()), (1, vec![&"c"]));
        map.remove_least_by(|&v| v);
        assert_eq!(map.len(), 0);
        map.remove_least_by(|&v| v);
        assert_eq!(map.len(), 0);
    }
}
