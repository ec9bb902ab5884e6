//! The breaker's state, packed in one atomic word so that every transition
//! is one compare-and-swap, and the time it refers to, in a second word
//! tagged with the transition it belongs to.
//!
//! State word: bits 0–1 the state, 2–13 the probes granted in the current
//! half-open round, 14–23 the consecutive openings (saturating), 24–63 a
//! generation that every transition moves on, so a thread acting on a state
//! it read earlier fails its compare-and-swap if anything changed since
//! (no transition is lost, none is taken twice).
//!
//! Deadline word: the low 48 bits are milliseconds since the breaker's
//! start (when the break ends, or when the half-open round's probes are
//! given up on), the high 16 bits the low bits of the generation it was
//! written for. The thread that wins a transition writes it right after; a
//! reader that finds another generation's tag treats the deadline as not
//! reached yet.

use std::fmt;

/// The state of a [`CircuitBreaker`](super::CircuitBreaker).
///
/// ```
/// use steadfast::control::BreakerState;
/// assert_eq!(BreakerState::HalfOpen.to_string(), "half-open");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls go through; outcomes are counted in the window.
    Closed,
    /// Calls are refused until the break is over.
    Open,
    /// Up to the configured number of probe calls go through; the first
    /// outcome closes (success) or opens (failure) the breaker again.
    HalfOpen,
    /// Opened by hand ([`CircuitBreaker::isolate`](super::CircuitBreaker::isolate)):
    /// calls are refused until [`reset`](super::CircuitBreaker::reset).
    Isolated,
}

impl BreakerState {
    /// The state's name in events and messages.
    ///
    /// ```
    /// assert_eq!(steadfast::control::BreakerState::Open.as_str(), "open");
    /// ```
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half-open",
            Self::Isolated => "isolated",
        }
    }

    /// The state as the `steadfast.breaker.state` gauge reads it: 0
    /// closed, 1 half-open, 2 open, 3 isolated.
    pub(super) const fn level(self) -> u8 {
        match self {
            Self::Closed => 0,
            Self::HalfOpen => 1,
            Self::Open => 2,
            Self::Isolated => 3,
        }
    }

    const fn bits(self) -> u64 {
        match self {
            Self::Closed => 0,
            Self::Open => 1,
            Self::HalfOpen => 2,
            Self::Isolated => 3,
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const KIND_MASK: u64 = 0b11;
const PROBES_SHIFT: u32 = 2;
const PROBES_MASK: u64 = 0xFFF;
const OPENS_SHIFT: u32 = 14;
const OPENS_MASK: u64 = 0x3FF;
const GEN_SHIFT: u32 = 24;

/// The most probes a half-open round may grant (what the word can count).
pub(super) const MAX_PROBES: u32 = PROBES_MASK as u32;

/// One reading of the state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Word(pub(super) u64);

impl Word {
    /// The word of a new breaker: closed, generation 0.
    pub(super) const CLOSED: Self = Self(0);

    #[inline]
    pub(super) const fn is_closed(self) -> bool {
        self.0 & KIND_MASK == 0
    }

    #[inline]
    pub(super) fn state(self) -> BreakerState {
        match self.0 & KIND_MASK {
            0 => BreakerState::Closed,
            1 => BreakerState::Open,
            2 => BreakerState::HalfOpen,
            _ => BreakerState::Isolated,
        }
    }

    /// Probes granted in the current half-open round.
    #[inline]
    pub(super) fn probes(self) -> u32 {
        ((self.0 >> PROBES_SHIFT) & PROBES_MASK) as u32
    }

    /// Consecutive openings without a close in between (0 while it has
    /// never re-opened from half-open).
    #[inline]
    pub(super) fn opens(self) -> u32 {
        ((self.0 >> OPENS_SHIFT) & OPENS_MASK) as u32
    }

    #[inline]
    pub(super) fn generation(self) -> u64 {
        self.0 >> GEN_SHIFT
    }

    /// The next generation's word in `state`, with `probes` and `opens`.
    #[inline]
    pub(super) fn next(self, state: BreakerState, probes: u32, opens: u32) -> Self {
        let generation = self.generation().wrapping_add(1) << GEN_SHIFT;
        let probes = (u64::from(probes) & PROBES_MASK) << PROBES_SHIFT;
        let opens = u64::from(opens).min(OPENS_MASK) << OPENS_SHIFT;
        Self(generation | opens | probes | state.bits())
    }

    /// The same word with `probes` granted (no new generation: a probe
    /// taken or given back is not a transition).
    #[inline]
    pub(super) fn with_probes(self, probes: u32) -> Self {
        let cleared = self.0 & !(PROBES_MASK << PROBES_SHIFT);
        Self(cleared | ((u64::from(probes) & PROBES_MASK) << PROBES_SHIFT))
    }
}

const MILLIS_MASK: u64 = (1 << 48) - 1;

/// The deadline word for the transition to `word`: `millis` since the
/// breaker's start (saturating at 2⁴⁸ − 1 ms, some 8,900 years).
#[inline]
pub(super) fn deadline(word: Word, millis: u64) -> u64 {
    ((word.generation() & 0xFFFF) << 48) | millis.min(MILLIS_MASK)
}

/// The deadline in `stored` if it was written for `word`'s transition.
#[inline]
pub(super) fn deadline_of(word: Word, stored: u64) -> Option<u64> {
    (stored >> 48 == word.generation() & 0xFFFF).then_some(stored & MILLIS_MASK)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let w = Word::CLOSED.next(BreakerState::HalfOpen, 7, 3);
        assert_eq!(w.state(), BreakerState::HalfOpen);
        assert_eq!((w.probes(), w.opens(), w.generation()), (7, 3, 1));
        let w = w.with_probes(MAX_PROBES);
        assert_eq!((w.probes(), w.opens(), w.generation()), (MAX_PROBES, 3, 1));
        let w = w.next(BreakerState::Open, 0, 5000);
        assert_eq!(w.state(), BreakerState::Open);
        assert_eq!((w.probes(), w.opens(), w.generation()), (0, 1023, 2));
        assert!(w.next(BreakerState::Closed, 0, 0).is_closed());
    }

    #[test]
    fn deadlines_belong_to_one_transition() {
        let open = Word::CLOSED.next(BreakerState::Open, 0, 0);
        let stored = deadline(open, 5000);
        assert_eq!(deadline_of(open, stored), Some(5000));
        let later = open.next(BreakerState::HalfOpen, 1, 0);
        assert_eq!(deadline_of(later, stored), None);
        assert_eq!(
            deadline_of(open, deadline(open, u64::MAX)),
            Some(MILLIS_MASK)
        );
    }
}
