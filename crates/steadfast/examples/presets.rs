//! Prints the first delays of every built-in backoff preset, seeded, with
//! the cumulative time, as a table.
//!
//! Run: `cargo run --release -p steadfast --example presets`
#![allow(clippy::print_stdout)]

use std::time::Duration;

use steadfast::{Backoff, ConfigError, GrpcConnectionBackoff, Schedule};

const SEED: u64 = 2015;
const SHOWN: usize = 8;

fn main() -> Result<(), ConfigError> {
    let presets: Vec<(&str, Backoff)> = vec![
        ("default (exponential, full jitter)", Backoff::default()),
        (
            "constant 1 s",
            Backoff::constant(Duration::from_secs(1)).build()?,
        ),
        ("linear 1 s + 1 s n", Backoff::linear().build()?),
        (
            "exponential, no jitter",
            Backoff::exponential()
                .jitter(steadfast::Jitter::None)
                .build()?,
        ),
        (
            "exponential, equal jitter",
            Backoff::exponential()
                .jitter(steadfast::Jitter::Equal)
                .build()?,
        ),
        ("shift-exponential", Backoff::shift_exponential().build()?),
        ("fibonacci", Backoff::fibonacci().build()?),
        ("decorrelated (AWS)", Backoff::decorrelated().build()?),
        (
            "decorrelated V2 (Polly)",
            Backoff::decorrelated_v2().build()?,
        ),
        ("grpc-go", Backoff::grpc_go().build()?),
        (
            "gRPC connection",
            GrpcConnectionBackoff::default().schedule(),
        ),
        ("gRFC A6", Backoff::grpc_a6().build()?),
        (
            "gRFC A6, legacy (full jitter)",
            Backoff::grpc_a6_legacy().build()?,
        ),
    ];
    println!(
        "First {SHOWN} delays of each preset (seed {SEED}); in brackets, the time waited so far.\n"
    );
    for (label, backoff) in presets {
        let backoff = backoff.with_seed(Some(SEED));
        println!(
            "{label}  [{}, max {}{}]",
            backoff.name(),
            show(backoff.max_delay()),
            cap_note(&backoff)
        );
        let mut total = Duration::ZERO;
        let mut line = String::new();
        for (n, delay) in backoff.delays().take(SHOWN).enumerate() {
            total += delay;
            line.push_str(&format!(
                "  {:>2}: {:>9} [{:>9}]",
                n + 1,
                show(delay),
                show(total)
            ));
            if n % 4 == 3 {
                println!("{line}");
                line.clear();
            }
        }
        if !line.is_empty() {
            println!("{line}");
        }
        debug_assert_eq!(Schedule::seed(&backoff), Some(SEED));
        println!();
    }
    Ok(())
}

fn cap_note(b: &Backoff) -> &'static str {
    if b.caps_after_jitter() {
        ""
    } else {
        ", jitter may exceed max"
    }
}

/// A duration in the largest unit that keeps it readable.
fn show(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 {
        format!("{:.2}h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.2}m", s / 60.0)
    } else if s >= 1.0 {
        format!("{s:.3}s")
    } else {
        format!("{:.1}ms", s * 1000.0)
    }
}
