//! Model checks of the compare-and-swap and of a combined limit's
//! give-back: every interleaving of racing calls on a frozen clock.
#![allow(clippy::unwrap_used)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;

use super::*;
use crate::clock::VirtualClock;

/// Two threads race for the last cell of a quota: exactly one gets it.
#[test]
fn the_last_cell_goes_to_exactly_one_thread() {
    loom::model(|| {
        let limit = RateLimit::builder()
            .quota(Quota::per_second(2).unwrap())
            .build_with_clock(VirtualClock::manual())
            .unwrap();
        limit.check().unwrap();
        let won = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (limit, won) = (limit.clone(), Arc::clone(&won));
                thread::spawn(move || {
                    if limit.check().is_ok() {
                        won.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(won.load(Ordering::Relaxed), 1);
        assert_eq!(limit.remaining(), 0);
    });
}

/// A combined limit whose second quota has one cell left: two racing calls
/// admit exactly one, and the loser's share of the first quota comes back.
#[test]
fn a_combined_refusal_gives_back_what_it_took() {
    loom::model(|| {
        let limit = RateLimit::builder()
            .quota(Quota::per_second(4).unwrap())
            .quota(Quota::per_second(1).unwrap())
            .build_with_clock(VirtualClock::manual())
            .unwrap();
        let won = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (limit, won) = (limit.clone(), Arc::clone(&won));
                thread::spawn(move || {
                    if limit.check().is_ok() {
                        won.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(won.load(Ordering::Relaxed), 1);
        // The first quota was charged once, for the one admitted call.
        let left: Vec<u64> = limit.remaining_by_quota().map(|(_, n)| n).collect();
        assert_eq!(left, [3, 0]);
    });
}
