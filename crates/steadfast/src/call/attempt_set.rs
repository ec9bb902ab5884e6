//! A small set of attempt numbers, for telling an attempt which copies are
//! already in flight.

use std::fmt;

/// The most copies (attempts, counting the first) one hedged call may send: 32.
///
/// A [`HedgePolicy`](crate::policy::HedgePolicy) with more is a configuration error;
/// gRPC's default client cap (5) is far below it.
pub const MAX_HEDGE_ATTEMPTS: u32 = 32;

/// A set of attempt numbers (`1..=`[`MAX_HEDGE_ATTEMPTS`]) kept as one bit
/// each: `Copy`, no allocation.
///
/// [`Attempt::in_flight`](crate::call::Attempt::in_flight) carries one, so a caller
/// or a load balancer can send a hedged copy to a server that the copies
/// still in flight are not using.
///
/// ```
/// use steadfast::call::AttemptSet;
/// let mut set = AttemptSet::new();
/// assert!(set.insert(1));
/// assert!(set.insert(3));
/// assert!(!set.insert(3)); // already there
/// assert!(!set.insert(0)); // not an attempt number
/// assert_eq!(set.iter().collect::<Vec<_>>(), [1, 3]);
/// assert_eq!(set.len(), 2);
/// assert!(set.remove(1));
/// assert!(set.contains(3) && !set.contains(1));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AttemptSet(u32);

impl AttemptSet {
    /// The empty set.
    #[must_use]
    pub const fn new() -> Self {
        Self(0)
    }

    const fn bit(number: u32) -> u32 {
        if number >= 1 && number <= MAX_HEDGE_ATTEMPTS {
            1 << (number - 1)
        } else {
            0
        }
    }

    /// Whether attempt `number` is in the set.
    ///
    /// ```
    /// let mut set = steadfast::call::AttemptSet::new();
    /// set.insert(2);
    /// assert!(set.contains(2));
    /// ```
    #[must_use]
    pub const fn contains(self, number: u32) -> bool {
        self.0 & Self::bit(number) != 0
    }

    /// Adds attempt `number`; `false` if it was there already or is not in
    /// `1..=MAX_HEDGE_ATTEMPTS` (such numbers are ignored, never a panic).
    ///
    /// ```
    /// let mut set = steadfast::call::AttemptSet::new();
    /// assert!(set.insert(32));
    /// assert!(!set.insert(33));
    /// ```
    pub fn insert(&mut self, number: u32) -> bool {
        let bit = Self::bit(number);
        let added = bit != 0 && self.0 & bit == 0;
        self.0 |= bit;
        added
    }

    /// Removes attempt `number`; `false` if it was not there.
    ///
    /// ```
    /// let mut set = steadfast::call::AttemptSet::new();
    /// set.insert(4);
    /// assert!(set.remove(4));
    /// assert!(!set.remove(4));
    /// ```
    pub fn remove(&mut self, number: u32) -> bool {
        let bit = Self::bit(number);
        let had = self.0 & bit != 0;
        self.0 &= !bit;
        had
    }

    /// How many attempts are in the set.
    ///
    /// ```
    /// assert_eq!(steadfast::call::AttemptSet::new().len(), 0);
    /// ```
    #[must_use]
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty.
    ///
    /// ```
    /// assert!(steadfast::call::AttemptSet::new().is_empty());
    /// ```
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The attempt numbers in the set, in increasing order.
    ///
    /// ```
    /// let mut set = steadfast::call::AttemptSet::new();
    /// set.insert(5);
    /// set.insert(2);
    /// assert_eq!(set.iter().collect::<Vec<_>>(), [2, 5]);
    /// ```
    #[must_use]
    pub const fn iter(self) -> AttemptSetIter {
        AttemptSetIter(self.0)
    }
}

impl fmt::Debug for AttemptSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl IntoIterator for AttemptSet {
    type Item = u32;
    type IntoIter = AttemptSetIter;
    fn into_iter(self) -> AttemptSetIter {
        self.iter()
    }
}

/// The iterator of [`AttemptSet::iter`]: attempt numbers in increasing order.
///
/// ```
/// let mut set = steadfast::call::AttemptSet::new();
/// set.insert(1);
/// let mut it = set.iter();
/// assert_eq!(it.next(), Some(1));
/// assert_eq!(it.next(), None);
/// ```
#[derive(Debug, Clone)]
pub struct AttemptSetIter(u32);

impl Iterator for AttemptSetIter {
    type Item = u32;
    fn next(&mut self) -> Option<u32> {
        if self.0 == 0 {
            return None;
        }
        let low = self.0.trailing_zeros();
        self.0 &= self.0 - 1;
        Some(low + 1)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for AttemptSetIter {}
