//! What the proxy did: counters shared by its connections, and the summary
//! it prints when it stops.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::duration::format_duration;

/// The proxy's counters (relaxed atomics: each is a count on its own).
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Connections closed at once (`--refuse`).
    pub refused: AtomicU64,
    /// Connections reset (`--reset`).
    pub reset: AtomicU64,
    /// Connections stalled (`--stall`).
    pub stalled: AtomicU64,
    /// Connections whose data was delayed (`--latency`, TCP mode).
    pub slowed: AtomicU64,
    /// Connections whose data was throttled (`--bandwidth`).
    pub throttled: AtomicU64,
    /// Connections to the target that failed.
    pub upstream_failed: AtomicU64,
    /// HTTP requests forwarded to the target.
    pub requests: AtomicU64,
    /// HTTP requests answered by the proxy with `--status`.
    pub statuses: AtomicU64,
    /// HTTP requests delayed before their response.
    pub delayed: AtomicU64,
    /// Bytes from the clients to the target.
    pub bytes_up: AtomicU64,
    /// Bytes from the target to the clients.
    pub bytes_down: AtomicU64,
}

/// Adds one to `counter`.
pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Adds `n` to `counter`.
pub(super) fn add(counter: &AtomicU64, n: usize) {
    counter.fetch_add(u64::try_from(n).unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// Counts a connection open for as long as it lives.
#[derive(Debug)]
pub(super) struct OpenGuard<'a>(&'a Stats);

impl<'a> OpenGuard<'a> {
    pub(super) fn new(stats: &'a Stats) -> Self {
        bump(&stats.open);
        Self(stats)
    }
}

impl Drop for OpenGuard<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Stats {
    /// The summary printed when the proxy stops, after `ran`, stopped
    /// because of `why`, with `seed`.
    #[must_use]
    pub fn summary(&self, ran: Duration, why: &str, seed: u64, http: bool) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "steadfast proxy: stopped after {} ({why})",
            format_duration(ran)
        );
        let _ = writeln!(
            out,
            "  connections  {} accepted, {} open at the stop, {} failed to reach the target",
            get(&self.accepted),
            get(&self.open),
            get(&self.upstream_failed)
        );
        let _ = writeln!(
            out,
            "  injected     {} refused, {} reset, {} stalled, {} slowed, {} throttled",
            get(&self.refused),
            get(&self.reset),
            get(&self.stalled),
            get(&self.slowed),
            get(&self.throttled)
        );
        if http {
            let _ = writeln!(
                out,
                "  requests     {} forwarded, {} answered with the injected status, {} delayed",
                get(&self.requests),
                get(&self.statuses),
                get(&self.delayed)
            );
        } else {
            let _ = writeln!(
                out,
                "  bytes        {} to the target, {} to the clients",
                get(&self.bytes_up),
                get(&self.bytes_down)
            );
        }
        let _ = write!(
            out,
            "  seed         {seed} (--seed {seed} repeats these draws)"
        );
        out
    }
}

impl Stats {
    /// The same counts as [`summary`](Self::summary), as JSON (for
    /// `--summary-json`): what a test harness compares with what its
    /// clients saw, without parsing the text.
    #[must_use]
    pub fn summary_json(
        &self,
        ran: Duration,
        why: &str,
        seed: u64,
        http: bool,
    ) -> serde_json::Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut summary = serde_json::json!({
            "ran_seconds": ran.as_secs_f64(),
            "stopped_by": why,
            "seed": seed,
            "mode": if http { "http" } else { "tcp" },
            "connections": {
                "accepted": get(&self.accepted),
                "open_at_stop": get(&self.open),
                "upstream_failed": get(&self.upstream_failed),
            },
            "injected": {
                "refused": get(&self.refused),
                "reset": get(&self.reset),
                "stalled": get(&self.stalled),
                "slowed": get(&self.slowed),
                "throttled": get(&self.throttled),
            },
        });
        let extra = if http {
            serde_json::json!({
                "requests": {
                    "forwarded": get(&self.requests),
                    "injected_status": get(&self.statuses),
                    "delayed": get(&self.delayed),
                }
            })
        } else {
            serde_json::json!({
                "bytes": {
                    "to_target": get(&self.bytes_up),
                    "to_clients": get(&self.bytes_down),
                }
            })
        };
        if let (Some(all), serde_json::Value::Object(more)) = (summary.as_object_mut(), extra) {
            all.extend(more);
        }
        summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_count() {
        let stats = Stats::default();
        bump(&stats.accepted);
        bump(&stats.accepted);
        bump(&stats.reset);
        add(&stats.bytes_down, 1234);
        {
            let _open = OpenGuard::new(&stats);
            assert_eq!(stats.open.load(Ordering::Relaxed), 1);
        }
        let text = stats.summary(Duration::from_secs(3), "Ctrl-C", 42, false);
        assert!(
            text.starts_with("steadfast proxy: stopped after 3s (Ctrl-C)"),
            "{text}"
        );
        assert!(text.contains("2 accepted, 0 open at the stop"), "{text}");
        assert!(text.contains("0 refused, 1 reset, 0 stalled"), "{text}");
        assert!(text.contains("1234 to the clients"), "{text}");
        assert!(text.contains("--seed 42"), "{text}");
        assert!(!text.contains("requests"));
        assert!(
            stats
                .summary(Duration::ZERO, "x", 1, true)
                .contains("requests")
        );
    }

    #[test]
    fn the_json_summary_has_the_same_counts() {
        let stats = Stats::default();
        bump(&stats.accepted);
        bump(&stats.reset);
        add(&stats.bytes_down, 1234);
        let json = stats.summary_json(Duration::from_secs(3), "Ctrl-C", 42, false);
        assert_eq!(json["connections"]["accepted"], 1);
        assert_eq!(json["injected"]["reset"], 1);
        assert_eq!(json["bytes"]["to_clients"], 1234);
        assert_eq!(
            (json["seed"].as_u64(), json["mode"].as_str()),
            (Some(42), Some("tcp"))
        );
        assert_eq!(json["stopped_by"], "Ctrl-C");
        assert!(json.get("requests").is_none());
        let http = stats.summary_json(Duration::ZERO, "x", 1, true);
        assert_eq!(http["requests"]["forwarded"], 0);
        assert!(http.get("bytes").is_none());
    }
}
