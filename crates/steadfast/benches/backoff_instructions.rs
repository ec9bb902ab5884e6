//! A measurement harness, not an example: what one delay of the backoff
//! benchmark's schedule (exponential from 100 ms, full jitter, capped at
//! 10 s) costs in instructions. It runs the benchmark's loop without
//! criterion, so that callgrind can count it:
//!
//! ```text
//! cargo bench -p steadfast --bench backoff_instructions --no-run   # prints the executable's path
//! valgrind --tool=callgrind --toggle-collect='*backoff_instructions::run*' \
//!     target/release/deps/backoff_instructions-<hash> 100000 [multiplier]
//! ```
//!
//! Callgrind's count divided by `10 * iterations` is instructions per delay
//! (the fresh state and `Rng::from_entropy()` of each iteration included).
//! The multiplier is 2 (the benchmark's) unless given: a whole one takes the
//! integer curve, another (1.5) the float one. Run on its own
//! (`cargo bench -p steadfast --bench backoff_instructions [-- iterations
//! multiplier]`) it prints what it ran and the wall-clock time per delay,
//! a rough figure: the criterion benchmark `backoff` is the one of record.
#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use steadfast::backoff::{Rng, Schedule, ScheduleState};
use steadfast::{Backoff, Jitter};

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
    // `cargo bench` adds `--bench`; only the numbers are ours.
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let iterations = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let multiplier = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let schedule = Backoff::exponential()
        .initial(Duration::from_millis(100))
        .multiplier(multiplier)
        .max_delay(Duration::from_secs(10))
        .jitter(Jitter::Full)
        .build()
        .expect("valid configuration");
    let start = Instant::now();
    run(&schedule, iterations);
    let elapsed = start.elapsed();
    let delays = iterations.saturating_mul(10).max(1);
    println!(
        "{iterations} iterations x 10 delays of exponential x{multiplier} (full jitter): {:.1} ns per delay (wall clock)",
        elapsed.as_secs_f64() * 1e9 / delays as f64
    );
    println!("under callgrind: instructions per delay = the Ir of `run` / {delays}");
}
