//! The `quota` scenario's section of the report.

use steadfast::backoff::Backoff;

use super::plot::{Chart, Line};
use super::table::Table;
use super::{Section, series_line};
use crate::engine::secs;
use crate::quota::{
    HONOURING, IGNORING, QuotaConfig, QuotaLimit, QuotaResult, QuotaStrategyResult, RetryAfter,
    SHARED,
};

/// The table, the charts and the text of the `quota` scenario.
pub(super) fn section(r: &QuotaResult) -> Section {
    let c = &r.config;
    let provider = format!("provider (quota {}/s)", c.quota);
    let mut table = Table::grouped(&[
        ("", &["strategy"]),
        (&provider, &["received per s", "429s per s"]),
        (
            "calls",
            &[
                "goodput per s",
                "gave up",
                "refused locally",
                "attempts per call",
            ],
        ),
        ("latency (ms)", &["succeeded: p50 / p99", "failed: p50"]),
    ]);
    for s in &r.strategies {
        table.row(vec![
            s.name.clone(),
            format!("{:.1}", s.received_per_s),
            format!("{:.1}", s.rejected_per_s),
            format!("{:.1}", s.goodput_per_s),
            counted(s.gave_up(), s.calls),
            counted(s.refused_locally, s.calls),
            format!("{:.2}", s.attempts_per_call()),
            format!("{} / {}", ms(s.p50_ms), ms(s.p99_ms)),
            ms(s.failed_p50_ms),
        ]);
    }
    let bucket = r
        .strategies
        .first()
        .map_or(1, |s| s.received_per_bucket.bucket());
    let width = secs(bucket);
    let end = c.duration.as_secs_f64();
    // The last whole bucket before the run ends (the calls still finishing
    // after it would make a misleading tail).
    let last_bucket = (end - width).max(width);
    let quota = f64::from(c.quota);
    let quota_line = || Line {
        reference: true,
        name: format!("the quota ({}/s)", c.quota),
        points: vec![(0.0, quota), (end, quota)],
    };
    let mut received: Vec<Line> = r
        .strategies
        .iter()
        .map(|s| series_line(&s.name, &s.received_per_bucket, 1.0 / width))
        .collect();
    received.push(quota_line());
    let mut goodput: Vec<Line> = r
        .strategies
        .iter()
        .map(|s| series_line(&s.name, &s.successes_per_bucket, 1.0 / width))
        .collect();
    goodput.push(quota_line());
    let p99: Vec<Line> = r
        .strategies
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
    let limited: Vec<&QuotaStrategyResult> =
        of_kind(r, |l| !matches!(l, QuotaLimit::None)).collect();
    let limited_text = if limited.is_empty() {
        String::new()
    } else if limited.iter().all(|s| s.rejected == 0) {
        "with a limit of the quota, the lines stay at or below it and the provider refuses \
         nothing."
            .to_owned()
    } else {
        "with a limit of the quota, the lines stay near it.".to_owned()
    };
    let share = c.client_quota().ok();
    let share_text = share.map_or_else(String::new, |q| {
        let per_s = 1e9 / q.interval().as_nanos().max(1) as f64;
        let per_s = if (per_s - per_s.round()).abs() < 1e-9 {
            format!("{per_s:.0}")
        } else {
            format!("{per_s:.3}")
        };
        format!("{per_s}/s each (a burst of {})", q.burst())
    });
    let max_wait = c
        .strategies
        .iter()
        .map(|s| s.limit.max_wait())
        .find(|w| !w.is_zero());
    let waiting = max_wait.map_or_else(
        || "every limit refuses at once".to_owned(),
        |w| {
            format!(
                "\"waiting\" limits book a turn up to {w:?} ahead (never past the deadline), \
                 the others refuse at once"
            )
        },
    );
    let backoff = if c.backoff == Backoff::default() {
        "the core's default backoff (100 ms doubling, full jitter)"
    } else {
        "the configured backoff schedule"
    };
    Section {
        id: "quota",
        title: "quota: many clients sharing one provider's quota",
        about: format!(
            "{} clients share a provider's quota of {} requests/s (GCRA, a burst of {}), with \
             {:.0} calls/s in all ({:.1} times the quota), {}, for {end:.0} s. The provider \
             answers a request over its quota at once with a 429 whose Retry-After is its \
             limit's exact wait in {} rounded up, and serves one it admits in {} ({:?} round \
             trip). Each call makes up to {} attempts within a deadline of {:?}; a 429 is \
             retried after {backoff}, or after its Retry-After where the strategy honours it \
             (every limited one does). Per-client limits give each client its share, \
             {share_text}; the shared limit is one limit of the provider's quota for every \
             client, as a fleet sharing it on Redis would have (no round trip to the store is \
             simulated); {waiting}. A refused call fails at once (refused locally). Rates are \
             per second over the run; latency runs from a call's start to its success or \
             failure, every wait included. Seed {}.",
            c.clients,
            c.quota,
            c.burst(),
            c.call_rate,
            c.load(),
            demand(c),
            c.retry_after.unit(),
            c.latency,
            c.network_rtt,
            c.max_attempts,
            c.deadline,
            c.seed
        ),
        table,
        agreement: r.agreement.clone(),
        notes: notes(r),
        charts: vec![
            (
                "quota_received".to_owned(),
                Chart {
                    title: "Requests the provider received per second".to_owned(),
                    caption: format!(
                        "Requests reaching the provider per second, one line per strategy, \
                         against its quota (grey). Whatever a line carries above the quota is \
                         answered 429: without a limit the retries multiply the load; {} The \
                         first second holds the quota's burst ({}) on top of its rate.",
                        limited_text,
                        c.burst()
                    ),
                    x_label: "time (s)".to_owned(),
                    y_label: "requests per second".to_owned(),
                    lines: received,
                    shade: None,
                    log_y: false,
                    integer_y: true,
                    x_max: Some(last_bucket),
                    first_color: 0,
                },
            ),
            (
                "quota_goodput".to_owned(),
                Chart {
                    title: "Goodput: calls that succeeded per second".to_owned(),
                    caption: format!(
                        "Calls that succeeded per second, one line per strategy, against the \
                         quota (grey). Demand is {:.0} calls/s, so no strategy can do better \
                         than the quota: a line at it used the whole quota, a line below it \
                         left part of the quota unused while calls were refused.",
                        c.call_rate
                    ),
                    x_label: "time (s)".to_owned(),
                    y_label: "successful calls per second".to_owned(),
                    lines: goodput,
                    shade: None,
                    log_y: false,
                    integer_y: true,
                    x_max: Some(last_bucket),
                    first_color: 0,
                },
            ),
            (
                "quota_latency".to_owned(),
                Chart {
                    title: "p99 latency of the calls that succeeded".to_owned(),
                    caption: format!(
                        "The 99th percentile of the latency of the calls that succeeded in each \
                         {width:.1} s, one line per strategy, from the call's start, retries, \
                         Retry-After waits and limiter turns included. A line near the \
                         provider's own latency is a call served at its first attempt; a line \
                         near a second or above is a call that waited for a turn or a \
                         Retry-After (the deadline is {:?}).",
                        c.deadline
                    ),
                    x_label: "time (s)".to_owned(),
                    y_label: "p99 latency (ms)".to_owned(),
                    lines: p99,
                    shade: None,
                    log_y: false,
                    integer_y: true,
                    x_max: Some(last_bucket),
                    first_color: 0,
                },
            ),
        ],
    }
}

/// How the calls are spread over the clients, in words.
fn demand(c: &QuotaConfig) -> String {
    let rates = c.client_rates();
    let (Some(busiest), Some(quietest)) = (rates.first(), rates.last()) else {
        return String::new();
    };
    if c.skew == 0.0 || rates.len() == 1 {
        format!("{busiest:.1} calls/s from each client")
    } else {
        format!(
            "spread unevenly (client i makes a share of the calls proportional to 1/i^{}: the \
             busiest {busiest:.1} calls/s, the quietest {quietest:.1})",
            c.skew
        )
    }
}

/// A count and its share of `of`.
fn counted(n: u64, of: u64) -> String {
    if of == 0 {
        return n.to_string();
    }
    format!("{n} ({:.0} %)", n as f64 / of as f64 * 100.0)
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"))
}

/// The strategies of each kind, in the configured order.
fn of_kind<'a>(
    r: &'a QuotaResult,
    kind: impl Fn(&QuotaLimit) -> bool + 'a,
) -> impl Iterator<Item = &'a QuotaStrategyResult> + 'a {
    r.strategies.iter().filter(move |s| kind(&s.limit))
}

/// What the numbers say beyond the table, each sentence computed from them.
fn notes(r: &QuotaResult) -> Vec<String> {
    let c = &r.config;
    let mut notes = Vec::new();
    let quota = f64::from(c.quota);
    // What honouring Retry-After did.
    if let (Some(i), Some(h)) = (r.strategy(IGNORING), r.strategy(HONOURING)) {
        let mut text = format!(
            "Without a limit, retries that honour Retry-After sent the provider {:.0} requests/s \
             ({:.0} answered 429) and {:.2} attempts per call; ignoring it, {:.0}/s ({:.0} \
             answered 429) and {:.2}. Goodput was {:.1}/s and {:.1}/s: no retry strategy \
             makes the quota bigger.",
            h.received_per_s,
            h.rejected_per_s,
            h.attempts_per_call(),
            i.received_per_s,
            i.rejected_per_s,
            i.attempts_per_call(),
            h.goodput_per_s,
            i.goodput_per_s,
        );
        let interval_ms = c
            .provider_quota()
            .map_or(0.0, |q| q.interval().as_secs_f64() * 1e3);
        if i.rejected == 0 && h.rejected == 0 {
            text.push_str(" The provider refused nothing: the demand fit its quota.");
        } else if h.attempts_per_call() < 0.95 * i.attempts_per_call() {
            if c.retry_after == RetryAfter::Seconds && h.past_deadline > 0 {
                text.push_str(&format!(
                    " The provider's exact wait is at most {interval_ms:.0} ms while it is \
                     saturated, but whole seconds make it 1 s: a call told to wait 1 s with \
                     less than that left of its {:?} deadline stops at once ({} calls did), \
                     as the policy never waits past a deadline. So honouring the hint spends \
                     fewer attempts on the calls the quota has no room for, and {} ({} ms at \
                     the median, against {} ms ignoring it).",
                    c.deadline,
                    h.past_deadline,
                    if h.failed_p50_ms > i.failed_p50_ms {
                        "fails them later"
                    } else {
                        "fails them no later"
                    },
                    ms(h.failed_p50_ms),
                    ms(i.failed_p50_ms)
                ));
            }
        } else if c.retry_after == RetryAfter::Millis {
            text.push_str(&format!(
                " Honouring the hint did not lower the load: in milliseconds the hint is the \
                 provider's exact wait (at most {interval_ms:.0} ms while it is saturated), \
                 and every request refused in the same interval is told the same instant, so \
                 the retries arrive together, one of them gets the free turn and the others \
                 are refused again, until their attempts are spent (after {} ms at the \
                 median, where ignoring the hint took {} ms).",
                ms(h.failed_p50_ms),
                ms(i.failed_p50_ms)
            ));
        } else {
            text.push_str(" Honouring the hint did not lower the load here.");
        }
        notes.push(text);
    }
    // What a limit of the quota did at the provider.
    let limited: Vec<&QuotaStrategyResult> =
        of_kind(r, |l| !matches!(l, QuotaLimit::None)).collect();
    if !limited.is_empty() {
        let rejected: u64 = limited.iter().map(|s| s.rejected).sum();
        let most = limited.iter().map(|s| s.peak_burst).fold(0.0, f64::max);
        let unlimited = of_kind(r, |l| matches!(l, QuotaLimit::None))
            .map(|s| s.peak_burst)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            .map_or_else(String::new, |v| {
                format!(
                    ", where without a limit it was {v:.0} (an excess that lasts adds up over \
                     the stretch)"
                )
            });
        let fails = r
            .strategy(IGNORING)
            .and_then(|i| i.failed_p50_ms)
            .map_or_else(String::new, |p| {
                format!(
                    ", where without a limit a call that failed did so after {p:.0} ms of \
                     retries at the median"
                )
            });
        let answered = if rejected == 0 {
            "no 429 at all".to_owned()
        } else {
            format!("{rejected} 429s in all")
        };
        notes.push(format!(
            "With a limit of the quota, the provider answered {answered} (over every limited \
             strategy), and the most requests it received in any stretch of time beyond what its \
             rate earns in that stretch was {most:.0} (its burst: {}: a GCRA quota admits at \
             most the burst on top of the rate){unlimited}. The demand beyond the quota was \
             refused at the client, at once{fails}.",
            c.burst()
        ));
    }
    // Per-client limits against the shared one.
    let per_client = of_kind(r, |l| matches!(l, QuotaLimit::PerClient { .. })).next();
    let shared = r
        .strategy(SHARED)
        .or_else(|| of_kind(r, |l| matches!(l, QuotaLimit::Shared { .. })).next());
    if let (Some(p), Some(s)) = (per_client, shared) {
        if p.goodput_per_s < 0.95 * s.goodput_per_s {
            notes.push(format!(
                "\"{}\" got {:.1} calls/s through, {:.0} % of the quota, where \"{}\" got \
                 {:.1}: with uneven demand the quieter clients \
                 left their shares unused ({:.1}/s of the quota, from the demand alone) while \
                 the busier ones were refused. One shared limit lets any client use what the \
                 others leave.",
                p.name,
                p.goodput_per_s,
                p.goodput_per_s / quota * 100.0,
                s.name,
                s.goodput_per_s,
                c.unused_shares()
            ));
        } else {
            notes.push(format!(
                "With this demand every client calls more than its share of the quota, so \
                 \"{}\" ({:.1} calls/s) does about as well as \"{}\" ({:.1}/s). They part when demand is uneven: a client that calls less than its \
                 share leaves quota unused that a shared limit would give to the others (a \
                 skew above 0 shows it).",
                p.name, p.goodput_per_s, s.name, s.goodput_per_s
            ));
        }
    }
    // What waiting for a turn bought.
    let refusing = of_kind(
        r,
        |l| matches!(l, QuotaLimit::Shared { max_wait } if max_wait.is_zero()),
    )
    .next();
    let waits = of_kind(
        r,
        |l| matches!(l, QuotaLimit::Shared { max_wait } if !max_wait.is_zero()),
    )
    .next();
    if let (Some(a), Some(w)) = (refusing, waits)
        && c.load() > 1.0
    {
        notes.push(format!(
            "Waiting for a turn under demand that stays above the quota adds latency, not \
             goodput: the turns book up to {:?} ahead, so the calls that got one waited (p50 {} \
             ms with \"{}\", against {} ms with \"{}\", which refuses at once) and the calls \
             beyond were refused all the same ({} and {}); goodput was {:.1}/s and {:.1}/s. A wait helps a burst above \
             the quota that passes, not a demand that stays above it.",
            w.limit.max_wait(),
            ms(w.p50_ms),
            w.name,
            ms(a.p50_ms),
            a.name,
            w.refused_locally,
            a.refused_locally,
            w.goodput_per_s,
            a.goodput_per_s,
        ));
    }
    notes
}
