//! Prints the first delays of every built-in backoff preset, seeded, with
//! the cumulative time, as a table.
//!
//! Run: `cargo run --release -p steadfast --example presets`. Its tests
//! (`cargo test -p steadfast --example presets`) check that no two rows
//! repeat each other and that durations print in one unit each.
#![allow(clippy::print_stdout)]

use std::time::Duration;

use steadfast::backoff::{GrpcConnectionBackoff, Schedule};
use steadfast::{Backoff, ConfigError};

const SEED: u64 = 2015;
const SHOWN: usize = 8;

fn main() -> Result<(), ConfigError> {
    let presets = presets()?;
    assert!(same_grpc_curve()?, "one row stands for both gRPC curves");
    println!("First {SHOWN} delays of each built-in preset (seed {SEED}).");
    println!("Row `delay`: the wait before retry n; row `waited`: the time waited so far.\n");
    let mut header = format!("{:<34} {:<7}", "preset (name, cap)", "");
    for n in 1..=SHOWN {
        header.push_str(&format!(" {:>9}", format!("#{n}")));
    }
    println!("{header}");
    println!("{}", "-".repeat(header.len()));
    for (label, backoff) in presets {
        let backoff = backoff.with_seed(Some(SEED));
        debug_assert_eq!(Schedule::seed(&backoff), Some(SEED));
        let (mut delays, mut waited) = (
            format!("{label:<34} {:<7}", "delay"),
            format!("{:<34} {:<7}", describe(&backoff), "waited"),
        );
        let mut total = Duration::ZERO;
        for delay in backoff.delays().take(SHOWN) {
            total += delay;
            delays.push_str(&format!(" {:>9}", show(delay)));
            waited.push_str(&format!(" {:>9}", show(total)));
        }
        println!("{delays}\n{waited}\n");
    }
    println!("Caps hold after jitter except where marked `(+jitter)`: the gRPC specifications");
    println!("let the jitter exceed the maximum (A6: up to 1.2 x maxBackoff).");
    println!("`GrpcConnectionBackoff` gives the grpc-go row's delays, and a connect deadline for");
    println!("each attempt (at least 20 s).");
    Ok(())
}

/// Every built-in preset, labelled.
fn presets() -> Result<Vec<(&'static str, Backoff)>, ConfigError> {
    Ok(vec![
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
        // Its default (shift 1) is the "exponential, no jitter" row above,
        // in integer shifts; shift 2 shows its own curve, x4 a step.
        (
            "shift-exponential, shift 2 (x4)",
            Backoff::shift_exponential().shift(2).build()?,
        ),
        ("fibonacci", Backoff::fibonacci().build()?),
        ("decorrelated (AWS)", Backoff::decorrelated().build()?),
        (
            "decorrelated V2 (Polly)",
            Backoff::decorrelated_v2().build()?,
        ),
        // grpc-go's `backoff(retries)` is the gRPC connection backoff's
        // curve: one row for both (`same_grpc_curve` below checks it).
        ("grpc-go / gRPC connection", Backoff::grpc_go().build()?),
        ("gRFC A6", Backoff::grpc_a6().build()?),
        (
            "gRFC A6, legacy (full jitter)",
            Backoff::grpc_a6_legacy().build()?,
        ),
    ])
}

/// `  name, cap` (or `no cap`), marked when jitter may exceed the cap.
fn describe(b: &Backoff) -> String {
    let cap = if b.max_delay() == Duration::from_nanos(u64::MAX) {
        "no cap".to_owned()
    } else {
        format!("max {}", show(b.max_delay()))
    };
    let note = if b.caps_after_jitter() {
        ""
    } else {
        " (+jitter)"
    };
    format!("  {}, {cap}{note}", b.name())
}

/// Whether `GrpcConnectionBackoff`'s schedule gives grpc-go's delays.
fn same_grpc_curve() -> Result<bool, ConfigError> {
    let seeded = |b: Backoff| {
        b.with_seed(Some(SEED))
            .delays()
            .take(SHOWN)
            .collect::<Vec<_>>()
    };
    Ok(seeded(Backoff::grpc_go().build()?) == seeded(GrpcConnectionBackoff::default().schedule()))
}

/// A duration in the largest unit that keeps it readable, with no fractions
/// of minutes or hours: `250.0ms`, `1.600s`, `1m09s`, `2h05m`.
fn show(d: Duration) -> String {
    let s = d.as_secs_f64();
    let whole = d.as_secs();
    if whole >= 3600 {
        format!("{}h{:02}m", whole / 3600, whole % 3600 / 60)
    } else if whole >= 60 {
        format!("{}m{:02}s", whole / 60, whole % 60)
    } else if s >= 1.0 {
        format!("{s:.3}s")
    } else {
        format!("{:.1}ms", s * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_in_one_unit_each() {
        let ms = Duration::from_millis;
        assert_eq!(show(ms(250)), "250.0ms");
        assert_eq!(show(ms(1600)), "1.600s");
        assert_eq!(show(ms(59_999)), "59.999s");
        assert_eq!(show(Duration::from_secs(69)), "1m09s");
        assert_eq!(show(Duration::from_secs(7500)), "2h05m");
    }

    #[test]
    fn every_row_has_its_own_label_and_curve() -> Result<(), ConfigError> {
        let presets = presets()?;
        let labels: std::collections::HashSet<_> = presets.iter().map(|p| p.0).collect();
        assert_eq!(labels.len(), presets.len());
        let rows: Vec<Vec<Duration>> = presets
            .iter()
            .map(|(_, b)| b.with_seed(Some(SEED)).delays().take(SHOWN).collect())
            .collect();
        for (i, row) in rows.iter().enumerate() {
            assert!(
                !rows[..i].contains(row),
                "{} repeats an earlier row",
                presets[i].0
            );
        }
        assert!(same_grpc_curve()?);
        Ok(())
    }
}
