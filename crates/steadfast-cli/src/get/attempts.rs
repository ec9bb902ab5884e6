//! What `steadfast get` shows while it works: with `-v`, one line per
//! attempt on standard error (from the client's `tracing` events); on a
//! terminal, a progress line while it waits between attempts.

use std::fmt::{self, Write as _};
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Metadata, Subscriber};

/// The progress line's state, shared with its ticker thread.
#[derive(Debug)]
struct Progress {
    /// Since when, and after what, the call is waiting.
    waiting: Option<(Instant, String)>,
    /// A line is on the screen.
    drawn: bool,
    /// The call is over: the ticker stops.
    done: bool,
}

static PROGRESS: Mutex<Progress> = Mutex::new(Progress {
    waiting: None,
    drawn: false,
    done: false,
});

/// Shows attempts (`verbose`) and a progress line (`progress`: standard
/// error is a terminal) for the calls made on this thread while the guard
/// lives.
pub(super) fn install(verbose: bool, progress: bool) -> Option<DefaultGuard> {
    if !verbose && !progress {
        return None;
    }
    if progress {
        std::thread::spawn(tick);
    }
    Some(tracing::subscriber::set_default(Attempts {
        verbose,
        progress,
    }))
}

/// The call is over: clears the progress line and stops its ticker.
pub(super) fn finish() {
    if let Ok(mut p) = PROGRESS.lock() {
        p.done = true;
        p.waiting = None;
        clear(&mut p);
    }
}

fn clear(p: &mut Progress) {
    if p.drawn {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
        p.drawn = false;
    }
}

/// Redraws the progress line every 100 ms while the call waits.
fn tick() {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let Ok(mut p) = PROGRESS.lock() else { return };
        if p.done {
            return;
        }
        if let Some((since, what)) = &p.waiting {
            let mut err = std::io::stderr().lock();
            let _ = write!(
                err,
                "\r\x1b[2Ksteadfast get: {what}; waiting {:.1}s",
                since.elapsed().as_secs_f64()
            );
            let _ = err.flush();
            p.drawn = true;
        }
    }
}

/// A subscriber for the client's per-attempt events only.
struct Attempts {
    verbose: bool,
    progress: bool,
}

impl Subscriber for Attempts {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("steadfast_http") && metadata.is_event()
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let Some(attempt) = fields.attempt else {
            return;
        };
        let line = fields.line(attempt);
        if let Ok(mut p) = PROGRESS.lock() {
            clear(&mut p);
            p.waiting = (self.progress && fields.failed()).then(|| {
                let what = match fields.status {
                    Some(s) => format!("attempt {attempt} got {s}"),
                    None => format!("attempt {attempt} failed"),
                };
                (Instant::now(), what)
            });
        }
        if self.verbose {
            eprintln!("steadfast get: {line}");
        }
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// The fields of one attempt event.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    attempt: Option<u64>,
    status: Option<u64>,
    error: Option<String>,
    waited_ms: Option<u64>,
    retry_after_ms: Option<u64>,
    clamped: Option<bool>,
}

impl Fields {
    fn failed(&self) -> bool {
        self.message.contains("failed")
    }

    /// `attempt 2 (after 100ms): 503 Service Unavailable; Retry-After 2s honoured`
    fn line(&self, attempt: u64) -> String {
        let mut line = format!("attempt {attempt}");
        if let Some(ms) = self.waited_ms.filter(|ms| *ms > 0) {
            let _ = write!(line, " (after waiting {})", ms_text(ms));
        }
        line.push_str(": ");
        if let Some(status) = self.status {
            let reason = u16::try_from(status)
                .ok()
                .and_then(|s| http::StatusCode::from_u16(s).ok())
                .and_then(|s| s.canonical_reason())
                .unwrap_or("");
            let _ = write!(line, "{status} {reason}");
        } else if let Some(e) = &self.error {
            line.push_str(e);
        } else if self.message.contains("abandoned") {
            line.push_str("timed out or cancelled");
        } else {
            line.push_str(self.message.trim_start_matches("steadfast-http: "));
        }
        if let Some(ms) = self.retry_after_ms {
            let how = if self.clamped == Some(true) {
                "clamped to the max delay"
            } else {
                "honoured"
            };
            let _ = write!(line, "; Retry-After {} {how}", ms_text(ms));
        }
        line.trim_end().to_owned()
    }
}

fn ms_text(ms: u64) -> String {
    crate::duration::format_duration(Duration::from_millis(ms))
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "attempt" => self.attempt = Some(value),
            "status" => self.status = Some(value),
            "waited_ms" => self.waited_ms = Some(value),
            "retry_after_ms" => self.retry_after_ms = Some(value),
            _ => {}
        }
    }

    fn record_u128(&mut self, field: &Field, value: u128) {
        self.record_u64(field, u64::try_from(value).unwrap_or(u64::MAX));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(v) = u64::try_from(value) {
            self.record_u64(field, v);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "retry_after_clamped" {
            self.clamped = Some(value);
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            "error" => self.error = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}
