//! A sliding time window of event counts, lock-free: the shared machinery of
//! the retry budget and the adaptive throttle.
//!
//! Time (nanoseconds since the owner's start) is cut into `SLOTS` slots of
//! `width`; the window is the current slot
//! and the `SLOTS - 1` before it. Each slot holds two counters (`a` and `b`,
//! say requests and retries). A counter is one `u64`: the high 32 bits tag
//! the slot's epoch (which `width`-long stretch of time it counts), the low
//! 32 bits count. An increment is one compare-and-swap that either bumps a
//! current count or restarts a stale slot at 1, so a stale slot is recycled
//! and counted in the same atomic step: no update is lost to a rotation, and
//! no lock is needed to rotate. (A slot already current and far from
//! saturating is bumped with a plain `fetch_add`, which cannot fail and so
//! cannot loop under contention.) A sum reads each counter once and keeps
//! the ones whose tag is inside the window.
//!
//! Epoch tags wrap after 2³² slots (13.6 years at the narrowest, 100 ms
//! slots); a slot untouched for exactly a multiple of that would be taken as
//! current, which is accepted.

use std::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// Slots per window (as Finagle and tower use).
pub(crate) const SLOTS: u64 = 10;

const COUNT_MASK: u64 = 0xFFFF_FFFF;

/// Below this count an increment of a current slot is a plain `fetch_add`;
/// from it on, a compare-and-swap that saturates at `COUNT_MASK`.
const FETCH_ADD_BELOW: u64 = 1 << 31;

/// Which of the two counters of a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counter {
    A,
    B,
}

#[derive(Debug)]
struct Slot {
    a: AtomicU64,
    b: AtomicU64,
}

impl Slot {
    fn counter(&self, which: Counter) -> &AtomicU64 {
        match which {
            Counter::A => &self.a,
            Counter::B => &self.b,
        }
    }
}

/// Where an increment landed, to take it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    index: usize,
    tag: u64,
    count: u64,
}

impl Stamp {
    /// The epoch (truncated to 32 bits) the increment was counted in.
    pub(crate) fn epoch(self) -> u64 {
        self.tag >> 32
    }

    /// The slot's count right after this increment: it includes every
    /// increment of the same counter and slot that came before it.
    pub(crate) fn count(self) -> u64 {
        self.count
    }
}

/// The sliding window itself (no clock: callers pass the time since their
/// start, in nanoseconds, or the epoch).
#[derive(Debug)]
pub(crate) struct TimeWindow {
    width_nanos: u64,
    slots: Box<[Slot]>,
    /// The latest epoch any caller of [`current`](Self::current) has seen.
    latest: AtomicU64,
}

impl TimeWindow {
    /// A window of `span` (at least `SLOTS` ns).
    pub(crate) fn new(span: Duration) -> Self {
        let nanos = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        let width_nanos = (nanos / SLOTS).max(1);
        let slots = (0..SLOTS)
            .map(|_| Slot {
                a: AtomicU64::new(0),
                b: AtomicU64::new(0),
            })
            .collect();
        Self {
            width_nanos,
            slots,
            latest: AtomicU64::new(0),
        }
    }

    /// The epoch to count an event at `nanos` (since the start) in: its own, or the latest
    /// epoch any caller has seen if that is later (a caller that read the
    /// clock just before another one turned the slot counts in the new
    /// slot, as [`add`](Self::add) would make it anyway). While the slot has
    /// not turned this is one load and a multiplication; the division and a
    /// `fetch_max` happen once per turn of the slot (per thread that sees it).
    #[inline]
    pub(crate) fn current(&self, nanos: u64) -> u64 {
        let latest = self.latest.load(Ordering::SeqCst);
        // `latest <= u64::MAX / width_nanos`, so `latest + 1` cannot overflow.
        if nanos < (latest + 1).saturating_mul(self.width_nanos) {
            return latest;
        }
        let epoch = nanos / self.width_nanos;
        self.latest.fetch_max(epoch, Ordering::SeqCst).max(epoch)
    }

    /// The epoch (slot number since the start) of `nanos` since the start.
    #[inline]
    pub(crate) fn epoch(&self, nanos: u64) -> u64 {
        nanos / self.width_nanos
    }

    #[inline]
    fn slot(&self, index: u64) -> &Slot {
        // `index < SLOTS == slots.len()`.
        &self.slots[(index % SLOTS) as usize]
    }

    /// Counts one event at `epoch`. A thread that read the time just before a
    /// slot was recycled for a later epoch counts its event in that later
    /// epoch (slightly late, never lost).
    #[inline]
    pub(crate) fn add(&self, epoch: u64, which: Counter) -> Stamp {
        let index = epoch % SLOTS;
        let tag = (epoch & COUNT_MASK) << 32;
        let counter = self.slot(index).counter(which);
        let mut current = counter.load(Ordering::Acquire);
        if current & !COUNT_MASK == tag && current & COUNT_MASK < FETCH_ADD_BELOW {
            // The slot is current and far from saturating: one `fetch_add`,
            // with no retry loop under contention. Racing adders can take
            // the count past the bound only by their own number, nowhere
            // near the tag bits; a slot recycled in between for a later
            // epoch counts this event in that epoch, as the loop below does.
            let old = counter.fetch_add(1, Ordering::SeqCst);
            return Stamp {
                index: index as usize,
                tag: old & !COUNT_MASK,
                count: (old & COUNT_MASK) + 1,
            };
        }
        loop {
            let current_tag = current & !COUNT_MASK;
            let new = if current_tag == tag || is_later(current_tag, tag) {
                // Current (or already recycled by a later epoch): bump,
                // saturating the count rather than carrying into the tag.
                if current & COUNT_MASK == COUNT_MASK {
                    return Stamp {
                        index: index as usize,
                        tag: current_tag,
                        count: COUNT_MASK,
                    };
                }
                current + 1
            } else {
                tag | 1
            };
            match counter.compare_exchange_weak(current, new, Ordering::SeqCst, Ordering::Acquire) {
                Ok(_) => {
                    return Stamp {
                        index: index as usize,
                        tag: new & !COUNT_MASK,
                        count: new & COUNT_MASK,
                    };
                }
                Err(actual) => current = actual,
            }
        }
    }

    /// Takes back the increment at `stamp`, if its slot still counts that
    /// epoch (if it has been recycled, the increment is gone already).
    pub(crate) fn undo(&self, stamp: Stamp, which: Counter) {
        let Some(slot) = self.slots.get(stamp.index) else {
            return;
        };
        let counter = slot.counter(which);
        let mut current = counter.load(Ordering::Acquire);
        while current & !COUNT_MASK == stamp.tag && current & COUNT_MASK > 0 {
            match counter.compare_exchange_weak(
                current,
                current - 1,
                Ordering::SeqCst,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Takes back one event counted in the window at `epoch`: from the most
    /// recent slot that still has one. Returns how many slots before
    /// `epoch`'s it was found in, or `None` when the window holds none.
    pub(crate) fn take_back(&self, epoch: u64, which: Counter) -> Option<u64> {
        for back in 0..SLOTS {
            let Some(e) = epoch.checked_sub(back) else {
                break;
            };
            let index = e % SLOTS;
            let tag = (e & COUNT_MASK) << 32;
            let counter = self.slot(index).counter(which);
            let mut current = counter.load(Ordering::Acquire);
            while current & !COUNT_MASK == tag && current & COUNT_MASK > 0 {
                match counter.compare_exchange_weak(
                    current,
                    current - 1,
                    Ordering::SeqCst,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return Some(back),
                    Err(actual) => current = actual,
                }
            }
        }
        None
    }

    /// The sums of both counters over the window ending at `epoch`.
    #[inline]
    pub(crate) fn sums(&self, epoch: u64) -> (u64, u64) {
        let now_tag = epoch & COUNT_MASK;
        let mut a = 0u64;
        let mut b = 0u64;
        for slot in &*self.slots {
            a += in_window(slot.a.load(Ordering::SeqCst), now_tag);
            b += in_window(slot.b.load(Ordering::SeqCst), now_tag);
        }
        (a, b)
    }

    /// The sums of both counters over the slots of the window ending at
    /// `epoch` other than `epoch`'s own (the `SLOTS - 1` before it).
    pub(crate) fn past_sums(&self, epoch: u64) -> (u64, u64) {
        let now_tag = epoch & COUNT_MASK;
        let mut a = 0u64;
        let mut b = 0u64;
        for slot in &*self.slots {
            a += in_past(slot.a.load(Ordering::SeqCst), now_tag);
            b += in_past(slot.b.load(Ordering::SeqCst), now_tag);
        }
        (a, b)
    }

    /// Both counters of `epoch`'s own slot (0 if the slot still holds an
    /// older epoch).
    #[inline]
    pub(crate) fn counts_at(&self, epoch: u64) -> (u64, u64) {
        let slot = self.slot(epoch % SLOTS);
        let tag = (epoch & COUNT_MASK) << 32;
        let count = |word: u64| {
            if word & !COUNT_MASK == tag {
                word & COUNT_MASK
            } else {
                0
            }
        };
        (
            count(slot.a.load(Ordering::SeqCst)),
            count(slot.b.load(Ordering::SeqCst)),
        )
    }

    /// The latest epoch [`current`](Self::current) has returned.
    #[inline]
    pub(crate) fn latest(&self) -> u64 {
        self.latest.load(Ordering::SeqCst)
    }
}

/// The count of `word` if its tag is 1 to `SLOTS - 1` epochs before
/// `now_tag`, else 0.
#[inline]
fn in_past(word: u64, now_tag: u64) -> u64 {
    let age = now_tag.wrapping_sub(word >> 32) & COUNT_MASK;
    if age != 0 && age < SLOTS {
        word & COUNT_MASK
    } else {
        0
    }
}

/// The count of `word` if its tag is within `SLOTS` epochs before `now_tag`
/// (inclusive), else 0.
#[inline]
fn in_window(word: u64, now_tag: u64) -> u64 {
    let age = now_tag.wrapping_sub(word >> 32) & COUNT_MASK;
    if age < SLOTS { word & COUNT_MASK } else { 0 }
}

/// Whether tag `a` is a later epoch than tag `b` (both in the high 32 bits),
/// by wrapping distance.
#[inline]
fn is_later(a: u64, b: u64) -> bool {
    let d = ((a >> 32).wrapping_sub(b >> 32)) & COUNT_MASK;
    d != 0 && d < (1 << 31)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_slide_out_of_the_window() {
        let w = TimeWindow::new(Duration::from_secs(10));
        let at = |ms: u64| w.epoch(ms * 1_000_000);
        w.add(at(0), Counter::A);
        w.add(at(500), Counter::A);
        w.add(at(1500), Counter::B);
        assert_eq!(w.sums(at(1500)), (2, 1));
        assert_eq!(w.sums(at(9999)), (2, 1));
        assert_eq!(w.sums(at(10_000)), (0, 1), "slot 0 expired");
        assert_eq!(w.sums(at(11_000)), (0, 0));
        // Recycling a slot restarts its count.
        w.add(at(10_000), Counter::A);
        assert_eq!(w.sums(at(10_000)), (1, 1));
    }

    #[test]
    fn undo_and_take_back() {
        let w = TimeWindow::new(Duration::from_secs(1));
        let s = w.add(0, Counter::B);
        w.add(3, Counter::B);
        w.undo(s, Counter::B);
        assert_eq!(w.sums(3), (0, 1));
        assert_eq!(w.take_back(5, Counter::B), Some(2));
        assert_eq!(w.sums(5), (0, 0));
        assert_eq!(w.take_back(5, Counter::B), None);
        // A stamp whose slot was recycled is not undone.
        let s = w.add(1, Counter::A);
        w.add(11, Counter::A);
        w.undo(s, Counter::A);
        assert_eq!(w.sums(11), (1, 0));
    }

    #[test]
    fn late_writer_counts_in_the_later_epoch() {
        let w = TimeWindow::new(Duration::from_secs(1));
        w.add(12, Counter::A);
        let s = w.add(2, Counter::A); // read the time before the recycle
        assert_eq!(s.epoch(), 12);
        assert_eq!(w.sums(12), (2, 0));
    }

    #[test]
    fn tags_wrap() {
        assert!(is_later(1 << 32, COUNT_MASK << 32));
        assert!(!is_later(COUNT_MASK << 32, 1 << 32));
        assert_eq!(in_window((COUNT_MASK << 32) | 7, 3), 7);
        assert_eq!(in_window((COUNT_MASK << 32) | 7, 9), 0);
    }
}
