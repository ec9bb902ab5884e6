//! The backoff benchmark's loop without criterion, for instruction counts:
//!
//! ```text
//! cargo build --release -p steadfast --example backoff_instructions
//! valgrind --tool=callgrind --toggle-collect='*backoff_instructions::run*' \
//!     target/release/examples/backoff_instructions 100000 [multiplier]
//! ```
//!
//! The count divided by `10 * iterations` is instructions per delay (the
//! fresh state and `Rng::from_entropy()` of each iteration included). The
//! multiplier is 2 (the benchmark's) unless given: a whole one takes the
//! integer curve, another (1.5) the float one.

use std::hint::black_box;
use std::time::Duration;

use steadfast::{Backoff, Jitter, Rng, Schedule, ScheduleState};

#[inline(never)]
fn run(schedule: &Backoff, iterations: u64) {
    for _ in 0..iterations {
        let schedule = black_box(schedule);
        let mut state = ScheduleState::new();
        let mut rng = Rng::from_entropy();
        for _ in 0..10 {
            black_box(schedule.next_delay(&mut state, &mut rng));
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iterations = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let multiplier = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let schedule = Backoff::exponential()
        .initial(Duration::from_millis(100))
        .multiplier(multiplier)
        .max_delay(Duration::from_secs(10))
        .jitter(Jitter::Full)
        .build()
        .expect("valid configuration");
    run(&schedule, iterations);
}
