//! What one soak run found: counts of outcomes, the worst lateness, the
//! resources before and after, and every broken invariant (counted by kind,
//! with the first few examples).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Examples kept per kind of violation.
const EXAMPLES: usize = 3;

/// A run's findings.
#[derive(Debug, Default)]
pub struct Findings {
    pub title: String,
    pub calls: u64,
    /// Attempts the server received.
    pub server_attempts: u64,
    /// How the calls ended, by kind.
    pub outcomes: BTreeMap<String, u64>,
    /// Broken invariants, by kind: how many, and the first examples.
    pub violations: BTreeMap<&'static str, (u64, Vec<String>)>,
    /// The latest a call returned after its deadline.
    pub worst_late: Duration,
    /// Calls that returned after their deadline (by any amount).
    pub late_calls: u64,
    /// How late each of those was.
    pub lateness: Vec<Duration>,
    /// The runtime's own worst timer lag during the run.
    pub timer_lag: Duration,
    /// File descriptors before the client was made, and after it was
    /// dropped and the servers went quiet.
    pub fds: Option<(usize, usize)>,
    /// Live client-runtime tasks, likewise.
    pub tasks: (usize, usize),
    pub wall: Duration,
}

impl Findings {
    pub fn new(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            ..Self::default()
        }
    }

    /// Counts an outcome of a call.
    pub fn outcome(&mut self, kind: impl Into<String>) {
        *self.outcomes.entry(kind.into()).or_default() += 1;
    }

    /// Records a broken invariant.
    pub fn violation(&mut self, kind: &'static str, example: impl FnOnce() -> String) {
        let entry = self.violations.entry(kind).or_default();
        entry.0 += 1;
        if entry.1.len() < EXAMPLES {
            entry.1.push(example());
        }
    }

    /// Records how late a call returned (`elapsed` past `deadline`).
    pub fn returned(&mut self, elapsed: Duration, deadline: Duration) {
        if let Some(late) = elapsed.checked_sub(deadline).filter(|l| !l.is_zero()) {
            self.late_calls += 1;
            self.worst_late = self.worst_late.max(late);
            self.lateness.push(late);
        }
    }

    /// Attempts per call, as the server counted them.
    pub fn amplification(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let ratio = self.server_attempts as f64 / self.calls.max(1) as f64;
        ratio
    }

    /// The `q` quantile (0 to 1) of how late the late calls were.
    pub fn late_quantile(&self, q: f64) -> Duration {
        let mut all = self.lateness.clone();
        all.sort_unstable();
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let i = ((all.len().saturating_sub(1)) as f64 * q).round() as usize;
        all.get(i).copied().unwrap_or_default()
    }

    pub fn violations(&self) -> u64 {
        self.violations.values().map(|(n, _)| n).sum()
    }
}

impl fmt::Display for Findings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "== {}", self.title)?;
        writeln!(
            f,
            "   {} calls, {} attempts at the server ({:.3} per call), {:.1} s",
            self.calls,
            self.server_attempts,
            self.amplification(),
            self.wall.as_secs_f64()
        )?;
        for (kind, n) in &self.outcomes {
            writeln!(f, "   {n:>8}  {kind}")?;
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        writeln!(
            f,
            "   latest return past the deadline: {:.1} ms ({} calls late at all: median {:.2} ms, p99 {:.2} ms); the runtime's own worst timer lag: {:.1} ms",
            ms(self.worst_late),
            self.late_calls,
            ms(self.late_quantile(0.5)),
            ms(self.late_quantile(0.99)),
            ms(self.timer_lag)
        )?;
        if let Some((before, after)) = self.fds {
            writeln!(f, "   file descriptors: {before} before, {after} after")?;
        }
        writeln!(
            f,
            "   live tasks: {} before, {} after",
            self.tasks.0, self.tasks.1
        )?;
        if self.violations.is_empty() {
            writeln!(f, "   every invariant held")?;
        }
        for (kind, (n, examples)) in &self.violations {
            writeln!(f, "   VIOLATED {n} times: {kind}")?;
            for e in examples {
                writeln!(f, "      e.g. {e}")?;
            }
        }
        Ok(())
    }
}
