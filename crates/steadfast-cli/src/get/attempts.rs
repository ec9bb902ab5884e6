//! What `steadfast get` shows while it works: with `-v`, one line per
//! attempt on standard error (from the client's typed attempt hook); on a
//! terminal, a progress line while it waits between attempts. The hook also
//! keeps the last attempt's `Retry-After` when it did not fit the deadline,
//! so that the final message can say why the call stopped at once.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use steadfast::policy::Wait;
use steadfast_http::{AttemptEnd, AttemptEvent};

/// The progress line's state, shared with its ticker thread.
#[derive(Debug)]
struct Progress {
    /// Since when, and after what, the call is waiting.
    waiting: Option<(Instant, String)>,
    /// A line is on the screen.
    drawn: bool,
    /// The call is over: the ticker stops.
    done: bool,
    /// The last attempt's `Retry-After`, if it did not fit the deadline.
    past_deadline: Option<Duration>,
}

static PROGRESS: Mutex<Progress> = Mutex::new(Progress {
    waiting: None,
    drawn: false,
    done: false,
    past_deadline: None,
});

/// The client's attempt hook: it shows attempts (`verbose`) and a progress
/// line (`progress`: standard error is a terminal), and keeps a hint that
/// did not fit the deadline (see [`past_deadline`]).
pub(super) fn hook(
    verbose: bool,
    progress: bool,
) -> impl Fn(&AttemptEvent<'_>) + Send + Sync + 'static {
    if progress {
        std::thread::spawn(tick);
    }
    move |event: &AttemptEvent<'_>| {
        if let Ok(mut p) = PROGRESS.lock() {
            // An abandoned copy of a hedged call (dropped as the call
            // stops) leaves the last hint alone.
            if !matches!(event.end, AttemptEnd::Abandoned) {
                p.past_deadline = match event.end {
                    AttemptEnd::Failed {
                        retry_after: Some((asked, Wait::PastDeadline)),
                        ..
                    } => Some(round_ms(asked)),
                    _ => None,
                };
            }
            if !verbose && !progress {
                return;
            }
            clear(&mut p);
            p.waiting = (progress && event.end.failed()).then(|| {
                let what = match event.end {
                    AttemptEnd::Failed {
                        status: Some(s), ..
                    } => format!("attempt {} got {}", event.number, s.as_u16()),
                    _ => format!("attempt {} failed", event.number),
                };
                (Instant::now(), what)
            });
        }
        if verbose {
            eprintln!("steadfast get: {}", line(event));
        }
    }
}

/// The server's `Retry-After` on the last attempt, when it did not fit the
/// deadline (the call then stopped without waiting).
pub(super) fn past_deadline() -> Option<Duration> {
    PROGRESS.lock().ok().and_then(|p| p.past_deadline)
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

/// `attempt 2 (after waiting 100ms): 503 Service Unavailable; Retry-After 2s honoured`
fn line(event: &AttemptEvent<'_>) -> String {
    let mut line = format!("attempt {}", event.number);
    if !event.waited.is_zero() {
        let _ = write!(
            line,
            " (after waiting {})",
            crate::duration::format_duration(round_ms(event.waited))
        );
    }
    line.push_str(": ");
    match event.end {
        AttemptEnd::Succeeded { status }
        | AttemptEnd::Failed {
            status: Some(status),
            ..
        } => {
            let _ = write!(
                line,
                "{} {}",
                status.as_u16(),
                status.canonical_reason().unwrap_or("")
            );
        }
        AttemptEnd::Failed {
            error: Some(error), ..
        } => line.push_str(error),
        AttemptEnd::Failed { .. } => line.push_str("failed"),
        AttemptEnd::Abandoned => line.push_str("timed out or cancelled"),
        _ => line.push_str("ended"),
    }
    if let AttemptEnd::Failed {
        retry_after: Some((asked, wait)),
        ..
    } = event.end
    {
        let how = match wait {
            Wait::AsWanted(_) => "honoured",
            Wait::Capped(_) => "clamped to the max delay",
            Wait::PastDeadline => "does not fit the deadline: not waited",
        };
        let _ = write!(
            line,
            "; Retry-After {} {how}",
            crate::duration::format_duration(round_ms(asked))
        );
    }
    line.trim_end().to_owned()
}

/// `d` to the millisecond, as the lines show it.
fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
