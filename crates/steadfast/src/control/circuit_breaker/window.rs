//! The breaker's sampling window: calls and failures in `SLOTS` slots, cut
//! by time (the last `span`) or by count (the last `n` calls, in blocks of
//! `n / SLOTS`), that a reset empties at once.
//!
//! Each slot has two counters, calls and failures. A counter is one `u64`:
//! the high 32 bits tag what it counts, the low 32 bits count. The tag is
//! the window's *generation* (8 bits; a reset moves it on) and the slot's
//! *epoch* (24 bits; which `width`-long stretch of time, or which block of
//! calls). A counter whose tag is not the current generation, or whose epoch
//! has left the window, counts for nothing and is recycled by the next
//! increment in the same compare-and-swap that counts it; so a reset is one
//! `fetch_add` on the generation, and no update is lost to a rotation.
//! A current counter far from saturating is bumped with a plain `fetch_add`.
//!
//! Tags wrap (256 resets, 2²⁴ epochs); a slot untouched for exactly a
//! multiple of that would be taken as current, which is accepted.

use std::time::Duration;

use crate::sync::{AtomicU64, CachePadded, Ordering};

/// Slots per window.
pub(super) const SLOTS: u64 = 10;

const COUNT_MASK: u64 = 0xFFFF_FFFF;
const EPOCH_BITS: u32 = 24;
const EPOCH_MASK: u64 = (1 << EPOCH_BITS) - 1;
const GEN_MASK: u64 = 0xFF;
/// Below this count an increment of a current counter is a plain `fetch_add`.
const FETCH_ADD_BELOW: u64 = 1 << 31;

/// How the window is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cut {
    /// Slots of `width` nanoseconds each.
    Time { width: u64 },
    /// Slots of `calls` calls each (the last slot fills as calls come).
    Count { calls: u64 },
}

#[derive(Debug)]
struct Slot {
    calls: AtomicU64,
    failures: AtomicU64,
}

/// The window (no clock: a time-cut window is handed the nanoseconds since
/// its owner's start).
#[derive(Debug)]
pub(super) struct Window {
    cut: Cut,
    /// Each slot on a cache line of its own: callers filling the current
    /// slot do not evict the next one, which a rotation recycles.
    slots: Box<[CachePadded<Slot>]>,
    /// The latest epoch any caller has counted in (time: the latest slot any
    /// caller has seen; count: the block being filled). On a line of its
    /// own: a count cut moves it once a block, and every call reads
    /// `generation`, which only a reset moves.
    latest: CachePadded<AtomicU64>,
    generation: AtomicU64,
}

#[inline]
fn tag(generation: u64, epoch: u64) -> u64 {
    (((generation & GEN_MASK) << EPOCH_BITS) | (epoch & EPOCH_MASK)) << 32
}

/// Whether the counter tagged `have` counts in the window of `want`'s tag
/// (same generation, epoch at most `SLOTS - 1` before).
#[inline]
fn in_window(have: u64, want: u64) -> bool {
    let (have, want) = (have >> 32, want >> 32);
    have >> EPOCH_BITS == want >> EPOCH_BITS && (want.wrapping_sub(have) & EPOCH_MASK) < SLOTS
}

/// Whether tag `a` is later than tag `b`: a later generation (by wrapping
/// distance), or the same generation and a later epoch.
#[inline]
fn is_later(a: u64, b: u64) -> bool {
    let (a, b) = (a >> 32, b >> 32);
    let (ga, gb) = (a >> EPOCH_BITS, b >> EPOCH_BITS);
    if ga != gb {
        let d = ga.wrapping_sub(gb) & GEN_MASK;
        return d < 0x80;
    }
    let d = a.wrapping_sub(b) & EPOCH_MASK;
    d != 0 && d < (1 << (EPOCH_BITS - 1))
}

/// Where a call was counted: its generation and epoch (for the failure of
/// the same call), and the slot's call count right after it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Counted {
    tag: u64,
    count: u64,
}

impl Window {
    /// A window of `SLOTS` slots cut as `cut` (widths of at least 1).
    pub(super) fn new(cut: Cut) -> Self {
        let cut = match cut {
            Cut::Time { width } => Cut::Time {
                width: width.max(1),
            },
            Cut::Count { calls } => Cut::Count {
                calls: calls.max(1),
            },
        };
        let slots = (0..SLOTS)
            .map(|_| {
                CachePadded(Slot {
                    calls: AtomicU64::new(0),
                    failures: AtomicU64::new(0),
                })
            })
            .collect();
        Self {
            cut,
            slots,
            latest: CachePadded(AtomicU64::new(0)),
            generation: AtomicU64::new(0),
        }
    }

    /// A time-cut window spanning `span`.
    pub(super) fn timed(span: Duration) -> Self {
        let nanos = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        Self::new(Cut::Time {
            width: nanos / SLOTS,
        })
    }

    /// Whether the window is cut by time (it needs `nanos` then).
    #[inline]
    pub(super) fn is_timed(&self) -> bool {
        matches!(self.cut, Cut::Time { .. })
    }

    /// The epoch to count in now: for a time cut, the slot of `nanos` (or
    /// a later one another caller already saw); for a count cut, the block
    /// being filled.
    #[inline]
    pub(super) fn current(&self, nanos: u64) -> u64 {
        let latest = self.latest.0.load(Ordering::SeqCst);
        match self.cut {
            Cut::Count { .. } => latest,
            Cut::Time { width } => {
                if nanos < latest.saturating_add(1).saturating_mul(width) {
                    return latest;
                }
                let epoch = nanos / width;
                self.latest.0.fetch_max(epoch, Ordering::SeqCst).max(epoch)
            }
        }
    }

    #[inline]
    fn slot(&self, epoch: u64) -> &Slot {
        // `epoch % SLOTS < SLOTS == slots.len()`.
        &self.slots[(epoch % SLOTS) as usize].0
    }

    /// Counts one call (and, if `failed`, one failure) at `epoch`.
    #[inline]
    pub(super) fn add(&self, epoch: u64, failed: bool) -> Counted {
        let generation = self.generation.load(Ordering::SeqCst);
        let want = tag(generation, epoch);
        let counted = bump(&self.slot(epoch).calls, want);
        if failed {
            // In the slot and tag the call landed in (a later one if the
            // slot was recycled meanwhile).
            let epoch = (counted.tag >> 32) & EPOCH_MASK;
            bump(&self.slot(epoch).failures, counted.tag);
        }
        if let Cut::Count { calls } = self.cut
            && counted.count >= calls
        {
            // The block is full: the next calls fill the next one. (The
            // call may have landed in a later block than `epoch`, if that
            // slot was recycled meanwhile.)
            let ahead = ((counted.tag >> 32).wrapping_sub(epoch)) & EPOCH_MASK;
            // A far jump can only be a tag of another generation: ignore it.
            let landed = epoch.saturating_add(if ahead < SLOTS { ahead } else { 0 });
            self.latest
                .0
                .fetch_max(landed.saturating_add(1), Ordering::SeqCst);
        }
        counted
    }

    /// Calls and failures in the window that ends at `epoch` (for a count
    /// cut: at the last block with calls, so the window holds between
    /// `9·block + 1` and `10·block` of the latest calls).
    pub(super) fn sums(&self, epoch: u64) -> (u64, u64) {
        let generation = self.generation.load(Ordering::SeqCst);
        let mut want = tag(generation, epoch);
        if let Cut::Count { .. } = self.cut
            && epoch > 0
            && self.slot(epoch).calls.load(Ordering::SeqCst) & !COUNT_MASK != want
        {
            // The block being filled has no call yet: end at the one before.
            want = tag(generation, epoch - 1);
        }
        let count = |word: u64| {
            if in_window(word & !COUNT_MASK, want) {
                word & COUNT_MASK
            } else {
                0
            }
        };
        self.slots
            .iter()
            .fold((0, 0), |(calls, failures), CachePadded(slot)| {
                (
                    calls + count(slot.calls.load(Ordering::SeqCst)),
                    failures + count(slot.failures.load(Ordering::SeqCst)),
                )
            })
    }

    /// Empties the window: every counter now counts for nothing.
    pub(super) fn reset(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// Adds one to `counter` for tag `want`: a current counter is bumped, a
/// stale one restarted at 1, and one already recycled for a later tag is
/// bumped as it is (the event counts slightly late, never lost).
#[inline]
fn bump(counter: &AtomicU64, want: u64) -> Counted {
    let mut current = counter.load(Ordering::Acquire);
    if current & !COUNT_MASK == want && current & COUNT_MASK < FETCH_ADD_BELOW {
        let old = counter.fetch_add(1, Ordering::SeqCst);
        return Counted {
            tag: old & !COUNT_MASK,
            count: (old & COUNT_MASK) + 1,
        };
    }
    loop {
        let have = current & !COUNT_MASK;
        let new = if have == want || is_later(have, want) {
            if current & COUNT_MASK == COUNT_MASK {
                return Counted {
                    tag: have,
                    count: COUNT_MASK,
                };
            }
            current + 1
        } else {
            want | 1
        };
        match counter.compare_exchange_weak(current, new, Ordering::SeqCst, Ordering::Acquire) {
            Ok(_) => {
                return Counted {
                    tag: new & !COUNT_MASK,
                    count: new & COUNT_MASK,
                };
            }
            Err(actual) => current = actual,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn time_cut_slides_and_resets() {
        let w = Window::timed(Duration::from_secs(10));
        let at = |ms: u64| w.current(ms * 1_000_000);
        w.add(at(0), false);
        w.add(at(500), true);
        w.add(at(1500), true);
        assert_eq!(w.sums(at(1500)), (3, 2));
        assert_eq!(w.sums(at(9999)), (3, 2));
        assert_eq!(w.sums(at(10_000)), (1, 1), "slot 0 left the window");
        w.reset();
        assert_eq!(w.sums(at(10_000)), (0, 0));
        w.add(at(10_001), true);
        assert_eq!(w.sums(at(10_001)), (1, 1));
    }

    #[test]
    fn count_cut_keeps_the_last_blocks() {
        // 10 blocks of 2 calls: the window holds 19 or 20 of the last calls.
        let w = Window::new(Cut::Count { calls: 2 });
        for i in 0..20 {
            w.add(w.current(0), i < 4);
        }
        assert_eq!(w.sums(w.current(0)), (20, 4));
        // Two more calls start block 10, which recycles block 0 (2 failures).
        w.add(w.current(0), false);
        assert_eq!(w.sums(w.current(0)), (19, 2));
        w.add(w.current(0), false);
        assert_eq!(w.sums(w.current(0)), (20, 2));
        w.reset();
        assert_eq!(w.sums(w.current(0)), (0, 0));
    }

    #[test]
    fn tags_order_by_generation_then_epoch() {
        assert!(is_later(tag(0, 5), tag(0, 4)));
        assert!(!is_later(tag(0, 4), tag(0, 4)));
        assert!(is_later(tag(1, 0), tag(0, 9)));
        assert!(is_later(tag(0, 0), tag(255, 7)), "generations wrap");
        assert!(in_window(tag(3, EPOCH_MASK), tag(3, 2)), "epochs wrap");
        assert!(!in_window(tag(2, 5), tag(3, 5)));
    }
}
