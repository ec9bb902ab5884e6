//! The `replicas` scenario's section of the report.

use super::Section;
use super::plot::{Chart, Line};
use super::table::Table;
use crate::engine::secs;
use crate::replicas::ReplicasResult;

/// The table, the chart and the text of the `replicas` scenario.
pub(super) fn section(r: &ReplicasResult) -> Section {
    let c = &r.config;
    let mut table = Table::grouped(&[
        ("", &["strategy", "calls", "attempts/call", "success"]),
        (
            "on the bad replica",
            &["attempts", "share", "calls met twice"],
        ),
        ("", &["retries capped"]),
    ]);
    for s in &r.strategies {
        table.row(vec![
            s.name.clone(),
            s.calls.to_string(),
            format!("{:.3}", s.attempts_per_call),
            format!("{:.2} %", s.success_rate * 100.0),
            s.bad_attempts.to_string(),
            format!("{:.1} %", s.bad_share * 100.0),
            s.met_bad_twice.to_string(),
            s.capped.to_string(),
        ]);
    }
    let lines = r
        .strategies
        .iter()
        .map(|s| {
            let width = secs(s.bad_per_bucket.bucket());
            Line {
                reference: false,
                name: s.name.clone(),
                points: s
                    .bad_per_bucket
                    .counts()
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| (i as f64 * width, n as f64 / width))
                    .collect(),
            }
        })
        .collect();
    Section {
        id: "replicas",
        title: "replicas: one bad replica among good ones",
        about: format!(
            "{} clients make {:.0} calls/s for {:.0} s (up to {} attempts each) against {} \
             replicas of about {:.0} requests/s each ({} slots, queue {}, service {}); {} of \
             them fail {:.0} % of what they serve. A random pick retries anywhere; an endpoint \
             set (one per client) picks by load and sends each retry to a replica the call has \
             not tried; with ejection, Envoy's outlier detection takes the bad replica out. \
             Seed {}.",
            c.clients,
            c.call_rate,
            c.duration.as_secs_f64(),
            c.strategies
                .iter()
                .map(|s| s.max_attempts)
                .max()
                .unwrap_or(1),
            c.replicas,
            c.server.capacity_per_sec(),
            c.server.concurrency,
            c.server.queue_limit,
            c.server.latency,
            c.bad,
            c.bad_failure * 100.0,
            c.seed
        ),
        table,
        agreement: r.agreement.clone(),
        notes: vec![
            "a failure raises its replica's load by a 5 s penalty, so the endpoint set's power \
             of two choices stops picking the bad replica after a failure or two, well before \
             outlier detection's five in a row: the two set strategies send it about the same \
             few attempts"
                .to_owned(),
        ],
        charts: vec![(
            "replicas_bad_load".to_owned(),
            Chart {
                title: "Attempts reaching the bad replica per second".to_owned(),
                caption: "Retrying anywhere sends the bad replica its share of first attempts \
                          and of retries; with an endpoint set, a failure's load penalty steers \
                          both first attempts and retries away from it, and it gets a probe \
                          now and then as the penalty decays."
                    .to_owned(),
                x_label: "time (s)".to_owned(),
                y_label: "attempts/s".to_owned(),
                lines,
                shade: None,
                log_y: false,
                integer_y: true,
                x_max: None,
                first_color: 0,
            },
        )],
    }
}
