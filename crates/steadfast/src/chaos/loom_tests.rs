//! The model of the chaos's ceiling under loom: every interleaving of two
//! threads drawing at once.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::*;

fn on(b: ChaosBuilder<(), ()>) -> Chaos {
    b.enabled(true).build().unwrap()
}

const MS: Duration = Duration::from_millis(1);

/// Two threads drawing under a ceiling of one never both hold a fault,
/// and the count goes back to zero.
#[test]
fn the_ceiling_holds_under_every_interleaving() {
    loom::model(|| {
        let chaos: Chaos = on(Chaos::builder().seed(1).latency(1.0, MS).max_active(1));
        let other = chaos.clone();
        let t = loom::thread::spawn(move || other.draw());
        let mine = chaos.draw();
        let theirs = t.join().unwrap();
        assert!(
            mine.is_some() != theirs.is_some(),
            "exactly one holds the one slot"
        );
        drop((mine, theirs));
        assert_eq!(chaos.stats().active, 0);
    });
}
