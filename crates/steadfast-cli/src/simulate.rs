//! `steadfast simulate`: the command-line flags mapped onto the simulator's
//! scenario configurations; runs them, prints the summary table and writes
//! the report (SVG and PNG charts and an `index.html`).

use std::io::Write;
use std::sync::Arc;

use std::time::Duration;
use steadfast_sim::breaker::BreakerConfig;

use steadfast_sim::herd::HerdConfig;
use steadfast_sim::metastable::{MetastableConfig, MetastableStrategy};
use steadfast_sim::overload::{Bounds, OverloadConfig, OverloadStrategy};
use steadfast_sim::quota::{QuotaConfig, RetryAfter};
use steadfast_sim::replicas::ReplicasConfig;
use steadfast_sim::storm::{Incident, IncidentKind, StormConfig};
use steadfast_sim::tail::TailConfig;
use steadfast_sim::{SimConfig, SimError};

use crate::cli::{RetryAfterUnit, Scenario, SimulateArgs};
use crate::exit;

/// The simulator's configuration for `args`: the chosen scenarios on their
/// built-in defaults, with every flag given applied on top.
///
/// # Errors
/// A [`SimError`] when a flag's value is refused (for example a `--cap`
/// below `--base`, which the backoff builder rejects).
pub fn config(args: &SimulateArgs) -> Result<SimConfig, SimError> {
    let scenario = args.scenario.unwrap_or(Scenario::All);
    let mut config = SimConfig::none();
    if matches!(scenario, Scenario::Herd | Scenario::All) {
        let mut herd = match (args.base, args.cap) {
            (None, None) => HerdConfig::default(),
            (base, cap) => {
                let d = HerdConfig::default();
                HerdConfig::with_backoff(base.unwrap_or(d.base), cap.unwrap_or(d.cap))?
            }
        };
        if let Some(n) = args.clients {
            herd.clients = n;
        }
        if let Some(d) = args.outage {
            herd.outage = d;
        }
        if let Some(rate) = args.accept_rate {
            (herd.window, herd.accepts_per_window) = accept_window(rate);
        }
        if let Some(h) = args.horizon {
            herd.horizon = h;
        }
        config.herd = Some(herd);
    }
    if matches!(scenario, Scenario::Storm | Scenario::All) {
        let mut storm = StormConfig::default();
        if let Some(n) = args.clients {
            storm.clients = n;
        }
        if let Some(rate) = args.rate {
            storm.call_rate = rate;
        }
        if let Some(d) = args.duration {
            storm.duration = d;
        }
        if let Some(n) = args.capacity {
            storm.server.concurrency = n;
            storm.server.queue_limit = n;
        }
        if let Some(latency) = &args.latency {
            storm.server.latency = latency.clone();
        }
        let kind = match args.overload {
            Some(capacity) => IncidentKind::Overload { capacity },
            None => storm.incident.kind,
        };
        storm.incident = Incident {
            start: args.incident_start.unwrap_or(storm.incident.start),
            length: args.outage.unwrap_or(storm.incident.length),
            kind,
        };
        if let Some(spec) = &args.backoff {
            storm.backoff = Arc::new(crate::backoff::build(spec, None)?);
        }
        config.storm = Some(storm);
    }
    if matches!(scenario, Scenario::Metastable | Scenario::All) {
        config.metastable = Some(metastable(args)?);
    }
    if matches!(scenario, Scenario::Breaker | Scenario::All) {
        config.breaker = Some(breaker(args)?);
    }
    if matches!(scenario, Scenario::Overload | Scenario::All) {
        config.overload = Some(overload(args)?);
    }
    if matches!(scenario, Scenario::Quota | Scenario::All) {
        config.quota = Some(quota(args)?);
    }
    if matches!(scenario, Scenario::Replicas | Scenario::All) {
        config.replicas = Some(replicas(args)?);
    }
    if matches!(scenario, Scenario::Tail | Scenario::All) {
        let mut tail = TailConfig::default();
        if let Some(n) = args.calls {
            tail.calls = n;
        }
        if let Some(rate) = args.rate {
            tail.call_rate = rate;
        }
        if let Some(latency) = &args.latency {
            tail.server.latency = latency.clone();
        }
        config.tail = Some(tail);
    }
    Ok(match args.seed {
        Some(seed) => config.with_seed(seed),
        None => config,
    })
}

use Scenario::{Breaker, Herd, Metastable, Overload, Quota, Replicas, Storm, Tail};

/// A flag, whether it was given, and the scenarios that take it.
pub(crate) type FlagUse = (&'static str, bool, &'static [Scenario]);

/// Which scenarios take each flag (besides `--out` and `--seed`, which every
/// one takes), and whether it was given. The one place that says so: the
/// check below and the help texts' test read it.
pub(crate) fn scenario_flags(args: &SimulateArgs) -> [FlagUse; 24] {
    const CAPACITY_BASED: &[Scenario] = &[Storm, Metastable, Breaker, Overload];
    const TIMED: &[Scenario] = &[Storm, Metastable, Breaker, Overload, Quota, Replicas];
    [
        (
            "--clients",
            args.clients.is_some(),
            &[Herd, Storm, Metastable, Breaker, Overload, Quota, Replicas],
        ),
        ("--outage", args.outage.is_some(), &[Herd, Storm, Breaker]),
        ("--accept-rate", args.accept_rate.is_some(), &[Herd]),
        ("--base", args.base.is_some(), &[Herd]),
        ("--cap", args.cap.is_some(), &[Herd]),
        ("--horizon", args.horizon.is_some(), &[Herd]),
        (
            "--rate",
            args.rate.is_some(),
            &[Storm, Metastable, Tail, Breaker, Overload, Quota, Replicas],
        ),
        ("--duration", args.duration.is_some(), TIMED),
        ("--capacity", args.capacity.is_some(), CAPACITY_BASED),
        (
            "--latency",
            args.latency.is_some(),
            &[Storm, Metastable, Tail, Breaker, Overload, Quota, Replicas],
        ),
        (
            "--incident-start",
            args.incident_start.is_some(),
            CAPACITY_BASED,
        ),
        (
            "--overload",
            args.overload.is_some(),
            &[Storm, Metastable, Overload],
        ),
        ("--backoff", args.backoff.is_some(), TIMED),
        ("--trigger", args.trigger.is_some(), &[Metastable, Overload]),
        (
            "--attempt-timeout",
            args.attempt_timeout.is_some(),
            &[Metastable, Overload],
        ),
        ("--calls", args.calls.is_some(), &[Tail]),
        ("--limit-window", args.limit_window.is_some(), &[Overload]),
        ("--limit-min", args.limit_min.is_some(), &[Overload]),
        ("--limit-max", args.limit_max.is_some(), &[Overload]),
        ("--quota", args.quota.is_some(), &[Quota]),
        ("--skew", args.skew.is_some(), &[Quota]),
        ("--retry-after", args.retry_after.is_some(), &[Quota]),
        ("--replicas", args.replicas.is_some(), &[Replicas]),
        ("--bad-replicas", args.bad_replicas.is_some(), &[Replicas]),
    ]
}

/// Checks that every flag given applies to the chosen scenario (with `all`,
/// or no scenario, a flag applies to the scenarios that take it).
///
/// # Errors
/// The message for the first flag given that the scenario does not take,
/// naming the scenarios that do: a flag silently ignored would be a run
/// that is not the one asked for.
pub fn check_flags(args: &SimulateArgs) -> Result<(), String> {
    let scenario = args.scenario.unwrap_or(Scenario::All);
    if scenario == Scenario::All {
        return Ok(());
    }
    match scenario_flags(args)
        .into_iter()
        .find(|(_, given, takers)| *given && !takers.contains(&scenario))
    {
        Some((flag, _, takers)) => Err(format!(
            "{flag} does not apply to the {} scenario; it applies to {}",
            name(scenario),
            list(takers)
        )),
        None => Ok(()),
    }
}

/// A scenario's name as the user types it.
fn name(scenario: Scenario) -> &'static str {
    match scenario {
        Herd => "herd",
        Storm => "storm",
        Metastable => "metastable",
        Tail => "tail",
        Breaker => "breaker",
        Overload => "overload",
        Quota => "quota",
        Replicas => "replicas",
        Scenario::All => "all",
    }
}

/// "a", "a and b", "a, b and c".
fn list(scenarios: &[Scenario]) -> String {
    let names: Vec<&str> = scenarios.iter().map(|s| name(*s)).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// The `replicas` scenario's settings: its defaults, with the flags that
/// apply to it.
fn replicas(args: &SimulateArgs) -> Result<ReplicasConfig, SimError> {
    let mut replicas = ReplicasConfig::default();
    if let Some(n) = args.clients {
        replicas.clients = n;
    }
    if let Some(n) = args.replicas {
        replicas.replicas = n;
    }
    if let Some(n) = args.bad_replicas {
        replicas.bad = n;
    }
    if let Some(rate) = args.rate {
        replicas.call_rate = rate;
    }
    if let Some(d) = args.duration {
        replicas.duration = d;
    }
    if let Some(latency) = &args.latency {
        replicas.server.latency = latency.clone();
    }
    if let Some(spec) = &args.backoff {
        replicas.backoff = crate::backoff::build(spec, None)?;
    }
    Ok(replicas)
}

/// The `breaker` scenario's settings: its defaults, with the storm's flags
/// that apply to it.
fn breaker(args: &SimulateArgs) -> Result<BreakerConfig, SimError> {
    let mut breaker = BreakerConfig::default();
    if let Some(n) = args.clients {
        breaker.clients = n;
    }
    if let Some(rate) = args.rate {
        breaker.call_rate = rate;
    }
    if let Some(d) = args.duration {
        breaker.duration = d;
    }
    if let Some(n) = args.capacity {
        breaker.server.concurrency = n;
        breaker.server.queue_limit = n;
    }
    if let Some(latency) = &args.latency {
        breaker.server.latency = latency.clone();
    }
    if let Some(start) = args.incident_start {
        breaker.outage_start = start;
    }
    if let Some(length) = args.outage {
        breaker.outage_length = length;
    }
    if let Some(spec) = &args.backoff {
        breaker.backoff = crate::backoff::build(spec, None)?;
    }
    Ok(breaker)
}

/// The herd's accept window and accepts per window for `rate` accepts per
/// second, exactly: per 100 ms when the rate divides by 10 (the finer
/// window shows bursts better), else per whole second.
fn accept_window(rate: u32) -> (Duration, u32) {
    if rate.is_multiple_of(10) {
        (Duration::from_millis(100), rate / 10)
    } else {
        (Duration::from_secs(1), rate)
    }
}

/// The metastable scenario's configuration from the flags.
fn metastable(args: &SimulateArgs) -> Result<MetastableConfig, SimError> {
    let mut m = MetastableConfig::default();
    if let Some(n) = args.clients {
        m.clients = n;
    }
    if let Some(rate) = args.rate {
        m.call_rate = rate;
    }
    if let Some(d) = args.duration {
        m.duration = d;
    }
    if let Some(n) = args.capacity {
        // The queue keeps its depth per slot (2 s of work at the default
        // service time: more than a caller waits).
        let per_slot = m.server.queue_limit / m.server.concurrency.max(1);
        m.server.concurrency = n;
        m.server.queue_limit = n.saturating_mul(per_slot);
    }
    if let Some(latency) = &args.latency {
        m.server.latency = latency.clone();
    }
    if let Some(start) = args.incident_start {
        m.trigger.start = start;
    }
    if let Some(length) = args.trigger {
        m.trigger.length = length;
    }
    if let Some(capacity) = args.overload {
        m.trigger.kind = IncidentKind::Overload { capacity };
    }
    if let Some(timeout) = args.attempt_timeout {
        m.attempt_timeout = timeout;
        m.strategies = MetastableStrategy::standard(timeout);
    }
    if let Some(spec) = &args.backoff {
        m.backoff = Arc::new(crate::backoff::build(spec, None)?);
    }
    Ok(m)
}

/// The overload scenario's configuration from the flags: the metastable
/// scenario's flags (the drop is its trigger), and the adaptive limits'
/// window and bounds.
fn overload(args: &SimulateArgs) -> Result<OverloadConfig, SimError> {
    let mut o = OverloadConfig::default();
    if let Some(n) = args.clients {
        o.clients = n;
    }
    if let Some(rate) = args.rate {
        o.call_rate = rate;
    }
    if let Some(d) = args.duration {
        o.duration = d;
    }
    if let Some(n) = args.capacity {
        // The queue keeps its depth per worker.
        let per_slot = o.server.queue_limit / o.server.concurrency.max(1);
        o.server.concurrency = n;
        o.server.queue_limit = n.saturating_mul(per_slot);
    }
    if let Some(latency) = &args.latency {
        o.server.latency = latency.clone();
    }
    if let Some(start) = args.incident_start {
        o.drop.start = start;
    }
    if let Some(length) = args.trigger {
        o.drop.length = length;
    }
    if let Some(capacity) = args.overload {
        o.drop.kind = IncidentKind::Overload { capacity };
    }
    if let Some(timeout) = args.attempt_timeout {
        o.attempt_timeout = timeout;
    }
    if let Some(spec) = &args.backoff {
        o.backoff = crate::backoff::build(spec, None)?;
    }
    if let Some(window) = args.limit_window {
        o.window = window;
    }
    let bounds = Bounds::new(args.limit_min.unwrap_or(1), args.limit_max.unwrap_or(200));
    o.strategies = OverloadStrategy::standard(o.server.concurrency, bounds);
    Ok(o)
}

/// The quota scenario's configuration from the flags: its own, and the
/// clients, demand, duration, the provider's service time and the backoff.
fn quota(args: &SimulateArgs) -> Result<QuotaConfig, SimError> {
    let mut q = QuotaConfig::default();
    if let Some(n) = args.quota {
        // The burst follows the quota (the core's default for a Quota).
        q.quota = n;
    }
    if let Some(skew) = args.skew {
        q.skew = skew;
    }
    if let Some(unit) = args.retry_after {
        q.retry_after = match unit {
            RetryAfterUnit::Seconds => RetryAfter::Seconds,
            RetryAfterUnit::Ms => RetryAfter::Millis,
        };
    }
    if let Some(n) = args.clients {
        q.clients = n;
    }
    if let Some(rate) = args.rate {
        q.call_rate = rate;
    }
    if let Some(d) = args.duration {
        q.duration = d;
    }
    if let Some(latency) = &args.latency {
        q.latency = latency.clone();
    }
    if let Some(spec) = &args.backoff {
        q.backoff = crate::backoff::build(spec, None)?;
    }
    Ok(q)
}

/// The command-line flag behind a configuration field, where there is one.
fn flag(scope: &str, field: &str) -> Option<&'static str> {
    Some(match (scope, field) {
        (_, "clients") => "--clients",
        (_, "call_rate") => "--rate",
        (_, "duration") => "--duration",
        ("herd config", "outage") => "--outage",
        ("herd config", "accepts_per_window") => "--accept-rate",
        ("herd config", "base") => "--base",
        ("herd config", "cap") => "--cap",
        ("herd config", "horizon") => "--horizon",
        ("storm config", "incident") => "--incident-start and --outage",
        ("storm config", "incident.capacity") | ("metastable config", "trigger.capacity") => {
            "--overload"
        }
        ("metastable config", "trigger") => "--incident-start and --trigger",
        ("metastable config" | "overload config", "attempt_timeout") => "--attempt-timeout",
        ("overload config", "drop") => "--incident-start and --trigger",
        ("overload config", "drop.capacity") => "--overload",
        ("overload config", "drop.length") => "--trigger",
        ("overload config", "window") => "--limit-window",
        ("overload config", "strategies.limit.min") => "--limit-min",
        ("overload config", "strategies.limit.max") => "--limit-max",
        ("quota config", "quota") => "--quota",
        ("quota config", "skew") => "--skew",
        ("tail config", "calls") => "--calls",
        ("server config", "concurrency" | "queue_limit") => "--capacity",
        ("server config", "latency") => "--latency",
        ("latency distribution", _) => "--latency",
        _ => return None,
    })
}

/// The message for a refused setting, in terms of the flags the user typed
/// (a configuration field with no flag keeps its own name).
fn message(e: &SimError) -> String {
    let SimError::Config {
        scope,
        field,
        rule,
        got,
    } = e
    else {
        return e.to_string();
    };
    let Some(name) = flag(scope, field) else {
        return e.to_string();
    };
    // Fields named in the rule become their flags too.
    let mut rule = (*rule).to_owned();
    for word in ["duration", "horizon", "base", "window"] {
        if let Some(f) = flag(scope, word) {
            rule = rule.replace(&format!("`{word}`"), f);
        }
    }
    format!("invalid value for {name}: {rule} (got {got})")
}

/// Runs `steadfast simulate`; returns the exit code (2 when a setting is
/// refused, 1 when the report cannot be written).
pub fn run(args: &SimulateArgs) -> i32 {
    if let Err(message) = check_flags(args) {
        eprintln!("steadfast: {message}");
        return exit::USAGE;
    }
    let config = match config(args).and_then(|c| c.validate().map(|()| c)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("steadfast: {}", message(&e));
            return exit::USAGE;
        }
    };
    let report = match steadfast_sim::run_all(&config) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("steadfast: {}", message(&e));
            return match e {
                SimError::Io { .. } | SimError::Plot { .. } => exit::FAILURE,
                _ => exit::USAGE,
            };
        }
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = out
        .write_all(report.summary().as_bytes())
        .and_then(|()| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("steadfast: cannot write the summary: {e}");
        return exit::FAILURE;
    }
    match report.write_to(&args.out) {
        Ok(files) => {
            if let Some(index) = files.first() {
                eprintln!(
                    "steadfast: wrote {} files; open {}",
                    files.len(),
                    index.display()
                );
            }
            0
        }
        Err(e) => {
            eprintln!("steadfast: {e}");
            exit::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;
    use std::time::Duration;

    fn args(line: &[&str]) -> SimulateArgs {
        let mut full = vec!["steadfast", "simulate"];
        full.extend_from_slice(line);
        match Cli::try_parse_from(full).unwrap().command {
            Command::Simulate(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_scenario_means_all_on_defaults() {
        let c = config(&args(&[])).unwrap();
        let (h, s, t) = (c.herd.unwrap(), c.storm.unwrap(), c.tail.unwrap());
        assert_eq!(h.clients, HerdConfig::default().clients);
        assert_eq!(s.clients, StormConfig::default().clients);
        assert_eq!(t.calls, TailConfig::default().calls);
    }

    #[test]
    fn tail_flags_reach_the_tail_scenario_only() {
        let c = config(&args(&["tail", "--calls", "500", "--rate", "250"])).unwrap();
        assert!(c.herd.is_none() && c.storm.is_none());
        let t = c.tail.unwrap();
        assert_eq!(t.calls, 500);
        assert!((t.call_rate - 250.0).abs() < f64::EPSILON);
    }

    #[test]
    fn flags_reach_the_configs() {
        let c = config(&args(&[
            "herd",
            "--clients",
            "40",
            "--outage",
            "2s",
            "--accept-rate",
            "120",
            "--base",
            "200ms",
            "--cap",
            "5s",
            "--seed",
            "9",
        ]))
        .unwrap();
        assert!(c.storm.is_none());
        let h = c.herd.unwrap();
        assert_eq!(h.clients, 40);
        assert_eq!(h.outage, Duration::from_secs(2));
        assert_eq!(h.accepts_per_window, 12);
        assert_eq!(
            (h.base, h.cap),
            (Duration::from_millis(200), Duration::from_secs(5))
        );
        assert_eq!(h.seed, 9);

        let c = config(&args(&[
            "storm",
            "--clients",
            "5",
            "--rate",
            "50",
            "--duration",
            "20s",
            "--capacity",
            "4",
            "--outage",
            "3s",
            "--incident-start",
            "5s",
            "--overload",
            "0.25",
            "--latency",
            "const:2ms",
            "--backoff",
            "constant:delay=10ms",
        ]))
        .unwrap();
        assert!(c.herd.is_none());
        let s = c.storm.unwrap();
        assert_eq!(
            (s.clients, s.server.concurrency, s.server.queue_limit),
            (5, 4, 4)
        );
        assert!((s.call_rate - 50.0).abs() < 1e-9);
        assert_eq!(s.duration, Duration::from_secs(20));
        assert_eq!(s.incident.start, Duration::from_secs(5));
        assert_eq!(s.incident.length, Duration::from_secs(3));
        assert_eq!(s.incident.kind, IncidentKind::Overload { capacity: 0.25 });
        assert_eq!(
            s.server.latency,
            steadfast_sim::Latency::Constant(Duration::from_millis(2))
        );
    }

    #[test]
    fn overload_flags_reach_the_overload_scenario_only() {
        let c = config(&args(&[
            "overload",
            "--clients",
            "2",
            "--rate",
            "300",
            "--duration",
            "30s",
            "--capacity",
            "8",
            "--incident-start",
            "5s",
            "--trigger",
            "10s",
            "--overload",
            "0.5",
            "--attempt-timeout",
            "250ms",
            "--limit-window",
            "1s",
            "--limit-min",
            "2",
            "--limit-max",
            "50",
        ]))
        .unwrap();
        assert!(c.herd.is_none() && c.storm.is_none() && c.breaker.is_none());
        assert!(c.validate().is_ok());
        let o = c.overload.unwrap();
        assert_eq!((o.clients, o.server.concurrency), (2, 8));
        assert_eq!(
            o.server.queue_limit,
            8 * 25,
            "the queue keeps its depth per worker"
        );
        assert!((o.call_rate - 300.0).abs() < 1e-9);
        assert_eq!(o.duration, Duration::from_secs(30));
        assert_eq!(
            (o.drop.start, o.drop.length),
            (Duration::from_secs(5), Duration::from_secs(10))
        );
        assert_eq!(o.drop.kind, IncidentKind::Overload { capacity: 0.5 });
        assert_eq!(o.attempt_timeout, Duration::from_millis(250));
        assert_eq!(o.window, Duration::from_secs(1));
        // The static limits follow the server's workers, the adaptive ones
        // the bounds given.
        let names: Vec<&str> = o.strategies.iter().map(|s| s.name.as_str()).collect();
        assert!(
            names.contains(&"static 8") && names.contains(&"static 4"),
            "{names:?}"
        );
        let vegas = o.strategies.iter().find(|s| s.name == "Vegas").unwrap();
        assert_eq!(
            vegas.limit,
            steadfast_sim::overload::OverloadLimit::Vegas(steadfast_sim::overload::Bounds {
                initial: 20,
                min: 2,
                max: 50
            })
        );
    }

    #[test]
    fn quota_flags_reach_the_quota_scenario_only() {
        let c = config(&args(&[
            "quota",
            "--quota",
            "40",
            "--skew",
            "0.5",
            "--retry-after",
            "ms",
            "--clients",
            "8",
            "--rate",
            "70",
            "--duration",
            "30s",
            "--latency",
            "const:3ms",
            "--backoff",
            "constant:delay=20ms",
            "--seed",
            "4",
        ]))
        .unwrap();
        assert!(c.herd.is_none() && c.storm.is_none() && c.overload.is_none());
        assert!(c.validate().is_ok());
        let q = c.quota.unwrap();
        assert_eq!((q.quota, q.burst(), q.clients, q.seed), (40, 40, 8, 4));
        assert!((q.skew - 0.5).abs() < 1e-12);
        assert_eq!(q.retry_after, RetryAfter::Millis);
        assert!((q.call_rate - 70.0).abs() < 1e-9);
        assert_eq!(q.duration, Duration::from_secs(30));
        assert_eq!(
            q.latency,
            steadfast_sim::Latency::Constant(Duration::from_millis(3))
        );
        assert_ne!(q.backoff, steadfast::Backoff::default());
        // Every scenario takes the quota one's shared flags with `all`.
        let all = config(&args(&["--clients", "8", "--rate", "70"])).unwrap();
        let q = all.quota.unwrap();
        assert_eq!(q.clients, 8);
        assert!((q.call_rate - 70.0).abs() < 1e-9);
    }

    #[test]
    fn refused_quota_settings_name_their_flags() {
        for (line, flag) in [
            (&["quota", "--quota", "4000000000"][..], "--quota"),
            (
                &["quota", "--rate", "1000000", "--duration", "1h"][..],
                "--rate",
            ),
            (&["quota", "--clients", "2000000"][..], "--clients"),
        ] {
            let err = config(&args(line)).and_then(|c| c.validate()).unwrap_err();
            assert!(message(&err).contains(flag), "{line:?}: {}", message(&err));
        }
    }

    #[test]
    fn refused_overload_settings_name_their_flags() {
        for (line, flag) in [
            (
                &["overload", "--limit-min", "30", "--limit-max", "10"][..],
                "--limit-max",
            ),
            (&["overload", "--overload", "1"][..], "--overload"),
            (
                &["overload", "--duration", "30s"][..],
                "--incident-start and --trigger",
            ),
        ] {
            let err = config(&args(line)).and_then(|c| c.validate()).unwrap_err();
            assert!(message(&err).contains(flag), "{line:?}: {}", message(&err));
        }
    }

    #[test]
    fn every_flag_says_which_scenarios_take_it_and_the_check_agrees() {
        use clap::CommandFactory;
        let cli = Cli::command();
        let simulate = cli.find_subcommand("simulate").unwrap();
        let flags = scenario_flags(&args(&[]));
        for (flag, given, takers) in flags {
            assert!(!given, "{flag}");
            let arg = simulate
                .get_arguments()
                .find(|a| a.get_long() == flag.strip_prefix("--"))
                .unwrap_or_else(|| panic!("{flag} is an option of simulate"));
            let help = arg.get_help().unwrap().to_string();
            assert!(
                help.starts_with(&format!("{}: ", list(takers))),
                "{flag}: {help}"
            );
        }
        // Every scenario option is in the table, but --out and --seed.
        for arg in simulate.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if ["out", "seed", "help"].contains(&long) {
                continue;
            }
            assert!(
                flags
                    .iter()
                    .any(|(f, _, _)| f.strip_prefix("--") == Some(long)),
                "--{long} is missing from scenario_flags"
            );
        }
    }

    #[test]
    fn a_flag_applies_to_the_scenarios_that_take_it() {
        assert!(check_flags(&args(&["--rate", "100", "--accept-rate", "10"])).is_ok());
        assert!(check_flags(&args(&["all", "--trigger", "5s"])).is_ok());
        assert!(check_flags(&args(&["breaker", "--rate", "100", "--outage", "5s"])).is_ok());
        assert_eq!(
            check_flags(&args(&["herd", "--trigger", "5s"])),
            Err(
                "--trigger does not apply to the herd scenario; it applies to metastable and \
                 overload"
                    .to_owned()
            )
        );
        assert_eq!(list(&[Tail]), "tail");
        assert_eq!(list(&[Herd, Tail]), "herd and tail");
    }

    #[test]
    fn refused_settings_are_errors() {
        let refused =
            config(&args(&["herd", "--base", "5s", "--cap", "1s"])).and_then(|c| c.validate());
        assert!(refused.is_err());
        let c = config(&args(&["herd", "--outage", "2h"])).unwrap();
        assert!(c.validate().is_err(), "an outage past the horizon");
    }
}
