//! What the soak measures of the process itself: open file descriptors,
//! live tasks, panics, and the runtime's own timer lag (how late a plain
//! `tokio::time::sleep` wakes on this machine, under this load), which is
//! the floor under any deadline the library can keep.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::findings::Findings;

/// Open file descriptors of this process (Linux: `/proc/self/fd`), or
/// `None` where that is not readable.
pub fn open_fds() -> Option<usize> {
    std::fs::read_dir("/proc/self/fd").ok().map(Iterator::count)
}

/// Live tasks of the current tokio runtime.
pub fn live_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// What a soak run watches from before its client is made to after it is
/// dropped: the resources, the runtime's timer lag, the wall time.
#[derive(Debug)]
pub struct Watch {
    baseline: Baseline,
    lag: TimerLag,
    started: Instant,
}

impl Watch {
    pub fn start() -> Self {
        Self {
            baseline: Baseline::take(),
            lag: TimerLag::start(),
            started: Instant::now(),
        }
    }

    /// Records the wall time and the timer lag, then waits for the
    /// resources to be back (the client is gone: its connections close, the
    /// server's connection tasks see the close and end).
    pub async fn finish(self, server_open: &AtomicUsize, findings: &mut Findings) {
        findings.wall = self.started.elapsed();
        findings.timer_lag = self.lag.finish().await;
        self.baseline.check(server_open, findings).await;
    }
}

/// Descriptors and live tasks before a client is made, to hold the
/// counts after it is dropped against.
#[derive(Debug, Clone, Copy)]
pub struct Baseline {
    fds: Option<usize>,
    tasks: usize,
}

impl Baseline {
    pub fn take() -> Self {
        Self {
            fds: open_fds(),
            tasks: live_tasks(),
        }
    }

    /// Waits (at most 10 s) until the descriptors, the live tasks and the
    /// server's open connections are back to their start; records what it
    /// found, and a violation if they are not.
    pub async fn check(self, server_open: &AtomicUsize, findings: &mut Findings) {
        let quiet = settle(Duration::from_secs(10), || {
            server_open.load(Ordering::SeqCst) == 0
                && open_fds() == self.fds
                && live_tasks() == self.tasks
        })
        .await;
        findings.fds = self.fds.zip(open_fds());
        findings.tasks = (self.tasks, live_tasks());
        if !quiet {
            let state = format!(
                "fds {:?}, tasks {:?}, server connections open {}",
                findings.fds,
                findings.tasks,
                server_open.load(Ordering::SeqCst)
            );
            findings.violation(
                "descriptors, tasks or connections not back to their start",
                || state,
            );
        }
    }
}

/// Waits (in real time, at most `limit`) until `done` holds; whether it did.
pub async fn settle(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts every panic in the process (and still prints it).
pub fn count_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));
}

/// Panics so far.
pub fn panics() -> usize {
    PANICS.load(Ordering::SeqCst)
}

/// Tasks that sleep 1 ms again and again and record how late they wake:
/// several, because a task woken in the same tick as many others waits its
/// turn behind them, and one probe sees only its own place in that queue.
#[derive(Debug)]
pub struct TimerLag {
    worst_micros: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Probe tasks per [`TimerLag`].
const PROBES: usize = 8;

impl TimerLag {
    /// Starts the probes on the current runtime.
    pub fn start() -> Self {
        let worst_micros = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..PROBES)
            .map(|_| {
                let worst = Arc::clone(&worst_micros);
                let stop = Arc::clone(&stop);
                tokio::spawn(async move {
                    let period = Duration::from_millis(1);
                    while !stop.load(Ordering::Relaxed) {
                        let asked = Instant::now() + period;
                        tokio::time::sleep_until(asked.into()).await;
                        let late = Instant::now().saturating_duration_since(asked);
                        let micros = u64::try_from(late.as_micros()).unwrap_or(u64::MAX);
                        worst.fetch_max(micros, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        Self {
            worst_micros,
            stop,
            tasks,
        }
    }

    /// Stops the probes; the latest any of them woke.
    pub async fn finish(self) -> Duration {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
        Duration::from_micros(self.worst_micros.load(Ordering::Relaxed))
    }
}
