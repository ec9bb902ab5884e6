//! Reports: plots (SVG and PNG), an `index.html` that shows them with the
//! tables, and a plain-text summary.
//!
//! [`run_all`] runs the configured scenarios into a [`Report`];
//! [`Report::summary`] gives the text tables (what the CLI prints) and
//! [`Report::write_to`] writes the folder. A [`Report`] also serializes to
//! JSON with serde.

mod breaker_section;
mod plot;
mod table;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use self::plot::{Chart, Line};
use self::table::{Table, escape};
use crate::breaker::{BreakerConfig, BreakerResult};
use crate::engine::{nanos, secs};
use crate::herd::{HerdConfig, HerdResult};
use crate::storm::{IncidentKind, StormConfig, StormResult};
use crate::tail::{TailConfig, TailResult};
use crate::{Agreement, SimError, breaker, herd, storm, tail};

/// A scenario, by name: what the CLI's `steadfast simulate <scenario>` selects.
///
/// ```
/// use steadfast_sim::{Scenario, SimConfig};
/// let scenario: Scenario = "storm".parse()?;
/// let config = SimConfig::only(&[scenario]);
/// assert!(config.herd.is_none() && config.storm.is_some());
/// assert!("tale".parse::<Scenario>().is_err());
/// # Ok::<(), steadfast_sim::SimError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// [`herd`]: reconnecting clients after an outage.
    Herd,
    /// [`storm`]: retries during an incident.
    Storm,
    /// [`tail`]: hedging against a heavy-tailed latency.
    Tail,
    /// [`breaker`]: a dependency down for a while, with and without a
    /// circuit breaker.
    Breaker,
}

impl Scenario {
    /// Every scenario, in report order.
    pub const ALL: [Self; 4] = [Self::Herd, Self::Storm, Self::Tail, Self::Breaker];

    /// The scenario's name.
    ///
    /// ```
    /// assert_eq!(steadfast_sim::Scenario::Herd.name(), "herd");
    /// ```
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Herd => "herd",
            Self::Storm => "storm",
            Self::Tail => "tail",
            Self::Breaker => "breaker",
        }
    }
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Scenario {
    type Err = SimError;

    fn from_str(s: &str) -> Result<Self, SimError> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| {
                SimError::config(
                    "scenario",
                    "name",
                    "must be one of herd, storm, tail, breaker",
                    s,
                )
            })
    }
}

/// Which scenarios to run, each with its settings (`None` skips it).
///
/// The default runs every scenario on its built-in defaults, which is what
/// `steadfast simulate` without a scenario does.
///
/// ```
/// use steadfast_sim::SimConfig;
/// let config = SimConfig::default().with_seed(42);
/// assert_eq!(config.herd.as_ref().map(|h| h.seed), Some(42));
/// ```
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The `herd` scenario.
    pub herd: Option<HerdConfig>,
    /// The `storm` scenario.
    pub storm: Option<StormConfig>,
    /// The `tail` scenario.
    pub tail: Option<TailConfig>,
    /// The `breaker` scenario.
    pub breaker: Option<BreakerConfig>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            herd: Some(HerdConfig::default()),
            storm: Some(StormConfig::default()),
            tail: Some(TailConfig::default()),
            breaker: Some(BreakerConfig::default()),
        }
    }
}

impl SimConfig {
    /// No scenario at all; add the ones wanted.
    ///
    /// ```
    /// use steadfast_sim::{SimConfig, herd::HerdConfig};
    /// let config = SimConfig { herd: Some(HerdConfig::default()), ..SimConfig::none() };
    /// assert!(config.herd.is_some());
    /// ```
    #[must_use]
    pub fn none() -> Self {
        Self {
            herd: None,
            storm: None,
            tail: None,
            breaker: None,
        }
    }

    /// The given scenarios on their defaults; every scenario when `scenarios`
    /// is empty (see the example on [`Scenario`]).
    #[must_use]
    pub fn only(scenarios: &[Scenario]) -> Self {
        if scenarios.is_empty() {
            return Self::default();
        }
        let mut config = Self::none();
        for s in scenarios {
            match s {
                Scenario::Herd => config.herd = Some(HerdConfig::default()),
                Scenario::Storm => config.storm = Some(StormConfig::default()),
                Scenario::Tail => config.tail = Some(TailConfig::default()),
                Scenario::Breaker => config.breaker = Some(BreakerConfig::default()),
            }
        }
        config
    }

    /// Sets the seed of every configured scenario (see the example on
    /// [`SimConfig`]).
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        if let Some(h) = &mut self.herd {
            h.seed = seed;
        }
        if let Some(s) = &mut self.storm {
            s.seed = seed;
        }
        if let Some(t) = &mut self.tail {
            t.seed = seed;
        }
        if let Some(b) = &mut self.breaker {
            b.seed = seed;
        }
        self
    }

    /// Checks every configured scenario.
    ///
    /// ```
    /// let mut config = steadfast_sim::SimConfig::default();
    /// if let Some(herd) = &mut config.herd {
    ///     herd.clients = 0;
    /// }
    /// assert!(config.validate().is_err());
    /// ```
    ///
    /// # Errors
    /// The first broken rule, as [`SimError::Config`].
    pub fn validate(&self) -> Result<(), SimError> {
        if let Some(h) = &self.herd {
            h.validate()?;
        }
        if let Some(s) = &self.storm {
            s.validate()?;
        }
        if let Some(t) = &self.tail {
            t.validate()?;
        }
        if let Some(b) = &self.breaker {
            b.validate()?;
        }
        Ok(())
    }
}

/// Runs every configured scenario (after checking all of them, so a bad
/// setting fails fast) and gathers the results.
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::{SimConfig, herd::HerdConfig};
///
/// let config = SimConfig {
///     herd: Some(HerdConfig { clients: 50, outage: Duration::from_secs(1), ..HerdConfig::default() }),
///     ..SimConfig::none()
/// };
/// let report = steadfast_sim::run_all(&config)?;
/// assert!(report.storm.is_none());
/// assert!(report.summary().starts_with("== herd"));
/// # Ok::<(), steadfast_sim::SimError>(())
/// ```
///
/// # Errors
/// [`SimError::Config`] for a bad setting.
pub fn run_all(config: &SimConfig) -> Result<Report, SimError> {
    config.validate()?;
    Ok(Report {
        herd: config.herd.as_ref().map(herd::run).transpose()?,
        storm: config.storm.as_ref().map(storm::run).transpose()?,
        tail: config.tail.as_ref().map(tail::run).transpose()?,
        breaker: config.breaker.as_ref().map(breaker::run).transpose()?,
    })
}

/// The results of a run of [`run_all`]: print its [`summary`](Self::summary),
/// write it with [`write_to`](Self::write_to), or serialize it (serde) to JSON.
///
/// ```
/// let report = steadfast_sim::Report::default();
/// assert_eq!(report.summary(), "");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// The `herd` scenario's result, if it ran.
    pub herd: Option<HerdResult>,
    /// The `storm` scenario's result, if it ran.
    pub storm: Option<StormResult>,
    /// The `tail` scenario's result, if it ran.
    pub tail: Option<TailResult>,
    /// The `breaker` scenario's result, if it ran.
    pub breaker: Option<BreakerResult>,
}

fn fmt_opt_secs(v: Option<f64>) -> String {
    v.map_or_else(|| "never".to_owned(), |s| format!("{s:.1}"))
}

struct Section {
    id: &'static str,
    title: &'static str,
    about: String,
    table: Table,
    agreement: Option<Agreement>,
    charts: Vec<(String, Chart)>,
}

impl Report {
    fn sections(&self) -> Vec<Section> {
        let mut out = Vec::new();
        if let Some(h) = &self.herd {
            out.push(herd_section(h));
        }
        if let Some(s) = &self.storm {
            out.push(storm_section(s));
        }
        if let Some(t) = &self.tail {
            out.push(tail_section(t));
        }
        if let Some(b) = &self.breaker {
            out.push(breaker_section::section(b));
        }
        out
    }

    /// The text tables, one per scenario, each followed by how it compares
    /// with the published result (what `steadfast simulate` prints).
    ///
    /// ```no_run
    /// let report = steadfast_sim::run_all(&steadfast_sim::SimConfig::default())?;
    /// println!("{}", report.summary());
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    #[must_use]
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for s in self.sections() {
            let _ = writeln!(out, "== {}\n{}\n", s.title, s.about);
            out.push_str(&s.table.to_text());
            if let Some(a) = &s.agreement {
                let _ = writeln!(out, "\n{a}");
            }
            out.push('\n');
        }
        out
    }

    /// Writes the report into `dir` (created if missing): for each chart an
    /// SVG and a PNG file, and `index.html` showing them with the tables.
    /// Returns the paths written, `index.html` first.
    ///
    /// # Errors
    /// [`SimError::Io`] or [`SimError::Plot`] when a file cannot be written.
    ///
    /// ```no_run
    /// let report = steadfast_sim::run_all(&steadfast_sim::SimConfig::default())?;
    /// let files = report.write_to(std::path::Path::new("steadfast-report"))?;
    /// assert!(files[0].ends_with("index.html"));
    /// # Ok::<(), steadfast_sim::SimError>(())
    /// ```
    pub fn write_to(&self, dir: &Path) -> Result<Vec<PathBuf>, SimError> {
        std::fs::create_dir_all(dir).map_err(|source| SimError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut written = Vec::new();
        let mut html = String::from(HTML_HEAD);
        for s in self.sections() {
            let _ = write!(
                html,
                "<section id=\"{}\">\n<h2>{}</h2>\n<p>{}</p>\n",
                s.id,
                escape(s.title),
                escape(&s.about)
            );
            if let Some(a) = &s.agreement {
                let _ = writeln!(
                    html,
                    "<p class=\"{}\"><strong>{}</strong>: {}. <br>This run <strong>{}</strong>: {}.</p>",
                    if a.agrees { "agree" } else { "disagree" },
                    escape(a.source),
                    escape(&a.claim),
                    if a.agrees { "agrees" } else { "does not agree" },
                    escape(&a.detail)
                );
            }
            html.push_str(&s.table.to_html());
            for (stem, chart) in &s.charts {
                let [svg, png] = plot::draw(chart, dir, stem)?;
                let _ = writeln!(
                    html,
                    "<figure><img src=\"{stem}.svg\" alt=\"{}\"><figcaption>{} (<a href=\"{stem}.png\">PNG</a>)</figcaption></figure>",
                    escape(&chart.title),
                    escape(&chart.title)
                );
                written.push(svg);
                written.push(png);
            }
            html.push_str("</section>\n");
        }
        html.push_str("</body>\n</html>\n");
        let index = dir.join("index.html");
        std::fs::write(&index, html).map_err(|source| SimError::Io {
            path: index.clone(),
            source,
        })?;
        written.insert(0, index);
        Ok(written)
    }
}

const HTML_HEAD: &str = "<!DOCTYPE html>
<html lang=\"en\">
<head>
<meta charset=\"utf-8\">
<title>steadfast simulation report</title>
<style>
body { font-family: sans-serif; max-width: 1000px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 4px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
figure { margin: 1em 0; }
img { max-width: 100%; }
.agree { border-left: 5px solid #2c2; padding-left: 10px; }
.disagree { border-left: 5px solid #d22; padding-left: 10px; }
</style>
</head>
<body>
<h1>steadfast simulation report</h1>
<p>Real steadfast schedules, retry policies and controls, driven on virtual time by a discrete-event simulator.</p>
";

fn herd_section(h: &HerdResult) -> Section {
    let c = &h.config;
    let window_ms = c.window.as_secs_f64() * 1e3;
    let mut table = Table::new(&[
        "strategy",
        "attempts",
        "while down",
        &format!("peak/{window_ms:.0}ms after recovery"),
        "peak overall",
        "all connected (s)",
        "gave up",
    ]);
    for s in &h.strategies {
        table.row(vec![
            s.name.clone(),
            s.total_attempts.to_string(),
            s.attempts_while_down.to_string(),
            s.peak_per_window.to_string(),
            s.peak_per_window_overall.to_string(),
            fmt_opt_secs(s.all_connected_after_s),
            s.gave_up.to_string(),
        ]);
    }
    let lines = h
        .strategies
        .iter()
        .map(|s| {
            let width = secs(s.attempts_per_window.bucket());
            Line {
                name: s.name.clone(),
                points: s
                    .attempts_per_window
                    .counts()
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| (i as f64 * width, n as f64))
                    .collect(),
            }
        })
        .collect();
    let end = h
        .strategies
        .iter()
        .map(|s| {
            s.connected_per_window.counts().len() as f64 * secs(s.connected_per_window.bucket())
        })
        .fold(0.0, f64::max);
    let connected = h
        .strategies
        .iter()
        .map(|s| {
            let width = secs(s.connected_per_window.bucket());
            let mut total = 0u64;
            let mut points: Vec<(f64, f64)> = s
                .connected_per_window
                .counts()
                .iter()
                .enumerate()
                .map(|(i, &n)| {
                    total += n;
                    ((i + 1) as f64 * width, total as f64)
                })
                .collect();
            points.push((end, total as f64));
            Line {
                name: s.name.clone(),
                points,
            }
        })
        .collect();
    let zoom = herd_zoom(h);
    Section {
        id: "herd",
        title: "herd: reconnecting after an outage",
        about: format!(
            "{} clients lose their connection at t = 0; the server refuses connections for {:.1} s, \
             then accepts {} per {window_ms:.0} ms. Seed {}.",
            c.clients,
            c.outage.as_secs_f64(),
            c.accepts_per_window,
            c.seed
        ),
        table,
        agreement: h.agreement.clone(),
        charts: vec![
            (
                "herd_attempts".to_owned(),
                Chart {
                    title: format!("Connection attempts per {window_ms:.0} ms"),
                    x_label: "time (s)".to_owned(),
                    y_label: "attempts".to_owned(),
                    lines,
                    shade: Some((0.0, c.outage.as_secs_f64())),
                    log_y: false,
                    x_max: Some(zoom),
                    legend_low: false,
                },
            ),
            (
                "herd_connected".to_owned(),
                Chart {
                    title: "Clients connected".to_owned(),
                    x_label: "time (s)".to_owned(),
                    y_label: "clients".to_owned(),
                    lines: connected,
                    shade: Some((0.0, c.outage.as_secs_f64())),
                    log_y: false,
                    x_max: None,
                    legend_low: true, // the lines climb to the top left
                },
            ),
        ],
    }
}

/// Where the attempts chart stops: past the second-slowest strategy's
/// completion (the slowest, usually no jitter, would squash the others),
/// and never before 10 s after the outage.
fn herd_zoom(h: &HerdResult) -> f64 {
    let mut done: Vec<f64> = h
        .strategies
        .iter()
        .map(|s| {
            s.all_connected_after_s
                .unwrap_or(secs(nanos(h.config.horizon)))
        })
        .collect();
    done.sort_by(f64::total_cmp);
    let pick = if done.len() >= 2 {
        done[done.len() - 2]
    } else {
        done.first().copied().unwrap_or(0.0)
    };
    (pick * 1.2).max(h.config.outage.as_secs_f64() + 10.0)
}

fn storm_section(r: &StormResult) -> Section {
    let c = &r.config;
    let mut table = Table::new(&[
        "strategy",
        "calls",
        "attempts",
        "amplification",
        "success",
        "success in incident",
        "recovery (s)",
        "refused locally",
        "retries refused",
    ]);
    for s in &r.strategies {
        table.row(vec![
            s.name.clone(),
            s.calls.to_string(),
            s.attempts.to_string(),
            format!("{:.2}x", s.amplification),
            format!("{:.1} %", s.success_rate * 100.0),
            format!("{:.1} %", s.incident_success_rate * 100.0),
            fmt_opt_secs(s.recovery_s),
            s.refused_locally.to_string(),
            s.retries_refused.to_string(),
        ]);
    }
    let width = secs(storm_bucket(r));
    let per_sec = 1.0 / width;
    let attempts = r
        .strategies
        .iter()
        .map(|s| Line {
            name: s.name.clone(),
            points: s
                .attempts_per_bucket
                .counts()
                .iter()
                .enumerate()
                .map(|(i, &n)| (i as f64 * width, n as f64 * per_sec))
                .collect(),
        })
        .collect();
    let success = r
        .strategies
        .iter()
        .map(|s| Line {
            name: s.name.clone(),
            points: s
                .success_rate_per_bucket()
                .iter()
                .enumerate()
                .map(|(i, &rate)| (i as f64 * width, rate * 100.0))
                .collect(),
        })
        .collect();
    let shade = Some((
        c.incident.start.as_secs_f64(),
        c.incident.end().as_secs_f64(),
    ));
    let incident = match c.incident.kind {
        IncidentKind::Outage => "an outage".to_owned(),
        IncidentKind::Overload { capacity } => {
            format!("an overload (capacity down to {:.0} %)", capacity * 100.0)
        }
    };
    Section {
        id: "storm",
        title: "storm: retries during an incident",
        about: format!(
            "{} clients make {:.0} calls/s for {:.0} s against a server of about {:.0} requests/s \
             ({} slots, queue {}, service {}); {incident} from {:.0} s to {:.0} s. Seed {}.",
            c.clients,
            c.call_rate,
            c.duration.as_secs_f64(),
            c.server.capacity_per_sec(),
            c.server.concurrency,
            c.server.queue_limit,
            c.server.latency,
            c.incident.start.as_secs_f64(),
            c.incident.end().as_secs_f64(),
            c.seed
        ),
        table,
        agreement: r.agreement.clone(),
        charts: vec![
            (
                "storm_attempts".to_owned(),
                Chart {
                    title: "Attempts sent to the server per second".to_owned(),
                    x_label: "time (s)".to_owned(),
                    y_label: "attempts/s".to_owned(),
                    lines: attempts,
                    shade,
                    log_y: false,
                    x_max: None,
                    legend_low: false,
                },
            ),
            (
                "storm_success".to_owned(),
                Chart {
                    title: "Calls that succeeded, by start time".to_owned(),
                    x_label: "time (s)".to_owned(),
                    y_label: "success (%)".to_owned(),
                    lines: success,
                    shade,
                    log_y: false,
                    x_max: None,
                    legend_low: false,
                },
            ),
        ],
    }
}

fn storm_bucket(r: &StormResult) -> u64 {
    r.strategies
        .first()
        .map_or(1, |s| s.attempts_per_bucket.bucket())
}

fn tail_section(r: &TailResult) -> Section {
    let c = &r.config;
    let mut table = Table::new(&[
        "strategy",
        "calls",
        "requests",
        "extra requests",
        "p50 (ms)",
        "p99 (ms)",
        "p99.9 (ms)",
        "mean (ms)",
    ]);
    for s in &r.strategies {
        table.row(vec![
            s.name.clone(),
            s.calls.to_string(),
            s.requests.to_string(),
            format!("{:.1} %", s.extra_requests * 100.0),
            format!("{:.2}", s.p50_ms),
            format!("{:.2}", s.p99_ms),
            format!("{:.2}", s.p999_ms),
            format!("{:.2}", s.mean_ms),
        ]);
    }
    let lines = r
        .strategies
        .iter()
        .map(|s| Line {
            name: s.name.clone(),
            points: s.quantile_curve.clone(),
        })
        .collect();
    Section {
        id: "tail",
        title: "tail: hedging against a heavy tail",
        about: format!(
            "{} calls at {:.0} calls/s; each request's service time is {} \
             ({} slots, queue {}). Seed {}.",
            c.calls,
            c.call_rate,
            c.server.latency,
            c.server.concurrency,
            c.server.queue_limit,
            c.seed
        ),
        table,
        agreement: r.agreement.clone(),
        charts: vec![(
            "tail_latency".to_owned(),
            Chart {
                title: "Call latency by percentile".to_owned(),
                x_label: "nines (1 = p90, 2 = p99, 3 = p99.9)".to_owned(),
                y_label: "latency (ms, log scale)".to_owned(),
                lines,
                shade: None,
                log_y: true,
                x_max: None,
                legend_low: true, // the lines climb to the top right
            },
        )],
    }
}
