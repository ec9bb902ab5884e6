//! What `steadfast schedule` prints: the delays of one seeded run of a
//! schedule, or the p5/p50/p95 envelope over many seeds, as a table, JSON or
//! CSV.
//!
//! Percentiles use the nearest-rank method: the p-th percentile of `n`
//! sorted values is the one at rank `ceil(p / 100 * n)`.

use std::io::{self, Write};
use std::time::Duration;

use crate::cli::Format;
use crate::duration::format_duration;

/// One retry of one run: the delay before attempt `attempt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The attempt this delay comes before (2 for the first retry).
    pub attempt: u32,
    /// The delay.
    pub delay: Duration,
    /// The sum of the delays up to and including this one.
    pub cumulative: Duration,
}

/// The spread of the delay before one attempt over many seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeRow {
    /// The attempt the delay comes before (2 for the first retry).
    pub attempt: u32,
    /// How many of the runs got this far (a schedule may stop early).
    pub runs: usize,
    /// 5th percentile of the delay.
    pub p5: Duration,
    /// Median delay.
    pub p50: Duration,
    /// 95th percentile of the delay.
    pub p95: Duration,
    /// Median of the cumulative delay.
    pub cumulative_p50: Duration,
}

/// The rows of one run, from its delays in order.
#[must_use]
pub fn rows(delays: &[Duration]) -> Vec<Row> {
    let mut cumulative = Duration::ZERO;
    (2u32..)
        .zip(delays)
        .map(|(attempt, &delay)| {
            cumulative = cumulative.saturating_add(delay);
            Row {
                attempt,
                delay,
                cumulative,
            }
        })
        .collect()
}

/// The nearest-rank `p`-th percentile of `sorted` (ascending, not empty).
fn percentile(sorted: &[Duration], p: u32) -> Duration {
    let n = sorted.len();
    let rank = (u64::from(p) * n as u64).div_ceil(100).max(1);
    let index = usize::try_from(rank - 1).unwrap_or(usize::MAX).min(n - 1);
    sorted[index]
}

/// The envelope over several runs (each the delays of one seed).
#[must_use]
pub fn envelope(runs: &[Vec<Duration>]) -> Vec<EnvelopeRow> {
    let longest = runs.iter().map(Vec::len).max().unwrap_or(0);
    let mut cumulative: Vec<Duration> = vec![Duration::ZERO; runs.len()];
    let mut out = Vec::with_capacity(longest);
    for (i, attempt) in (0..longest).zip(2u32..) {
        let mut delays = Vec::with_capacity(runs.len());
        let mut totals = Vec::with_capacity(runs.len());
        for (run, total) in runs.iter().zip(&mut cumulative) {
            if let Some(&d) = run.get(i) {
                *total = total.saturating_add(d);
                delays.push(d);
                totals.push(*total);
            }
        }
        delays.sort_unstable();
        totals.sort_unstable();
        out.push(EnvelopeRow {
            attempt,
            runs: delays.len(),
            p5: percentile(&delays, 5),
            p50: percentile(&delays, 50),
            p95: percentile(&delays, 95),
            cumulative_p50: percentile(&totals, 50),
        });
    }
    out
}

/// A JSON string literal for `s`.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Writes the rows of one seeded run in `format`.
///
/// # Errors
/// Errors of `out`.
pub fn write_rows(
    out: &mut impl Write,
    format: Format,
    spec: &str,
    seed: u64,
    rows: &[Row],
) -> io::Result<()> {
    match format {
        Format::Table => {
            writeln!(out, "# backoff {spec}, seed {seed}")?;
            writeln!(
                out,
                "{:>7}  {:>10}  {:>10}",
                "attempt", "delay", "cumulative"
            )?;
            for r in rows {
                writeln!(
                    out,
                    "{:>7}  {:>10}  {:>10}",
                    r.attempt,
                    format_duration(r.delay),
                    format_duration(r.cumulative)
                )?;
            }
        }
        Format::Csv => {
            writeln!(out, "attempt,delay_s,cumulative_s")?;
            for r in rows {
                writeln!(
                    out,
                    "{},{},{}",
                    r.attempt,
                    secs(r.delay),
                    secs(r.cumulative)
                )?;
            }
        }
        Format::Json => {
            write!(
                out,
                "{{\"backoff\":{},\"seed\":{seed},\"delays\":[",
                json_string(spec)
            )?;
            for (i, r) in rows.iter().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                write!(
                    out,
                    "{comma}{{\"attempt\":{},\"delay_s\":{},\"cumulative_s\":{}}}",
                    r.attempt,
                    secs(r.delay),
                    secs(r.cumulative)
                )?;
            }
            writeln!(out, "]}}")?;
        }
    }
    Ok(())
}

/// Writes an envelope over `samples` seeds starting at `seed` in `format`.
///
/// # Errors
/// Errors of `out`.
pub fn write_envelope(
    out: &mut impl Write,
    format: Format,
    spec: &str,
    seed: u64,
    samples: u32,
    rows: &[EnvelopeRow],
) -> io::Result<()> {
    match format {
        Format::Table => {
            writeln!(
                out,
                "# backoff {spec}, {samples} seeds from {seed}, nearest-rank percentiles"
            )?;
            writeln!(
                out,
                "{:>7}  {:>10}  {:>10}  {:>10}  {:>14}",
                "attempt", "p5", "p50", "p95", "cumulative p50"
            )?;
            for r in rows {
                writeln!(
                    out,
                    "{:>7}  {:>10}  {:>10}  {:>10}  {:>14}",
                    r.attempt,
                    format_duration(r.p5),
                    format_duration(r.p50),
                    format_duration(r.p95),
                    format_duration(r.cumulative_p50)
                )?;
            }
        }
        Format::Csv => {
            writeln!(out, "attempt,runs,p5_s,p50_s,p95_s,cumulative_p50_s")?;
            for r in rows {
                writeln!(
                    out,
                    "{},{},{},{},{},{}",
                    r.attempt,
                    r.runs,
                    secs(r.p5),
                    secs(r.p50),
                    secs(r.p95),
                    secs(r.cumulative_p50)
                )?;
            }
        }
        Format::Json => {
            write!(
                out,
                "{{\"backoff\":{},\"seed\":{seed},\"samples\":{samples},\"delays\":[",
                json_string(spec)
            )?;
            for (i, r) in rows.iter().enumerate() {
                let comma = if i == 0 { "" } else { "," };
                write!(
                    out,
                    "{comma}{{\"attempt\":{},\"runs\":{},\"p5_s\":{},\"p50_s\":{},\"p95_s\":{},\"cumulative_p50_s\":{}}}",
                    r.attempt,
                    r.runs,
                    secs(r.p5),
                    secs(r.p50),
                    secs(r.p95),
                    secs(r.cumulative_p50)
                )?;
            }
            writeln!(out, "]}}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn rows_accumulate() {
        let r = rows(&[ms(100), ms(200), ms(400)]);
        assert_eq!(
            r[0],
            Row {
                attempt: 2,
                delay: ms(100),
                cumulative: ms(100)
            }
        );
        assert_eq!(
            r[2],
            Row {
                attempt: 4,
                delay: ms(400),
                cumulative: ms(700)
            }
        );
    }

    #[test]
    fn nearest_rank_percentiles() {
        let runs: Vec<Vec<Duration>> = (1..=100).map(|i| vec![ms(i)]).collect();
        let e = envelope(&runs);
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].p5, e[0].p50, e[0].p95), (ms(5), ms(50), ms(95)));
        let one = envelope(&[vec![ms(7), ms(9)]]);
        assert_eq!((one[1].p5, one[1].p50, one[1].p95), (ms(9), ms(9), ms(9)));
        assert_eq!(one[1].cumulative_p50, ms(16));
    }

    #[test]
    fn runs_of_different_lengths() {
        let e = envelope(&[vec![ms(1)], vec![ms(3), ms(5)]]);
        assert_eq!(e[0].runs, 2);
        assert_eq!(e[1].runs, 1);
        assert_eq!(e[1].p50, ms(5));
        assert_eq!(e[1].cumulative_p50, ms(8));
    }

    #[test]
    fn json_escapes() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }

    #[test]
    fn formats_parse() {
        let r = rows(&[ms(100), ms(250)]);
        let mut json = Vec::new();
        write_rows(&mut json, Format::Json, "constant:delay=1s", 3, &r).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["delays"][1]["cumulative_s"], 0.35);
        let mut csv = Vec::new();
        write_rows(&mut csv, Format::Csv, "x", 3, &r).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "attempt,delay_s,cumulative_s\n2,0.1,0.1\n3,0.25,0.35\n"
        );
        let e = envelope(&[vec![ms(1)], vec![ms(3)]]);
        let mut json = Vec::new();
        write_envelope(&mut json, Format::Json, "x", 0, 2, &e).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["samples"], 2);
        assert_eq!(v["delays"][0]["p95_s"], 0.003);
    }
}
