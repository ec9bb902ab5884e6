//! `steadfast run`: the program, retried by the core's blocking executor.
//!
//! This module holds no retry loop: it gives [`retry_blocking`] an
//! operation (one run of the program, see [`crate::child`]), a classifier on
//! exit codes, a notify hook that prints one line per retry, a clock whose
//! waits draw a live countdown on a terminal, and the Ctrl-C token.
//!
//! [`retry_blocking`]: steadfast::retry::BlockingRetryable::retry_blocking

use std::cell::Cell;
use std::fmt;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use steadfast::backoff::Schedule;
use steadfast::clock::{Clock, SystemClock};
use steadfast::retry::{BlockingRetryable, Notice};
use steadfast::{Attempt, CancelToken, Deadline, RetryPolicy, StopReason, Verdict};

use crate::interrupt::Interrupt;

use crate::child::{self, Failure, Limit, LimitKind, Stopping};
use crate::cli::RunArgs;
use crate::codes::CodeSet;
use crate::duration::format_duration;
use crate::exit;
use crate::input::{Input, StdinMode};

/// Which failures are retried: `--retry-on` and `--stop-on`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExitRules {
    /// Retry only these codes (`None`: any non-zero code).
    pub retry_on: Option<CodeSet>,
    /// Stop at once on these codes (wins over `retry_on`).
    pub stop_on: Option<CodeSet>,
}

impl ExitRules {
    /// The verdict on one attempt: success for exit 0; for a code (`128 + N`
    /// for signal `N`), stop if `stop_on` has it, stop if `retry_on` is given
    /// and lacks it, retry otherwise; retry an attempt that ran past its
    /// `--attempt-timeout` (or the deadline: the policy then stops); stop
    /// when the program cannot be started, on Ctrl-C, or when waiting fails.
    #[must_use]
    pub fn verdict(&self, outcome: &Result<(), Failure>) -> Verdict {
        let code = match outcome {
            Ok(()) => return Verdict::Success,
            Err(Failure::TimedOut(_) | Failure::DeadlineExceeded) => return Verdict::Retry,
            Err(Failure::Interrupted(_) | Failure::Spawn { .. } | Failure::Wait(_)) => {
                return Verdict::Stop;
            }
            Err(f @ (Failure::Exit(_) | Failure::Signal(_))) => f.exit_code(),
        };
        if self.stop_on.is_some_and(|s| s.contains(code)) {
            return Verdict::Stop;
        }
        match self.retry_on {
            Some(set) if !set.contains(code) => Verdict::Stop,
            _ => Verdict::Retry,
        }
    }
}

/// The exit code of `steadfast run` for the executor's result: 0 on
/// success; `128 + N` when interrupted by signal `N` (130 for Ctrl-C); 124
/// when the deadline ended the run; otherwise the last attempt's code (see
/// [`Failure::exit_code`]).
#[must_use]
pub fn exit_code(
    result: &Result<(), steadfast::RetryError<Failure>>,
    interrupt: &Interrupt,
) -> i32 {
    match result {
        Ok(()) => 0,
        Err(_) if interrupt.token().is_cancelled() => interrupt.exit_code(),
        Err(e) if e.reason() == StopReason::Deadline => exit::TIMEOUT,
        Err(e) => e.last_error().map_or(exit::RUN_ERROR, Failure::exit_code),
    }
}

/// Where the retry lines go: stderr, with a countdown when it is a terminal.
#[derive(Debug)]
struct Reporter {
    quiet: bool,
    terminal: bool,
    /// The line of the retry being waited for, without its delay.
    pending: Mutex<Option<String>>,
    /// The last attempt that ended with a status of the program's own (an
    /// exit code or a signal), and that status: the final message gives it
    /// when the deadline then stops an attempt.
    last_status: Mutex<Option<(u32, String)>>,
}

impl Reporter {
    fn retrying(&self, attempt: u32, max: u32, failure: Option<&Failure>, delay: Duration) {
        if let Some(f @ (Failure::Exit(_) | Failure::Signal(_))) = failure {
            *self
                .last_status
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some((attempt, f.to_string()));
        }
        if self.quiet {
            return;
        }
        let what = failure.map_or_else(|| "failed".to_owned(), |f| format!("failed ({f})"));
        let prefix = format!("attempt {attempt}/{max} {what}; retrying in ");
        if self.terminal {
            *self.pending.lock().unwrap_or_else(PoisonError::into_inner) = Some(prefix);
        } else {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "{prefix}{}", format_duration(delay));
        }
    }

    fn message(&self, text: fmt::Arguments<'_>) {
        if !self.quiet {
            let _ = writeln!(std::io::stderr().lock(), "steadfast: {text}");
        }
    }
}

/// The system clock, whose waits draw a countdown of the pending retry line
/// on a terminal.
#[derive(Debug, Clone)]
struct CountdownClock {
    reporter: Arc<Reporter>,
}

impl CountdownClock {
    fn wait(&self, duration: Duration, cancel: Option<&CancelToken>) -> bool {
        let pending = self
            .reporter
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let wait = |d: Duration| match cancel {
            Some(token) => token.wait_timeout(d),
            None => {
                SystemClock.sleep_blocking(d);
                false
            }
        };
        let Some(prefix) = pending else {
            return wait(duration);
        };
        const TICK: Duration = Duration::from_millis(100);
        let end = Instant::now().checked_add(duration);
        let mut err = std::io::stderr();
        let cancelled = loop {
            let left = end.map_or(duration, |e| e.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                break false;
            }
            let _ = write!(err, "\r\x1b[K{prefix}{}", format_duration(left));
            let _ = err.flush();
            if wait(left.min(TICK)) {
                break true;
            }
        };
        // Leave the plain line behind, as without a terminal.
        let _ = writeln!(err, "\r\x1b[K{prefix}{}", format_duration(duration));
        cancelled
    }
}

impl Clock for CountdownClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep_blocking(&self, duration: Duration) {
        let _ = self.wait(duration, None);
    }

    fn sleep_blocking_cancellable(&self, duration: Duration, cancel: &CancelToken) -> bool {
        self.wait(duration, Some(cancel))
    }
}

/// Prepares the attempts' standard input (see [`Input::prepare`]) on a
/// thread of its own, so that an interruption while it reads (a pipe that
/// has not ended yet) stops the run at once; `None` when interrupted.
fn read_input(args: &RunArgs, interrupt: &Interrupt) -> Option<std::io::Result<Input>> {
    let (mode, limit) = (args.stdin, args.stdin_limit);
    let terminal = std::io::stdin().is_terminal();
    if terminal || mode == StdinMode::Once {
        // Nothing to read now.
        return Some(Input::prepare(mode, limit, terminal, std::io::empty()));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    // Not joined when interrupted: the process exits, ending the read.
    let spawned = std::thread::Builder::new()
        .name("steadfast-stdin-read".to_owned())
        .spawn(move || {
            let _ = tx.send(Input::prepare(mode, limit, false, std::io::stdin().lock()));
        });
    if let Err(e) = spawned {
        return Some(Err(e));
    }
    loop {
        match rx.recv_timeout(Duration::from_millis(10)) {
            Ok(result) => return Some(result),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if interrupt.token().is_cancelled() {
                    return None;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Some(Err(std::io::Error::other("the reading thread ended")));
            }
        }
    }
}

/// Runs `steadfast run`, stopped by `interrupt` (Ctrl-C, SIGTERM, SIGHUP);
/// returns the exit code.
pub fn run(args: &RunArgs, interrupt: &Interrupt) -> i32 {
    match crate::backoff::build(&args.backoff, args.seed) {
        Ok(backoff) => run_with_schedule(args, backoff, interrupt),
        Err(e) => {
            if !args.quiet {
                let _ = writeln!(std::io::stderr().lock(), "steadfast: {e}");
            }
            exit::RUN_ERROR
        }
    }
}

/// Runs `steadfast run` with `schedule` (built from `--backoff`), stopped
/// by `interrupt`; returns the exit code.
pub fn run_with_schedule<S: Schedule>(args: &RunArgs, schedule: S, interrupt: &Interrupt) -> i32 {
    let cancel = interrupt.token();
    let reporter = Arc::new(Reporter {
        quiet: args.quiet,
        terminal: std::io::stderr().is_terminal(),
        pending: Mutex::new(None),
        last_status: Mutex::new(None),
    });
    let Some((program, program_args)) = args.command.split_first() else {
        reporter.message(format_args!("no program given"));
        return exit::RUN_ERROR;
    };
    let input = match read_input(args, interrupt) {
        Some(Ok(input)) => input,
        Some(Err(e)) => {
            reporter.message(format_args!("cannot read standard input: {e}"));
            return exit::RUN_ERROR;
        }
        None => {
            reporter.message(format_args!(
                "interrupted by signal {} while reading standard input",
                interrupt.forward_signal()
            ));
            return interrupt.exit_code();
        }
    };
    // Input that cannot be replayed allows one attempt only.
    let no_retry = input.not_replayable().filter(|_| args.attempts > 1);
    if let Some(why) = no_retry
        && args.stdin == StdinMode::Replay
    {
        reporter.message(format_args!("{why}; the program will not be retried"));
    }
    let stopping = Stopping {
        kill_after: args.kill_after,
        own_group: !args.foreground,
    };
    if stopping.own_group {
        child::init();
    }
    let mut builder = RetryPolicy::with_schedule(schedule)
        .max_attempts(if no_retry.is_some() { 1 } else { args.attempts })
        // The schedule's own cap holds; the policy adds none, so that
        // `steadfast schedule` shows the delays `run` waits.
        .max_delay(Duration::MAX);
    if let Some(t) = args.attempt_timeout {
        builder = builder.attempt_timeout(t);
    }
    let policy = match builder.build() {
        Ok(p) => p,
        Err(e) => {
            reporter.message(format_args!("{e}"));
            return exit::RUN_ERROR;
        }
    };
    let deadline = args.deadline.map(|d| Deadline::after(Instant::now(), d));
    let rules = ExitRules {
        retry_on: args.retry_on,
        stop_on: args.stop_on,
    };
    let max = args.attempts;
    let notify_reporter = Arc::clone(&reporter);
    // The executor names the operation with a `&'static str`; one small
    // string per process, for the final "PROGRAM failed after ..." line.
    let name: &'static str = Box::leak(program.to_string_lossy().into_owned().into_boxed_str());

    let operation = |attempt: Attempt| {
        let limit = attempt.deadline.map(|at| {
            let kind = if deadline == Some(at) {
                LimitKind::Deadline
            } else {
                LimitKind::AttemptTimeout
            };
            Limit {
                at: at.instant(),
                kind,
                length: match kind {
                    LimitKind::Deadline => args.deadline.unwrap_or_default(),
                    LimitKind::AttemptTimeout => args.attempt_timeout.unwrap_or_default(),
                },
            }
        });
        child::run_once(program, program_args, limit, interrupt, &input, stopping)
    };
    // Whether the last attempt's failure was one the rules would retry.
    let would_retry = Cell::new(false);
    let mut retry = operation
        .retry_blocking(&policy)
        .classify(|outcome: &Result<(), Failure>| {
            let verdict = rules.verdict(outcome);
            would_retry.set(verdict == Verdict::Retry);
            verdict
        })
        .notify(move |n: &Notice<'_, Failure>| {
            notify_reporter.retrying(n.attempt, max, n.error, n.wait);
        })
        .clock(CountdownClock {
            reporter: Arc::clone(&reporter),
        })
        .cancel_on(cancel.clone())
        .name(name);
    if let Some(d) = deadline {
        retry = retry.deadline(d);
    }
    let result = retry.call();
    let code = exit_code(&result, interrupt);
    if let Err(e) = &result {
        if cancel.is_cancelled() {
            reporter.message(format_args!(
                "interrupted by signal {}",
                interrupt.forward_signal()
            ));
        } else if matches!(e.last_error(), Some(Failure::Spawn { .. })) {
            // Not worth the attempt count: say what is wrong.
            if let Some(f) = e.last_error() {
                reporter.message(format_args!("{f}"));
            }
        } else {
            reporter.message(format_args!("{e}"));
            // The deadline stopped the last attempt: its "deadline exceeded"
            // hides how the program itself last ended, so say that too.
            if matches!(e.last_error(), Some(Failure::DeadlineExceeded))
                && let Some((attempt, status)) = reporter
                    .last_status
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
            {
                reporter.message(format_args!(
                    "the deadline stopped attempt {}; the program's last status was {status} (attempt {attempt})",
                    e.attempts()
                ));
            }
            if let Some(why) = no_retry.filter(|_| would_retry.get()) {
                reporter.message(format_args!("not retried: {why}"));
            }
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(s: &str) -> Option<CodeSet> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn verdicts() {
        let any = ExitRules::default();
        assert_eq!(any.verdict(&Ok(())), Verdict::Success);
        assert_eq!(any.verdict(&Err(Failure::Exit(1))), Verdict::Retry);
        assert_eq!(any.verdict(&Err(Failure::Signal(9))), Verdict::Retry);
        assert_eq!(
            any.verdict(&Err(Failure::TimedOut(Duration::ZERO))),
            Verdict::Retry
        );
        assert_eq!(any.verdict(&Err(Failure::Interrupted(2))), Verdict::Stop);
        let rules = ExitRules {
            retry_on: codes("1-10,137"),
            stop_on: codes("3"),
        };
        assert_eq!(rules.verdict(&Err(Failure::Exit(2))), Verdict::Retry);
        assert_eq!(rules.verdict(&Err(Failure::Exit(3))), Verdict::Stop);
        assert_eq!(rules.verdict(&Err(Failure::Exit(11))), Verdict::Stop);
        assert_eq!(rules.verdict(&Err(Failure::Signal(9))), Verdict::Retry);
        assert_eq!(rules.verdict(&Err(Failure::Signal(15))), Verdict::Stop);
    }
}
