//! One attempt of `steadfast run`: start the program directly (no shell),
//! wait for it with an optional time limit, stop it when the limit passes or
//! the run is cancelled, and say how it ended.
//!
//! Stopping a child: on a time limit it gets `SIGTERM` and, if it is still
//! there after [`GRACE`], `SIGKILL`; on an interruption (Ctrl-C, SIGTERM,
//! SIGHUP) it gets the signal steadfast received, then `SIGKILL` after
//! [`GRACE`]. Either way it is waited for, so no zombie is left. On
//! platforms without signals the child is killed at once.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::exit;
use crate::interrupt::Interrupt;

/// How long a child has to exit after the first signal before it is killed.
pub const GRACE: Duration = Duration::from_secs(2);

/// The longest pause between two checks on a running child.
const MAX_POLL: Duration = Duration::from_millis(20);

/// Why an attempt is limited in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// `--attempt-timeout`.
    AttemptTimeout,
    /// `--deadline` (the whole run's time is up).
    Deadline,
}

/// A time limit on one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// When the child must be done.
    pub at: Instant,
    /// What the limit stands for.
    pub kind: LimitKind,
    /// The length of the limit, for messages.
    pub length: Duration,
}

/// How one attempt ended, when it did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// The program exited with this non-zero code.
    Exit(i32),
    /// The program was ended by this signal (not by us).
    Signal(i32),
    /// We stopped it: it ran past its `--attempt-timeout`.
    TimedOut(Duration),
    /// We stopped it: the run's `--deadline` passed.
    DeadlineExceeded,
    /// We stopped it: steadfast was interrupted by this signal (2 for Ctrl-C).
    Interrupted(i32),
    /// The program could not be started.
    Spawn {
        /// The program as given.
        program: OsString,
        /// The operating system's error.
        error: io::Error,
    },
    /// Waiting for or stopping the program failed.
    Wait(io::Error),
}

impl Failure {
    /// The exit code `steadfast run` ends with when this is the last
    /// attempt: the program's own code, `128 + N` for signal `N`, 124 for a
    /// time limit, `128 + N` when steadfast was interrupted by signal `N`
    /// (130 for Ctrl-C), 127 (not found) or 126 (cannot execute)
    /// when it could not be started, 1 when waiting failed.
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Exit(code) => *code,
            Self::Signal(sig) => 128 + sig,
            Self::TimedOut(_) | Self::DeadlineExceeded => exit::TIMEOUT,
            Self::Interrupted(sig) => 128 + sig,
            Self::Spawn { error, .. } => match error.kind() {
                io::ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_EXECUTE,
            },
            Self::Wait(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exit(code) => write!(f, "exit {code}"),
            Self::Signal(sig) => write!(f, "killed by signal {sig}"),
            Self::TimedOut(limit) => write!(
                f,
                "timed out after {}",
                crate::duration::format_duration(*limit)
            ),
            Self::DeadlineExceeded => f.write_str("deadline exceeded"),
            Self::Interrupted(sig) => write!(f, "interrupted by signal {sig}"),
            Self::Spawn { program, error } => {
                let what = match error.kind() {
                    io::ErrorKind::NotFound => "command not found".to_owned(),
                    io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
                    _ => error.to_string(),
                };
                write!(f, "cannot run {}: {what}", program.to_string_lossy())
            }
            Self::Wait(e) => write!(f, "waiting for the program failed: {e}"),
        }
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn { error, .. } | Self::Wait(error) => Some(error),
            _ => None,
        }
    }
}

/// The failure an exit status stands for (`None` for success).
#[must_use]
pub fn failure_of(status: ExitStatus) -> Option<Failure> {
    if status.success() {
        return None;
    }
    if let Some(code) = status.code() {
        return Some(Failure::Exit(code));
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return Some(Failure::Signal(sig));
        }
    }
    Some(Failure::Exit(1))
}

/// Runs `program` with `args` once, its standard streams inherited, until it
/// exits, `limit` passes or `interrupt` fires.
///
/// # Errors
/// The [`Failure`] that ended the attempt, when it did not exit with 0.
pub fn run_once(
    program: &OsStr,
    args: &[OsString],
    limit: Option<Limit>,
    interrupt: &Interrupt,
) -> Result<(), Failure> {
    if interrupt.token().is_cancelled() {
        return Err(Failure::Interrupted(interrupt.forward_signal()));
    }
    let mut child = Command::new(program)
        .args(args)
        .spawn()
        .map_err(|error| Failure::Spawn {
            program: program.to_owned(),
            error,
        })?;
    match wait(&mut child, limit, interrupt) {
        Ok(status) => failure_of(status).map_or(Ok(()), Err),
        Err(failure) => Err(failure),
    }
}

/// Waits for `child`, stopping it on `limit` or `interrupt`.
fn wait(
    child: &mut Child,
    limit: Option<Limit>,
    interrupt: &Interrupt,
) -> Result<ExitStatus, Failure> {
    let cancel = interrupt.token();
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait().map_err(Failure::Wait)? {
            return Ok(status);
        }
        if cancel.is_cancelled() {
            let signal = interrupt.forward_signal();
            stop(child, signal).map_err(Failure::Wait)?;
            return Err(Failure::Interrupted(signal));
        }
        let now = Instant::now();
        let mut step = pause;
        if let Some(limit) = limit {
            if now >= limit.at {
                stop(child, SIGTERM).map_err(Failure::Wait)?;
                return Err(match limit.kind {
                    LimitKind::AttemptTimeout => Failure::TimedOut(limit.length),
                    LimitKind::Deadline => Failure::DeadlineExceeded,
                });
            }
            step = step.min(limit.at - now);
        }
        // Returns early when cancelled.
        let _ = cancel.wait_timeout(step);
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// The signal number of SIGTERM.
const SIGTERM: i32 = 15;

/// Sends the polite signal, gives the child [`GRACE`] to exit, then kills
/// it; always waits for it.
fn stop(child: &mut Child, signal: i32) -> io::Result<()> {
    if send(child, signal) {
        let end = Instant::now() + GRACE;
        let mut pause = Duration::from_millis(1);
        while Instant::now() < end {
            if child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(MAX_POLL);
        }
    }
    match child.kill() {
        Ok(()) => {}
        // Already exited (and reaped by `try_wait`? then `wait` returns at once).
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
        Err(e) => return Err(e),
    }
    child.wait().map(drop)
}

/// Sends `signal` to the child; `false` when it could not be sent (then the
/// caller kills at once).
#[cfg(unix)]
fn send(child: &Child, signal: i32) -> bool {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let (Ok(pid), Ok(sig)) = (i32::try_from(child.id()), Signal::try_from(signal)) else {
        return false;
    };
    kill(Pid::from_raw(pid), sig).is_ok()
}

#[cfg(not(unix))]
fn send(_child: &Child, _signal: i32) -> bool {
    false
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str) -> (OsString, Vec<OsString>) {
        ("sh".into(), vec!["-c".into(), script.into()])
    }

    #[test]
    fn exit_codes_map() {
        let token = Interrupt::new();
        let (p, a) = sh("exit 0");
        assert!(run_once(&p, &a, None, &token).is_ok());
        let (p, a) = sh("exit 3");
        let err = run_once(&p, &a, None, &token).unwrap_err();
        assert_eq!(err.exit_code(), 3);
        assert_eq!(err.to_string(), "exit 3");
        let (p, a) = sh("kill -9 $$");
        let err = run_once(&p, &a, None, &token).unwrap_err();
        assert_eq!(err.exit_code(), 137);
        assert_eq!(err.to_string(), "killed by signal 9");
    }

    #[test]
    fn missing_program_is_127() {
        let token = Interrupt::new();
        let err =
            run_once(OsStr::new("/nonexistent/steadfast-test"), &[], None, &token).unwrap_err();
        assert_eq!(err.exit_code(), 127);
        assert!(err.to_string().contains("command not found"), "{err}");
    }

    #[test]
    fn non_executable_is_126() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain-file");
        std::fs::write(&path, "not a program").unwrap();
        let token = Interrupt::new();
        let err = run_once(path.as_os_str(), &[], None, &token).unwrap_err();
        assert_eq!(err.exit_code(), 126, "{err}");
    }

    #[test]
    fn limit_stops_the_child() {
        let token = Interrupt::new();
        let (p, a): (OsString, Vec<OsString>) = ("sleep".into(), vec!["30".into()]);
        let started = Instant::now();
        let limit = Limit {
            at: started + Duration::from_millis(50),
            kind: LimitKind::AttemptTimeout,
            length: Duration::from_millis(50),
        };
        let err = run_once(&p, &a, Some(limit), &token).unwrap_err();
        assert!(matches!(err, Failure::TimedOut(_)), "{err}");
        assert_eq!(err.exit_code(), 124);
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn cancel_stops_the_child() {
        let token = Interrupt::new();
        let t = token.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            t.trigger(15);
        });
        let (p, a): (OsString, Vec<OsString>) = ("sleep".into(), vec!["30".into()]);
        let started = Instant::now();
        let err = run_once(&p, &a, None, &token).unwrap_err();
        canceller.join().unwrap();
        assert!(matches!(err, Failure::Interrupted(15)), "{err}");
        assert_eq!(err.exit_code(), 143);
        assert!(started.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn a_child_ignoring_the_signal_is_killed_after_the_grace() {
        let token = Interrupt::new();
        let (p, a) = sh("trap '' TERM; exec sleep 30");
        let started = Instant::now();
        let limit = Limit {
            at: started + Duration::from_millis(100),
            kind: LimitKind::Deadline,
            length: Duration::from_millis(100),
        };
        let err = run_once(&p, &a, Some(limit), &token).unwrap_err();
        assert!(matches!(err, Failure::DeadlineExceeded), "{err}");
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}
