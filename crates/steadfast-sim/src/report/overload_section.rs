//! The `overload` scenario's section of the report.

use super::plot::{Chart, Line, Shade};
use super::table::Table;
use super::{Section, series_line};
use crate::engine::secs;
use crate::overload::{
    AIMD, Bounds, NO_LIMIT, OverloadConfig, OverloadLimit, OverloadResult, OverloadStrategyResult,
    VEGAS, WITH_RETRIES,
};

/// The table, the charts and the text of the `overload` scenario.
pub(super) fn section(r: &OverloadResult) -> Section {
    let c = &r.config;
    let mut table = Table::new(&[
        "strategy",
        "goodput (calls/s)",
        "p50 (ms)",
        "p99 (ms)",
        "shed by limit",
        "503s",
        "timeouts",
        "limit",
        "limit moved (s after drop / recovery)",
    ]);
    for s in &r.strategies {
        let (levels, moved) = match &s.limit {
            Some(t) if s.adaptive => (
                format!("{:.0} / {:.0} / {:.0}", t.before, t.during, t.after),
                format!(
                    "{} / {}",
                    fmt_follow(t.drop_follow_s),
                    fmt_follow(t.recovery_follow_s)
                ),
            ),
            Some(t) => (format!("{:.0} (fixed)", t.before), "-".to_owned()),
            None => ("none".to_owned(), "-".to_owned()),
        };
        table.row(vec![
            s.name.clone(),
            format!(
                "{:.0} / {:.0} / {:.0}",
                s.goodput_before, s.goodput_during, s.goodput_after
            ),
            three(s.p50_before_ms, s.p50_during_ms, s.p50_after_ms),
            three(s.p99_before_ms, s.p99_during_ms, s.p99_after_ms),
            format!("{} ({:.0} %)", s.shed, share(s.shed, s.calls) * 100.0),
            s.rejected.to_string(),
            s.timed_out.to_string(),
            levels,
            moved,
        ]);
    }
    let (from, to) = (c.drop.start.as_secs_f64(), c.recovery().as_secs_f64());
    let end = c.duration.as_secs_f64();
    let what = format!(
        "capacity down to {:.0} % ({} of {} workers)",
        c.drop_capacity() * 100.0,
        c.workers_in_drop(),
        c.server.concurrency
    );
    let shade = || {
        Some(Shade {
            from,
            to,
            label: format!("drop: {what}"),
        })
    };
    // The charts show the strategies without retries (with a limit their
    // retries change little: see the note); each keeps its colour.
    let once: Vec<&OverloadStrategyResult> = r
        .strategies
        .iter()
        .filter(|s| s.max_attempts == 1)
        .collect();
    let bucket = r
        .strategies
        .first()
        .map_or(1, |s| s.successes_per_bucket.bucket());
    let width = secs(bucket);
    // The last whole bucket before the run ends (calls still finishing
    // after it would make a misleading tail).
    let last_bucket = end - width;
    let capacity = c.server.capacity_per_sec();
    let in_drop = c.capacity_in_drop();
    let step_line = |name: &str, full: f64, low: f64| Line {
        reference: true,
        name: name.to_owned(),
        points: vec![
            (0.0, full),
            (from, full),
            (from, low),
            (to, low),
            (to, full),
            (end, full),
        ],
    };
    let mut goodput: Vec<Line> = once
        .iter()
        .map(|s| series_line(&s.name, &s.successes_per_bucket, 1.0 / width))
        .collect();
    goodput.push(step_line("server capacity", capacity, in_drop));
    let p99: Vec<Line> = once
        .iter()
        .map(|s| Line {
            reference: false,
            name: s.name.clone(),
            points: s
                .p99_per_bucket_ms
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| (i as f64 * width, v)))
                .collect(),
        })
        .collect();
    let unloaded = r
        .strategy(NO_LIMIT)
        .and_then(|s| s.p99_before_ms)
        .map_or_else(String::new, |p| {
            format!(" Without a limit, the p99 before the drop (unloaded) was {p:.0} ms.")
        });
    // The limit chart starts at the first strategy with a limit, so the
    // colours stay those of the other charts.
    let first_limited = once.iter().position(|s| s.limit.is_some()).unwrap_or(0);
    let mut limits: Vec<Line> = once[first_limited..]
        .iter()
        .filter_map(|s| {
            let t = s.limit.as_ref()?;
            Some(Line {
                reference: false,
                name: s.name.clone(),
                points: t
                    .samples
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (i as f64 * t.step_s, f64::from(v)))
                    .collect(),
            })
        })
        .collect();
    limits.push(step_line(
        "server workers",
        f64::from(c.server.concurrency),
        f64::from(c.workers_in_drop()),
    ));
    let same_with_retries = retries_change_nothing_behind_a_limit(r);
    let bounds = first_bounds(c);
    Section {
        id: "overload",
        title: "overload: a capacity drop, with and without concurrency limits",
        about: format!(
            "{} client{} make{} {:.0} calls/s (open loop: {:.0} % of the server's {:.0} requests/s, \
             {:.0} % of what it has left in the drop) for {end:.0} s against a server of {} workers \
             (service {}, a FIFO queue of {} that serves every request, waited for or not, and \
             answers 503 when full); each attempt times out after {:?}. The drop: {what} from \
             {from:.0} s to {to:.0} s. Each client has its own concurrency limit on its retry \
             policy; every attempt takes a slot first, and a refused slot fails the call at once \
             (shed). The adaptive limits keep Netflix's published settings but their bounds \
             (min_limit {}, max_limit {}; AIMD and Gradient2 publish a min_limit of 20, which {} \
             the {} requests the server serves at once in the drop), start at {}, and move once \
             per window of {:?} and {} attempts. Goodput and latency are of the calls that succeeded, by the time \
             they did, and a cell of three numbers reads before / in the drop / after it \
             (\"before\": the second half of the time before the drop); latency runs from a \
             call's start to its success. \"Limit moved\": seconds until the limit made \
             half its move to its level in the drop, then back. Seed {}.",
            c.clients,
            if c.clients == 1 { "" } else { "s" },
            if c.clients == 1 { "s" } else { "" },
            c.call_rate,
            c.load() * 100.0,
            capacity,
            c.load_in_drop() * 100.0,
            c.server.concurrency,
            c.server.latency,
            c.server.queue_limit,
            c.attempt_timeout,
            bounds.min,
            bounds.max,
            match 20.cmp(&c.workers_in_drop()) {
                std::cmp::Ordering::Greater => "is above",
                std::cmp::Ordering::Equal => "equals",
                std::cmp::Ordering::Less => "is below",
            },
            c.workers_in_drop(),
            bounds.initial,
            c.window,
            c.window_samples,
            c.seed
        ),
        table,
        agreement: r.agreement.clone(),
        notes: notes(r, same_with_retries),
        charts: vec![
            (
                "overload_limit".to_owned(),
                Chart {
                    title: "Concurrency limit over time".to_owned(),
                    caption: format!(
                        "The limit each strategy allowed (summed over the clients, sampled every \
                         {:?}), and the server's workers: the requests it serves at once. Shaded: the drop. A limit above the workers lets a queue form at \
                         the server; look at how far each adaptive line comes down in the drop, \
                         how fast, and whether it goes back up after it.",
                        c.limit_sample
                    ),
                    x_label: "time (s)".to_owned(),
                    y_label: "attempts in flight allowed".to_owned(),
                    lines: limits,
                    shade: shade(),
                    log_y: false,
                    integer_y: true,
                    x_max: None,
                    first_color: first_limited,
                },
            ),
            (
                "overload_goodput".to_owned(),
                Chart {
                    title: "Goodput: calls that succeeded per second".to_owned(),
                    caption: format!(
                        "Calls that succeeded per second, one line per strategy (without \
                         retries), against the server's capacity. Shaded: the drop. \
                         Inside it, a line at the capacity kept the server busy with work its \
                         callers still wanted; a line near zero is a server busy with requests \
                         whose callers had timed out. Outside it, a line below {:.0}/s (the \
                         call rate) is a limit shedding calls the server could have served.",
                        c.call_rate
                    ),
                    x_label: "time (s)".to_owned(),
                    y_label: "successful calls per second".to_owned(),
                    lines: goodput,
                    shade: shade(),
                    log_y: false,
                    integer_y: true,
                    x_max: Some(last_bucket),
                    first_color: 0,
                },
            ),
            (
                "overload_latency".to_owned(),
                Chart {
                    title: "p99 latency of the calls that succeeded".to_owned(),
                    caption: format!(
                        "The 99th percentile of the latency of the calls that succeeded in each \
                         {width:.1} s, one line per strategy (without retries). Shaded: the \
                         drop. The lower a line stays in the drop, the less queueing its limit \
                         let through; a line flat at the attempt timeout ({:?}) is a queue so \
                         long that only the calls served just in time succeed; a bucket with \
                         no success has no point.{unloaded}",
                        c.attempt_timeout
                    ),
                    x_label: "time (s)".to_owned(),
                    y_label: "p99 latency (ms)".to_owned(),
                    lines: p99,
                    shade: shade(),
                    log_y: false,
                    integer_y: true,
                    x_max: Some(last_bucket),
                    first_color: 0,
                },
            ),
        ],
    }
}

/// The bounds of the first adaptive strategy (the standard strategies
/// share theirs), for the text.
fn first_bounds(c: &OverloadConfig) -> Bounds {
    c.strategies
        .iter()
        .find_map(|s| match s.limit {
            OverloadLimit::Aimd(b) | OverloadLimit::Vegas(b) | OverloadLimit::Gradient2(b) => {
                Some(b)
            }
            OverloadLimit::None | OverloadLimit::Fixed { .. } => None,
        })
        .unwrap_or_else(|| Bounds::new(1, 200))
}

fn fmt_follow(s: Option<f64>) -> String {
    s.map_or_else(|| "no".to_owned(), |s| format!("{s:.1}"))
}

/// Three latencies (before / in the drop / after), in whole ms.
fn three(a: Option<f64>, b: Option<f64>, c: Option<f64>) -> String {
    let f = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"));
    format!("{} / {} / {}", f(a), f(b), f(c))
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"))
}

fn share(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Whether, for every limited strategy, the one with retries ended with the
/// same successes as the one without (so the charts need not show both).
fn retries_change_nothing_behind_a_limit(r: &OverloadResult) -> bool {
    r.strategies
        .iter()
        .filter(|s| s.max_attempts == 1 && s.limit.is_some())
        .all(|s| {
            r.strategy(&format!("{}{WITH_RETRIES}", s.name))
                .is_none_or(|t| t.succeeded == s.succeeded)
        })
}

/// What the numbers say beyond the table, each sentence computed from them.
fn notes(r: &OverloadResult, same_with_retries: bool) -> Vec<String> {
    let c = &r.config;
    let mut notes = Vec::new();
    let windows = |s: f64| (s / c.window.as_secs_f64()).round();
    // How each adaptive limit followed the drop and the recovery.
    let mut moves = Vec::new();
    for s in r
        .strategies
        .iter()
        .filter(|s| s.adaptive && s.max_attempts == 1)
    {
        let Some(t) = &s.limit else { continue };
        let down = match t.drop_follow_s {
            Some(d) => format!(
                "came down from {:.0} to {:.0} (lowest {}), half-way {d:.1} s after the drop \
                 (about {:.0} windows)",
                t.before,
                t.during,
                t.lowest_during,
                windows(d)
            ),
            None => format!(
                "did not come down in the drop ({:.0} before it, {:.0} in its second half)",
                t.before, t.during
            ),
        };
        let up = match (t.drop_follow_s, t.recovery_follow_s) {
            (_, Some(d)) => format!(
                "went back up to {:.0}, half-way {d:.1} s after the recovery (about {:.0} windows)",
                t.after,
                windows(d)
            ),
            (None, None) => format!("was {:.0} after it", t.after),
            (Some(_), None) => format!("did not go back up ({:.0} after it)", t.after),
        };
        moves.push(format!("{} {down} and {up}", s.name));
    }
    if !moves.is_empty() {
        notes.push(format!(
            "The adaptive limits (window {:?}): {}.",
            c.window,
            moves.join("; ")
        ));
    }
    let none = r.strategy(NO_LIMIT);
    let reference = none.map_or(c.call_rate, |n| n.goodput_before.max(1.0));
    // A loss-based limit that saw (almost) no loss.
    if let Some(aimd) = r.strategy(AIMD)
        && let Some(t) = &aimd.limit
        && t.during > t.before
    {
        notes.push(format!(
            "AIMD's limit rose in the drop ({:.0} to {:.0}): it shrinks only on a drop signal \
             (a timeout or a 503: {} attempts in the whole run) or a window whose average \
             latency passes its timeout (published: 5 s), and grows while half its slots are in \
             use. This server queues {} requests before it answers 503, so in the drop AIMD saw \
             slower successes{} (p99 {} ms in the drop).",
            t.before,
            t.during,
            aimd.timed_out + aimd.rejected,
            c.server.queue_limit,
            if aimd.timed_out + aimd.rejected == 0 {
                " and no drop at all, and let the queue grow"
            } else {
                ", and drops only once the queue it let grow came near the attempt timeout"
            },
            ms(aimd.p99_during_ms)
        ));
    }
    // Limits that shed calls the server had room for.
    let sheds = |s: &OverloadStrategyResult| {
        s.goodput_before < 0.95 * reference || s.goodput_after < 0.95 * reference
    };
    let shedding: Vec<String> = r
        .strategies
        .iter()
        .filter(|s| s.max_attempts == 1 && s.limit.is_some())
        .filter(|s| sheds(s))
        .map(|s| {
            format!(
                "{} ({:.0} % before the drop, {:.0} % after)",
                s.name,
                (1.0 - s.goodput_before / reference).max(0.0) * 100.0,
                (1.0 - s.goodput_after / reference).max(0.0) * 100.0
            )
        })
        .collect();
    if !shedding.is_empty() {
        let mut text = format!(
            "Shedding while the server had room (goodput below the {reference:.0} calls/s \
             without a limit): {}.",
            shedding.join(", ")
        );
        if r.strategy(VEGAS).is_some_and(sheds) {
            text.push_str(
                " Vegas takes the lowest window average it has seen for the latency without \
                 load, so ordinary variation between windows reads to it as queueing; a longer \
                 window evens that out and makes it slower to follow.",
            );
        }
        notes.push(text);
    }
    // What retries did.
    if let (Some(n), Some(nr)) = (none, r.strategy(&format!("{}{WITH_RETRIES}", NO_LIMIT))) {
        let limited_failures: u64 = r
            .strategies
            .iter()
            .filter(|s| s.limit.is_some())
            .map(|s| s.rejected + s.timed_out)
            .sum();
        notes.push(format!(
            "Retries (3 attempts): without a limit, {} calls sent {} attempts ({:.2} per call: \
             {} answered 503, {} timed out), and the p99 after the recovery was {} ms where \
             one attempt per call left it at {} ms. Behind a limit, {limited_failures} attempts \
             failed over every limited strategy, and a call refused a slot fails at once (shed, \
             never retried), so {}.",
            nr.calls,
            nr.attempts,
            share(nr.attempts, nr.calls),
            nr.rejected,
            nr.timed_out,
            ms(nr.p99_after_ms),
            ms(n.p99_after_ms),
            if same_with_retries {
                "each limited strategy succeeded as often with retries as without; the charts \
                 show the strategies without retries"
            } else {
                "the limited strategies with retries differ from those without as the table \
                 shows; the charts show the strategies without retries"
            }
        ));
    }
    notes
}
