//! Reports: plots (SVG and PNG), an `index.html` that shows them with the
//! tables, and a plain-text summary.
//!
//! [`run_all`] runs the configured scenarios into a [`Report`];
//! [`Report::summary`] gives the text tables (what the CLI prints) and
//! [`Report::write_to`] writes the folder. A [`Report`] also serializes to
//! JSON with serde.

mod breaker_section;
mod overload_section;
mod plot;
mod quota_section;
mod replicas_section;
mod table;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use self::plot::{Chart, Line, Shade};
use self::table::{Table, escape};
use crate::breaker::{BreakerConfig, BreakerResult};
use crate::engine::{nanos, secs};
use crate::herd::{HerdConfig, HerdResult};
use crate::metastable::{MetastableConfig, MetastableResult};
use crate::overload::{OverloadConfig, OverloadResult};
use crate::quota::{QuotaConfig, QuotaResult};
use crate::replicas::{ReplicasConfig, ReplicasResult};
use crate::storm::{IncidentKind, StormConfig, StormResult};
use crate::tail::{TailConfig, TailResult};
use crate::{
    Agreement, SimError, breaker, herd, metastable, overload, quota, replicas, storm, tail,
};

/// The font every chart is drawn with, as TrueType bytes: DejaVu Sans
/// (Bitstream Vera license; see `assets/LICENSE-DejaVu.txt`), shipped in
/// this package so that no system font or font library is needed. The
/// `steadfast` command draws `schedule --plot` with it too.
pub const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

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
    /// [`metastable`]: a short trigger and a collapse that outlives it.
    Metastable,
    /// [`tail`]: hedging against a heavy-tailed latency.
    Tail,
    /// [`breaker`]: a dependency down for a while, with and without a
    /// circuit breaker.
    Breaker,
    /// [`overload`]: a capacity drop, with and without concurrency limits.
    Overload,
    /// [`quota`]: many clients sharing one provider's quota, with and
    /// without a rate limit of their own.
    Quota,
    /// [`replicas`]: one bad replica among good ones, and where retries go.
    Replicas,
}

impl Scenario {
    /// Every scenario, in report order.
    pub const ALL: [Self; 8] = [
        Self::Herd,
        Self::Storm,
        Self::Metastable,
        Self::Tail,
        Self::Breaker,
        Self::Overload,
        Self::Quota,
        Self::Replicas,
    ];

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
            Self::Metastable => "metastable",
            Self::Tail => "tail",
            Self::Breaker => "breaker",
            Self::Overload => "overload",
            Self::Quota => "quota",
            Self::Replicas => "replicas",
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
                    "must be one of herd, storm, metastable, tail, breaker, overload, quota, replicas",
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
    /// The `metastable` scenario.
    pub metastable: Option<MetastableConfig>,
    /// The `tail` scenario.
    pub tail: Option<TailConfig>,
    /// The `breaker` scenario.
    pub breaker: Option<BreakerConfig>,
    /// The `overload` scenario.
    pub overload: Option<OverloadConfig>,
    /// The `quota` scenario.
    pub quota: Option<QuotaConfig>,
    /// The `replicas` scenario.
    pub replicas: Option<ReplicasConfig>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            herd: Some(HerdConfig::default()),
            storm: Some(StormConfig::default()),
            metastable: Some(MetastableConfig::default()),
            tail: Some(TailConfig::default()),
            breaker: Some(BreakerConfig::default()),
            overload: Some(OverloadConfig::default()),
            quota: Some(QuotaConfig::default()),
            replicas: Some(ReplicasConfig::default()),
        }
    }
}

impl SimConfig {
    /// No scenario at all; add the ones wanted.
    ///
    /// ```
    /// use steadfast_sim::herd::HerdConfig;
    /// use steadfast_sim::SimConfig;
    /// let config = SimConfig { herd: Some(HerdConfig::default()), ..SimConfig::none() };
    /// assert!(config.herd.is_some());
    /// ```
    #[must_use]
    pub fn none() -> Self {
        Self {
            herd: None,
            storm: None,
            metastable: None,
            tail: None,
            breaker: None,
            overload: None,
            quota: None,
            replicas: None,
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
                Scenario::Metastable => config.metastable = Some(MetastableConfig::default()),
                Scenario::Tail => config.tail = Some(TailConfig::default()),
                Scenario::Breaker => config.breaker = Some(BreakerConfig::default()),
                Scenario::Overload => config.overload = Some(OverloadConfig::default()),
                Scenario::Quota => config.quota = Some(QuotaConfig::default()),
                Scenario::Replicas => config.replicas = Some(ReplicasConfig::default()),
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
        if let Some(m) = &mut self.metastable {
            m.seed = seed;
        }
        if let Some(t) = &mut self.tail {
            t.seed = seed;
        }
        if let Some(b) = &mut self.breaker {
            b.seed = seed;
        }
        if let Some(o) = &mut self.overload {
            o.seed = seed;
        }
        if let Some(q) = &mut self.quota {
            q.seed = seed;
        }
        if let Some(r) = &mut self.replicas {
            r.seed = seed;
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
        if let Some(m) = &self.metastable {
            m.validate()?;
        }
        if let Some(t) = &self.tail {
            t.validate()?;
        }
        if let Some(b) = &self.breaker {
            b.validate()?;
        }
        if let Some(o) = &self.overload {
            o.validate()?;
        }
        if let Some(q) = &self.quota {
            q.validate()?;
        }
        if let Some(r) = &self.replicas {
            r.validate()?;
        }
        Ok(())
    }
}

/// Runs every configured scenario (after checking all of them, so a bad
/// setting fails fast) and gathers the results.
///
/// ```
/// use std::time::Duration;
/// use steadfast_sim::herd::HerdConfig;
/// use steadfast_sim::SimConfig;
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
        metastable: config
            .metastable
            .as_ref()
            .map(metastable::run)
            .transpose()?,
        tail: config.tail.as_ref().map(tail::run).transpose()?,
        breaker: config.breaker.as_ref().map(breaker::run).transpose()?,
        overload: config.overload.as_ref().map(overload::run).transpose()?,
        quota: config.quota.as_ref().map(quota::run).transpose()?,
        replicas: config.replicas.as_ref().map(replicas::run).transpose()?,
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
    /// The `metastable` scenario's result, if it ran.
    pub metastable: Option<MetastableResult>,
    /// The `tail` scenario's result, if it ran.
    pub tail: Option<TailResult>,
    /// The `breaker` scenario's result, if it ran.
    pub breaker: Option<BreakerResult>,
    /// The `overload` scenario's result, if it ran.
    pub overload: Option<OverloadResult>,
    /// The `quota` scenario's result, if it ran.
    pub quota: Option<QuotaResult>,
    /// The `replicas` scenario's result, if it ran.
    pub replicas: Option<ReplicasResult>,
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
    /// Remarks a reader needs to read the numbers right.
    notes: Vec<String>,
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
        if let Some(m) = &self.metastable {
            out.push(metastable_section(m));
        }
        if let Some(t) = &self.tail {
            out.push(tail_section(t));
        }
        if let Some(b) = &self.breaker {
            out.push(breaker_section::section(b));
        }
        if let Some(o) = &self.overload {
            out.push(overload_section::section(o));
        }
        if let Some(q) = &self.quota {
            out.push(quota_section::section(q));
        }
        if let Some(r) = &self.replicas {
            out.push(replicas_section::section(r));
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
            for note in &s.notes {
                let _ = writeln!(out, "\nNote: {note}");
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
        let sections = self.sections();
        html.push_str(&contents(&sections));
        for s in &sections {
            let _ = write!(
                html,
                "<section id=\"{}\">\n<h2>{} <a class=\"top\" href=\"#contents\">contents</a></h2>\n<p>{}</p>\n",
                s.id,
                escape(s.title),
                escape(&s.about)
            );
            if let Some(a) = &s.agreement {
                let _ = writeln!(
                    html,
                    "<p class=\"{}\"><strong>{}</strong>: {}.{} <br>This run <strong>{}</strong>: {}.</p>",
                    if a.agrees { "agree" } else { "disagree" },
                    escape(a.source),
                    escape(&a.claim),
                    if a.criterion.is_empty() {
                        String::new()
                    } else {
                        format!(" <br>Counted as agreeing when {}.", escape(&a.criterion))
                    },
                    if a.agrees { "agrees" } else { "does not agree" },
                    escape(&a.detail)
                );
            }
            let _ = writeln!(html, "<div class=\"table\" id=\"{}-table\">", s.id);
            html.push_str(&s.table.to_html());
            html.push_str("</div>\n");
            for note in &s.notes {
                let _ = writeln!(html, "<p class=\"note\">{}</p>", escape(note));
            }
            for (stem, chart) in &s.charts {
                let [svg, png] = plot::draw(chart, dir, stem)?;
                let _ = writeln!(
                    html,
                    "<figure id=\"{stem}\"><img src=\"{stem}.svg\" alt=\"{}\"><figcaption>{} (<a href=\"{stem}.png\">PNG</a>)</figcaption></figure>",
                    escape(&chart.title),
                    escape(&chart.full_caption())
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

/// The table of contents: each section, with its table and its charts.
fn contents(sections: &[Section]) -> String {
    let mut out = String::from("<nav id=\"contents\">\n<h2>Contents</h2>\n<ol>\n");
    for s in sections {
        let _ = write!(
            out,
            "<li><a href=\"#{id}\">{}</a>: <a href=\"#{id}-table\">table</a>",
            escape(s.title),
            id = s.id
        );
        for (stem, chart) in &s.charts {
            let _ = write!(
                out,
                " \u{b7} <a href=\"#{stem}\">{}</a>",
                escape(&chart.title)
            );
        }
        out.push_str("</li>\n");
    }
    out.push_str("</ol>\n</nav>\n");
    out
}

const HTML_HEAD: &str = "<!DOCTYPE html>
<html lang=\"en\">
<head>
<meta charset=\"utf-8\">
<title>steadfast simulation report</title>
<style>
body { font-family: sans-serif; max-width: 1000px; margin: 2em auto; color: #222; }
nav ol { padding-left: 1.5em; }
nav li { margin: 0.3em 0; }
h2 a.top { font-size: 0.55em; font-weight: normal; margin-left: 0.6em; }
div.table { overflow-x: auto; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th { vertical-align: bottom; }
th.group { text-align: center; }
td { white-space: nowrap; }
thead tr:first-child th:first-child, td:first-child { text-align: left; }
figure { margin: 1em 0; }
img { max-width: 100%; }
.agree { border-left: 5px solid #2c2; padding-left: 10px; }
.disagree { border-left: 5px solid #d22; padding-left: 10px; }
.note { background: #f6f6f6; padding: 6px 10px; }
figcaption { color: #444; }
</style>
</head>
<body>
<h1>steadfast simulation report</h1>
<p>Real steadfast schedules, retry policies and controls, driven on virtual time by a discrete-event simulator.</p>
";

fn shade(from: f64, to: f64, label: impl Into<String>) -> Option<Shade> {
    Some(Shade {
        from,
        to,
        label: label.into(),
    })
}

/// `a / b` as "N.Nx", or what it means when `b` is zero.
fn times(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() {
        format!("{:.2}x", a / b)
    } else if a == 0.0 {
        "none".to_owned()
    } else {
        "n/a".to_owned()
    }
}

/// One line per series of counts: `(time at the start of bucket i, count * scale)`.
fn series_line(name: &str, series: &crate::metrics::Series, scale: f64) -> Line {
    let width = secs(series.bucket());
    Line {
        reference: false,
        name: name.to_owned(),
        points: series
            .counts()
            .iter()
            .enumerate()
            .map(|(i, &n)| (i as f64 * width, n as f64 * scale))
            .collect(),
    }
}

/// The note shown wherever client-side adaptive throttling is compared.
const THROTTLE_NOTE: &str = "client-side adaptive throttling counts requests and accepts over a \
    2-minute window, as the SRE book specifies, so after the server is back it keeps refusing \
    calls until the failures of the incident age out of that window: its slow recovery here is \
    that design at work, not a bug, and no reason to avoid the throttle (with a shorter window \
    it recovers sooner, at the cost of reacting to shorter blips).";

fn herd_section(h: &HerdResult) -> Section {
    let c = &h.config;
    let window_ms = c.window.as_secs_f64() * 1e3;
    let peak = format!("peak attempts per {window_ms:.0} ms");
    let mut table = Table::grouped(&[
        ("", &["strategy"]),
        ("attempts", &["all", "while down"]),
        (&peak, &["once back", "whole run"]),
        ("", &["all connected after (s)", "gave up"]),
    ]);
    for s in &h.strategies {
        table.row(vec![
            s.name.clone(),
            s.total_attempts.to_string(),
            s.attempts_while_down.to_string(),
            s.peak_per_window.to_string(),
            s.peak_per_window_overall.to_string(),
            s.all_connected_after_s.map_or_else(
                || format!("not all ({} of {})", s.connected, c.clients),
                |t| format!("{t:.1}"),
            ),
            s.gave_up.to_string(),
        ]);
    }
    let lines = h
        .strategies
        .iter()
        .map(|s| series_line(&s.name, &s.attempts_per_window, 1.0))
        .collect();
    let end = h
        .strategies
        .iter()
        .map(|s| {
            s.connected_per_window.counts().len() as f64 * secs(s.connected_per_window.bucket())
        })
        .fold(0.0, f64::max);
    let connected: Vec<Line> = h
        .strategies
        .iter()
        .map(|s| {
            let width = secs(s.connected_per_window.bucket());
            let mut total = 0u64;
            let mut points: Vec<(f64, f64)> = vec![(0.0, 0.0)];
            points.extend(
                s.connected_per_window
                    .counts()
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| {
                        total += n;
                        ((i + 1) as f64 * width, total as f64)
                    }),
            );
            points.push((end, total as f64));
            Line {
                reference: false,
                name: s.name.clone(),
                points,
            }
        })
        .collect();
    let zoom = herd_zoom(h);
    let outage = c.outage.as_secs_f64();
    let down = shade(0.0, outage, "outage: every connection refused");
    let slowest = h
        .strategies
        .iter()
        .max_by(|a, b| {
            a.all_connected_after_s
                .unwrap_or(f64::INFINITY)
                .total_cmp(&b.all_connected_after_s.unwrap_or(f64::INFINITY))
        })
        .map_or_else(String::new, |s| s.name.clone());
    let mut charts = vec![
        (
            "herd_attempts".to_owned(),
            Chart {
                title: format!("Connection attempts per {window_ms:.0} ms"),
                caption: format!(
                    "Connection attempts per {window_ms:.0} ms, one line per strategy, over the \
                     first {zoom:.0} s. Shaded: the outage. Look at the spikes once the server is \
                     back: without jitter the clients retry in lockstep, so the whole herd \
                     arrives at once at every backoff step; with jitter the attempts spread out \
                     and the peak is a fraction of it."
                ),
                x_label: "time (s)".to_owned(),
                y_label: format!("attempts per {window_ms:.0} ms"),
                lines,
                shade: down.clone(),
                log_y: false,
                integer_y: true,
                x_max: Some(zoom),
                first_color: 0,
            },
        ),
        (
            "herd_connected".to_owned(),
            Chart {
                title: format!("Clients connected, first {zoom:.0} s"),
                caption: format!(
                    "Clients connected over the first {zoom:.0} s (the part where the \
                     strategies differ most). The earlier and steeper a line climbs to {} \
                     clients, the sooner the herd was served; a line that stays flat is waiting \
                     out long synchronized backoff steps.",
                    c.clients
                ),
                x_label: "time (s)".to_owned(),
                y_label: "clients connected".to_owned(),
                lines: connected.clone(),
                shade: down.clone(),
                log_y: false,
                integer_y: true,
                x_max: Some(zoom),
                first_color: 0,
            },
        ),
    ];
    if end > zoom * 1.05 {
        charts.push((
            "herd_connected_all".to_owned(),
            Chart {
                title: "Clients connected, whole run".to_owned(),
                caption: format!(
                    "The same, over the whole run ({end:.0} s), to show the slowest strategy \
                     ({slowest}) to its end."
                ),
                x_label: "time (s)".to_owned(),
                y_label: "clients connected".to_owned(),
                lines: connected,
                shade: down,
                log_y: false,
                integer_y: true,
                x_max: None,
                first_color: 0,
            },
        ));
    }
    Section {
        id: "herd",
        title: "herd: reconnecting after an outage",
        about: format!(
            "{} clients lose their connection at t = 0; the server refuses connections for {:.1} s, \
             then accepts {} per {window_ms:.0} ms ({:.0} per second). Seed {}.",
            c.clients,
            outage,
            c.accepts_per_window,
            f64::from(c.accepts_per_window) / c.window.as_secs_f64(),
            c.seed
        ),
        table,
        agreement: h.agreement.clone(),
        notes: Vec::new(),
        charts,
    }
}

/// Where the zoomed herd charts stop: past the second-slowest strategy's
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

fn incident_text(kind: IncidentKind) -> String {
    match kind {
        IncidentKind::Outage => "outage".to_owned(),
        IncidentKind::Overload { capacity } => {
            format!("capacity down to {:.0} %", capacity * 100.0)
        }
    }
}

fn has_throttle<'a>(controls: impl IntoIterator<Item = &'a storm::StormControl>) -> bool {
    controls
        .into_iter()
        .any(|c| matches!(c, storm::StormControl::AdaptiveThrottle { .. }))
}

fn storm_section(r: &StormResult) -> Section {
    let c = &r.config;
    let mut table = Table::grouped(&[
        ("", &["strategy", "calls", "attempts"]),
        ("attempts/call", &["whole run", "calls in incident"]),
        ("success", &["all calls", "calls in incident"]),
        ("", &["recovered (s after incident)"]),
        ("refused locally", &["calls", "retries"]),
    ]);
    for s in &r.strategies {
        table.row(vec![
            s.name.clone(),
            s.calls.to_string(),
            s.attempts.to_string(),
            times(s.attempts as f64, s.calls as f64),
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
        .map(|s| series_line(&s.name, &s.attempts_per_bucket, per_sec))
        .collect();
    let success = r
        .strategies
        .iter()
        .map(|s| Line {
            reference: false,
            name: s.name.clone(),
            points: s
                .success_rate_per_bucket()
                .iter()
                .enumerate()
                .map(|(i, &rate)| (i as f64 * width, rate * 100.0))
                .collect(),
        })
        .collect();
    let what = incident_text(c.incident.kind);
    let (from, to) = (
        c.incident.start.as_secs_f64(),
        c.incident.end().as_secs_f64(),
    );
    let mut notes = Vec::new();
    if c.incident.kind == IncidentKind::Outage {
        notes.push(
            "in a full outage no attempt succeeds until the server is back, so retries rescue \
             only the calls whose last attempts land after it: they barely change the success \
             rate and mostly add load (compare the attempts/call columns). For retries that turn \
             a short overload into a lasting collapse, see the metastable scenario."
                .to_owned(),
        );
    }
    if has_throttle(r.config.strategies.iter().map(|s| &s.control)) {
        notes.push(THROTTLE_NOTE.to_owned());
    }
    Section {
        id: "storm",
        title: "storm: retries during an incident",
        about: format!(
            "{} clients make {:.0} calls/s for {:.0} s against a server of about {:.0} requests/s \
             ({} slots, queue {}, service {}); incident ({what}) from {from:.0} s to {to:.0} s. \
             \"Attempts/call\" counts every attempt sent, the first included; \"calls in incident\" \
             are the calls started during it. Seed {}.",
            c.clients,
            c.call_rate,
            c.duration.as_secs_f64(),
            c.server.capacity_per_sec(),
            c.server.concurrency,
            c.server.queue_limit,
            c.server.latency,
            c.seed
        ),
        table,
        agreement: r.agreement.clone(),
        notes,
        charts: vec![
            (
                "storm_attempts".to_owned(),
                Chart {
                    title: "Attempts sent to the server per second".to_owned(),
                    caption: format!(
                        "Attempts per second reaching the server, one line per strategy. \
                         Shaded: the incident ({what}). Look at the shaded span: plain retries \
                         multiply the load exactly when the server can least take it, while the \
                         budget and the token bucket hold it close to the call rate ({:.0}/s).",
                        c.call_rate
                    ),
                    x_label: "time (s)".to_owned(),
                    y_label: "attempts per second".to_owned(),
                    lines: attempts,
                    shade: shade(from, to, format!("incident: {what}")),
                    log_y: false,
                    integer_y: true,
                    x_max: None,
                    first_color: 0,
                },
            ),
            (
                "storm_success".to_owned(),
                Chart {
                    title: "Calls that succeeded, by the second they started".to_owned(),
                    caption: "The share of the calls started in each second that succeeded. \
                              Shaded: the incident. Inside it, retries rescue calls only if \
                              the server comes back before they run out of attempts; after \
                              it, a line that stays low is a strategy still refusing calls."
                        .to_owned(),
                    x_label: "time (s)".to_owned(),
                    y_label: "calls that succeeded (%)".to_owned(),
                    lines: success,
                    shade: shade(from, to, format!("incident: {what}")),
                    log_y: false,
                    integer_y: true,
                    x_max: None,
                    first_color: 0,
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

fn metastable_section(r: &MetastableResult) -> Section {
    let c = &r.config;
    let end_window = r.strategies.first().map_or(0.0, |s| s.end_window_s);
    let at_end = format!("at end (last {end_window:.0} s)");
    let mut table = Table::grouped(&[
        ("", &["strategy"]),
        (
            "goodput (calls/s)",
            &["before trigger", "in trigger", &at_end],
        ),
        ("", &["recovered (s after trigger)"]),
        ("attempts/call", &["calls in trigger", "calls after"]),
        ("served for callers gone", &["% of served"]),
        ("dropped", &["deadline passed"]),
        ("refused locally", &["calls", "retries"]),
    ]);
    for s in &r.strategies {
        table.row(vec![
            s.name.clone(),
            format!("{:.0}", s.goodput_before),
            format!("{:.0}", s.goodput_during),
            format!("{:.0}", s.goodput_end),
            fmt_opt_secs(s.recovery_s),
            format!("{:.2}x", s.amplification_during),
            format!("{:.2}x", s.amplification_after),
            format!("{:.1} %", s.wasted_share() * 100.0),
            s.dropped.to_string(),
            s.refused_locally.to_string(),
            s.retries_refused.to_string(),
        ]);
    }
    let bucket = r
        .strategies
        .first()
        .map_or(1, |s| s.successes_per_bucket.bucket());
    let per_sec = 1.0 / secs(bucket);
    let goodput = r
        .strategies
        .iter()
        .map(|s| series_line(&s.name, &s.successes_per_bucket, per_sec))
        .collect();
    let capacity = c.server.capacity_per_sec();
    let (from, to) = (c.trigger.start.as_secs_f64(), c.trigger.end().as_secs_f64());
    // The last whole bucket before the run ends (calls still finishing
    // after it would make a misleading tail).
    let last_bucket = c.duration.as_secs_f64() - secs(bucket);
    let during = match c.trigger.kind {
        IncidentKind::Outage => 0.0,
        IncidentKind::Overload { capacity: f } => capacity * f,
    };
    let mut attempts: Vec<Line> = r
        .strategies
        .iter()
        .map(|s| series_line(&s.name, &s.attempts_per_bucket, per_sec))
        .collect();
    attempts.push(Line {
        reference: true,
        name: "server capacity".to_owned(),
        points: vec![
            (0.0, capacity),
            (from, capacity),
            (from, during),
            (to, during),
            (to, capacity),
            (last_bucket, capacity),
        ],
    });
    let what = incident_text(c.trigger.kind);
    let label = format!("trigger: {what}");

    let mut notes = vec![format!(
        "\"{}\" gives each call one deadline of {} (the time a caller waits), shared by its \
         attempts and sent to the server with each; the server drops a queued request whose \
         deadline has passed instead of serving it, and no retry starts after the deadline.",
        metastable::DEADLINE,
        r.config
            .strategies
            .iter()
            .find_map(|s| s.deadline)
            .map_or_else(|| "the attempt timeout".to_owned(), |d| format!("{d:?}"))
    )];
    if has_throttle(r.config.strategies.iter().map(|s| &s.control)) {
        notes.push(THROTTLE_NOTE.to_owned());
    }
    Section {
        id: "metastable",
        title: "metastable: a short trigger, a collapse that outlives it",
        about: format!(
            "{} clients make {:.0} calls/s ({:.0} % of the server's {:.0} requests/s: {} slots, \
             service {}, a FIFO queue of {} that serves every request, waited for or not); each \
             attempt times out after {:?}, 3 attempts at most. The trigger: {what} from \
             {from:.0} s to {to:.0} s; the run ends at {:.0} s. Goodput counts calls that \
             succeeded per second; \"attempts/call\" counts every attempt sent, the first \
             included, for the calls started in (or after) the trigger. Seed {}.",
            c.clients,
            c.call_rate,
            c.load() * 100.0,
            capacity,
            c.server.concurrency,
            c.server.latency,
            c.server.queue_limit,
            c.attempt_timeout,
            c.duration.as_secs_f64(),
            c.seed
        ),
        table,
        agreement: r.agreement.clone(),
        notes,
        charts: vec![
            (
                "metastable_goodput".to_owned(),
                Chart {
                    title: "Goodput: calls that succeeded per second".to_owned(),
                    caption: format!(
                        "Calls that succeeded per second, one line per strategy. Shaded: the \
                         trigger ({what}, {:.0} s). Look right of the shading: the trigger is \
                         gone, yet plain retries stay at zero, because the server is busy with \
                         requests whose callers have timed out, and their retries keep its queue \
                         full. The retry budget, the token bucket and deadline propagation break \
                         that loop and are back within seconds.",
                        to - from
                    ),
                    x_label: "time (s)".to_owned(),
                    y_label: "successful calls per second".to_owned(),
                    lines: goodput,
                    shade: shade(from, to, label.clone()),
                    log_y: false,
                    integer_y: true,
                    x_max: Some(last_bucket),
                    first_color: 0,
                },
            ),
            (
                "metastable_attempts".to_owned(),
                Chart {
                    title: "Attempts sent to the server per second".to_owned(),
                    caption: format!(
                        "Load: attempts per second reaching the server, against its capacity \
                         (grey). Shaded: the trigger. A strategy whose load stays above the \
                         capacity after the trigger cannot recover: the queue never drains. \
                         Calls arrive at {:.0}/s; 3 attempts per call make {:.0}/s.",
                        c.call_rate,
                        c.call_rate * 3.0
                    ),
                    x_label: "time (s)".to_owned(),
                    y_label: "attempts per second".to_owned(),
                    lines: attempts,
                    shade: shade(from, to, label),
                    log_y: false,
                    integer_y: true,
                    x_max: Some(last_bucket),
                    first_color: 0,
                },
            ),
        ],
    }
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
            reference: false,
            name: s.name.clone(),
            points: s.quantile_curve.clone(),
        })
        .collect();
    Section {
        id: "tail",
        title: "tail: hedging against a heavy tail",
        about: format!(
            "{} calls at {:.0} calls/s; each request's service time is {} \
             ({} slots, queue {}). Latency percentiles come from a histogram with 3 significant \
             digits. Seed {}.",
            c.calls,
            c.call_rate,
            c.server.latency,
            c.server.concurrency,
            c.server.queue_limit,
            c.seed
        ),
        table,
        agreement: r.agreement.clone(),
        notes: Vec::new(),
        charts: vec![(
            "tail_latency".to_owned(),
            Chart {
                title: "Call latency by percentile".to_owned(),
                caption: "Call latency at each percentile, one line per strategy, on a log \
                          scale; x = 1, 2, 3 are p90, p99 and p99.9. Look at the right half: \
                          hedging pulls the slow tail down by sending a second copy of a slow \
                          call, while the left half (the typical call) does not move."
                    .to_owned(),
                x_label: "nines (1 = p90, 2 = p99, 3 = p99.9)".to_owned(),
                y_label: "latency (ms, log scale)".to_owned(),
                lines,
                shade: None,
                log_y: true,
                integer_y: false,
                x_max: None,
                first_color: 0,
            },
        )],
    }
}
