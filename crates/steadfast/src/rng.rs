//! The random source behind every jittered delay.
//!
//! A small, fast, non-cryptographic generator (wyrand, through `fastrand`)
//! held by value: drawing a number never locks and never allocates, and the
//! same seed gives the same numbers on every platform.

/// A seedable, non-cryptographic random number generator.
///
/// ```
/// use steadfast::backoff::Rng;
/// let mut a = Rng::with_seed(7);
/// let mut b = Rng::with_seed(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// let x = a.unit_f64();
/// assert!((0.0..1.0).contains(&x));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng(fastrand::Rng);

impl Rng {
    /// A generator whose sequence is fixed by `seed`.
    #[inline]
    #[must_use]
    pub fn with_seed(seed: u64) -> Self {
        Self(fastrand::Rng::with_seed(seed))
    }

    /// A generator seeded from a per-thread source (no lock, no allocation).
    #[inline]
    #[must_use]
    pub fn from_entropy() -> Self {
        Self(fastrand::Rng::new())
    }

    /// `Some(seed)` gives [`with_seed`](Self::with_seed), `None` gives
    /// [`from_entropy`](Self::from_entropy).
    #[inline]
    #[must_use]
    pub fn seeded_or_entropy(seed: Option<u64>) -> Self {
        seed.map_or_else(Self::from_entropy, Self::with_seed)
    }

    /// A uniformly distributed `u64`.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0.u64(..)
    }

    /// A uniformly distributed float in `[0, 1)`.
    #[inline]
    pub fn unit_f64(&mut self) -> f64 {
        self.0.f64()
    }

    /// A uniformly distributed float in `[low, high)`; `low` when the range is empty.
    #[inline]
    pub fn range_f64(&mut self, low: f64, high: f64) -> f64 {
        if high > low {
            low + (high - low) * self.unit_f64()
        } else {
            low
        }
    }

    /// A new generator split off this one, for a child with its own sequence
    /// (deterministic when this one is seeded).
    #[inline]
    #[must_use]
    pub fn fork(&mut self) -> Self {
        Self(self.0.fork())
    }
}
