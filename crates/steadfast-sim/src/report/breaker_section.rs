//! The `breaker` scenario's section of the report.

use super::plot::{Chart, Line, Shade};
use super::table::Table;
use super::{Section, fmt_opt_secs};
use crate::breaker::BreakerResult;
use crate::engine::secs;
use crate::metrics::Series;

/// The table, the charts and the text of the `breaker` scenario.
pub(super) fn section(r: &BreakerResult) -> Section {
    let c = &r.config;
    let mut table = Table::grouped(&[
        ("", &["strategy", "calls", "attempts"]),
        (
            "attempts on the down server",
            &["all", "per s, second half"],
        ),
        ("attempts when back", &["first second", "steady, per s"]),
        ("", &["recovery (s)"]),
        ("calls refused", &["all", "while up"]),
        ("", &["success"]),
    ]);
    for s in &r.strategies {
        table.row(vec![
            s.name.clone(),
            s.calls.to_string(),
            s.attempts.to_string(),
            s.down_attempts.to_string(),
            format!("{:.1}", s.late_outage_rate),
            s.first_second_load.to_string(),
            format!("{:.0}", s.steady_load),
            fmt_opt_secs(s.recovery_s),
            s.refused.to_string(),
            s.refused_while_up.to_string(),
            format!("{:.1} %", s.success_rate * 100.0),
        ]);
    }
    let shade = || {
        Some(Shade {
            from: c.outage_start.as_secs_f64(),
            to: c.outage_end().as_secs_f64(),
            label: "server down".to_owned(),
        })
    };
    let attempts = r
        .strategies
        .iter()
        .map(|s| Line {
            reference: false,
            name: s.name.clone(),
            points: per_second(&s.attempts_per_bucket),
        })
        .collect();
    let success = r
        .strategies
        .iter()
        .map(|s| {
            let width = secs(s.calls_per_bucket.bucket());
            Line {
                reference: false,
                name: s.name.clone(),
                points: s
                    .calls_per_bucket
                    .counts()
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        let ok = s.successes_per_bucket.count_at(i);
                        let rate = if n == 0 { 1.0 } else { ok as f64 / n as f64 };
                        (i as f64 * width, rate * 100.0)
                    })
                    .collect(),
            }
        })
        .collect();
    Section {
        id: "breaker",
        title: "breaker: a dependency down for a while, and back",
        about: format!(
            "{} clients make {:.0} calls/s for {:.0} s (3 attempts each) against a server of \
             about {:.0} requests/s ({} slots, queue {}, service {}); it is down from {:.0} s \
             to {:.0} s. Each client has its own circuit breaker. What the breaker buys: the \
             attempts that reach the down server and the load on the server's first second \
             back. What it costs: calls refused after the server is back, until each client's \
             next probe. Seed {}.",
            c.clients,
            c.call_rate,
            c.duration.as_secs_f64(),
            c.server.capacity_per_sec(),
            c.server.concurrency,
            c.server.queue_limit,
            c.server.latency,
            c.outage_start.as_secs_f64(),
            c.outage_end().as_secs_f64(),
            c.seed
        ),
        table,
        agreement: r.agreement.clone(),
        notes: Vec::new(),
        charts: vec![
            (
                "breaker_attempts".to_owned(),
                Chart {
                    title: "Attempts sent to the server per second".to_owned(),
                    caption: "Inside the shaded outage, the lines with a breaker fall to a \
                              trickle of probes while the one without keeps sending every \
                              retry; at the end of the shading, look at the first second back: \
                              the load the recovering server gets."
                        .to_owned(),
                    x_label: "time (s)".to_owned(),
                    y_label: "attempts/s".to_owned(),
                    lines: attempts,
                    shade: shade(),
                    log_y: false,
                    integer_y: true,
                    x_max: None,
                    first_color: 0,
                },
            ),
            (
                "breaker_success".to_owned(),
                Chart {
                    title: "Calls that succeeded, by start time".to_owned(),
                    caption: "After the shaded outage, the line without a breaker is back at \
                              once; the lines with one lag until each client's next probe \
                              closes its breaker: what the breaker costs."
                        .to_owned(),
                    x_label: "time (s)".to_owned(),
                    y_label: "success (%)".to_owned(),
                    lines: success,
                    shade: shade(),
                    log_y: false,
                    integer_y: false,
                    x_max: None,
                    first_color: 0,
                },
            ),
        ],
    }
}

/// A series of counts as (bucket start in seconds, events per second).
fn per_second(series: &Series) -> Vec<(f64, f64)> {
    let width = secs(series.bucket());
    series
        .counts()
        .iter()
        .enumerate()
        .map(|(i, &n)| (i as f64 * width, n as f64 / width))
        .collect()
}
