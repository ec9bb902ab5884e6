//! One attempt of `steadfast run`: start the program directly (no shell),
//! wait for it with an optional time limit, stop it when the limit passes or
//! the run is cancelled, and say how it ended.
//!
//! Each attempt starts in a process group of its own (as GNU `timeout`
//! does), and stopping it signals the whole group, so that the program's own
//! children stop with it instead of running on, re-parented, as duplicate
//! work. On a time limit the group gets `SIGTERM` and, if anything of it is
//! still there after `--kill-after` (default [`GRACE`]), `SIGKILL`; on an
//! interruption (Ctrl-C, SIGTERM, SIGHUP) it gets the signal steadfast
//! received, then `SIGKILL` the same way. Either way steadfast returns only
//! once the program is reaped and the group is empty: on Linux it is the
//! subreaper of its descendants ([`init`]) and reaps the orphans too, so no
//! zombie is left. A process that left the group (`setsid`) is out of
//! reach. With `--foreground` the program stays in steadfast's group (it
//! can read the terminal) and only it is signalled. A program that exits by
//! itself is not stopped: children it left running in the background (a
//! daemon it started) are left alone. On platforms without signals the
//! program is killed at once.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::exit;
use crate::input::Input;
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
    /// when it could not be started, 125 (steadfast's own error) when
    /// waiting for or stopping it failed.
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
            Self::Wait(_) => exit::RUN_ERROR,
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

/// How each attempt's process is started and stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopping {
    /// How long the program has after the first signal before it is
    /// killed (`--kill-after`; zero: at once).
    pub kill_after: Duration,
    /// Start each attempt in a process group of its own and signal the
    /// whole group, so that the program's own children stop with it (the
    /// default); `false` (`--foreground`) signals the program only.
    pub own_group: bool,
}

impl Default for Stopping {
    fn default() -> Self {
        Self {
            kill_after: GRACE,
            own_group: true,
        }
    }
}

/// Gets ready to run attempts: on Linux, makes steadfast the reaper of its
/// orphaned descendants (`PR_SET_CHILD_SUBREAPER`), so that a grandchild
/// whose parent (the program) died is re-parented to steadfast, which can
/// then wait for it; without it, a killed grandchild would be left to a PID 1
/// that may never reap it. Idempotent; failure only costs that precision.
pub fn init() {
    #[cfg(target_os = "linux")]
    {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
}

/// Runs `program` with `args` once, its standard output and error
/// inherited and its standard input from `input`, until it exits, `limit`
/// passes or `interrupt` fires; stopped as `stopping` says.
///
/// # Errors
/// The [`Failure`] that ended the attempt, when it did not exit with 0.
pub fn run_once(
    program: &OsStr,
    args: &[OsString],
    limit: Option<Limit>,
    interrupt: &Interrupt,
    input: &Input,
    stopping: Stopping,
) -> Result<(), Failure> {
    if interrupt.token().is_cancelled() {
        return Err(Failure::Interrupted(interrupt.forward_signal()));
    }
    let mut command = Command::new(program);
    command.args(args).stdin(input.stdio());
    #[cfg(unix)]
    if stopping.own_group {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command.spawn().map_err(|error| Failure::Spawn {
        program: program.to_owned(),
        error,
    })?;
    input.feed(child.stdin.take());
    let mut proc = Proc::new(child, stopping);
    let result = match wait(&mut proc, limit, interrupt) {
        Ok(status) => failure_of(status).map_or(Ok(()), Err),
        Err(failure) => Err(failure),
    };
    // Reap whatever of the group already ended (the program's background
    // children that exited), so no zombie piles up over the attempts.
    proc.reap_group();
    result
}

/// Waits for the program, stopping it on `limit` or `interrupt`.
fn wait(
    proc: &mut Proc,
    limit: Option<Limit>,
    interrupt: &Interrupt,
) -> Result<ExitStatus, Failure> {
    let cancel = interrupt.token();
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(status) = proc.child.try_wait().map_err(Failure::Wait)? {
            proc.status = Some(status);
            return Ok(status);
        }
        if cancel.is_cancelled() {
            let signal = interrupt.forward_signal();
            proc.stop(signal).map_err(Failure::Wait)?;
            return Err(Failure::Interrupted(signal));
        }
        let now = Instant::now();
        let mut step = pause;
        if let Some(limit) = limit {
            if now >= limit.at {
                proc.stop(SIGTERM).map_err(Failure::Wait)?;
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

/// How long to wait for the processes of a group to go after `SIGKILL`
/// (it cannot be caught; only a process stuck in the kernel lingers).
const AFTER_KILL: Duration = Duration::from_secs(10);

/// A running attempt: the program, and (by default) its process group.
struct Proc {
    child: Child,
    stopping: Stopping,
    /// The program's exit status, once reaped.
    status: Option<ExitStatus>,
}

impl Proc {
    fn new(child: Child, stopping: Stopping) -> Self {
        Self {
            child,
            stopping,
            status: None,
        }
    }

    /// Sends `signal`, gives the processes `kill_after` to exit, then kills
    /// them; returns once the program is reaped and, with a process group,
    /// every process of the group is gone.
    fn stop(&mut self, signal: i32) -> io::Result<()> {
        let end = Instant::now() + self.stopping.kill_after;
        if !self.stopping.kill_after.is_zero() && self.send(signal) {
            // A stopped process (Ctrl-Z, or a background read from the
            // terminal) acts on the signal only once continued.
            if signal != SIGCONT {
                let _ = self.send(SIGCONT);
            }
            if self.wait_gone(end)? {
                return Ok(());
            }
        }
        if !self.send(SIGKILL) {
            match self.child.kill() {
                Ok(()) => {}
                // Already exited.
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
                Err(e) => return Err(e),
            }
        }
        if self.wait_gone(Instant::now() + AFTER_KILL)? {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "processes of group {} still there {} after SIGKILL",
                self.child.id(),
                crate::duration::format_duration(AFTER_KILL)
            )))
        }
    }

    /// Polls until the program is reaped and its group is empty (`true`),
    /// or `end` passes (`false`).
    fn wait_gone(&mut self, end: Instant) -> io::Result<bool> {
        let mut pause = Duration::from_millis(1);
        loop {
            if self.status.is_none() {
                self.status = self.child.try_wait()?;
            }
            if self.status.is_some() && self.reap_group() {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= end {
                return Ok(false);
            }
            std::thread::sleep(pause.min(end - now));
            pause = (pause * 2).min(MAX_POLL);
        }
    }

    /// Reaps the group's processes that are steadfast's children (the
    /// program's orphans, re-parented to steadfast, see [`init`]) and have
    /// ended; `true` when no process of the group is left (always `true`
    /// without a group of its own).
    #[cfg(unix)]
    fn reap_group(&mut self) -> bool {
        use nix::errno::Errno;
        use nix::sys::signal::kill;
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        use nix::unistd::Pid;
        if !self.stopping.own_group {
            return true;
        }
        // The program itself is reaped through `Child` only, before the
        // group is asked for (else `Child` would lose its status).
        if self.status.is_none() {
            return false;
        }
        let Ok(pgid) = i32::try_from(self.child.id()) else {
            return true;
        };
        let group = Pid::from_raw(-pgid);
        loop {
            match waitpid(group, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        kill(group, None) == Err(Errno::ESRCH)
    }

    #[cfg(not(unix))]
    fn reap_group(&mut self) -> bool {
        true
    }

    /// Sends `signal` to the program's group (or to the program alone);
    /// `false` when it could not be sent.
    #[cfg(unix)]
    fn send(&self, signal: i32) -> bool {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let (Ok(pid), Ok(sig)) = (i32::try_from(self.child.id()), Signal::try_from(signal)) else {
            return false;
        };
        let target = if self.stopping.own_group { -pid } else { pid };
        kill(Pid::from_raw(target), sig).is_ok()
    }

    #[cfg(not(unix))]
    fn send(&self, _signal: i32) -> bool {
        false
    }
}

/// The signal numbers of SIGKILL and SIGCONT (Linux, the BSDs and macOS
/// agree on 9; SIGCONT differs, so it comes from the platform).
const SIGKILL: i32 = 9;
#[cfg(unix)]
const SIGCONT: i32 = nix::sys::signal::Signal::SIGCONT as i32;
#[cfg(not(unix))]
const SIGCONT: i32 = 18;

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn once(
        program: &OsStr,
        args: &[OsString],
        limit: Option<Limit>,
        interrupt: &Interrupt,
    ) -> Result<(), Failure> {
        run_once(
            program,
            args,
            limit,
            interrupt,
            &Input::inherit(),
            Stopping::default(),
        )
    }

    fn sh(script: &str) -> (OsString, Vec<OsString>) {
        ("sh".into(), vec!["-c".into(), script.into()])
    }

    #[test]
    fn exit_codes_map() {
        let token = Interrupt::new();
        let (p, a) = sh("exit 0");
        assert!(once(&p, &a, None, &token).is_ok());
        let (p, a) = sh("exit 3");
        let err = once(&p, &a, None, &token).unwrap_err();
        assert_eq!(err.exit_code(), 3);
        assert_eq!(err.to_string(), "exit 3");
        let (p, a) = sh("kill -9 $$");
        let err = once(&p, &a, None, &token).unwrap_err();
        assert_eq!(err.exit_code(), 137);
        assert_eq!(err.to_string(), "killed by signal 9");
    }

    #[test]
    fn missing_program_is_127() {
        let token = Interrupt::new();
        let err = once(OsStr::new("/nonexistent/steadfast-test"), &[], None, &token).unwrap_err();
        assert_eq!(err.exit_code(), 127);
        assert!(err.to_string().contains("command not found"), "{err}");
    }

    #[test]
    fn non_executable_is_126() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain-file");
        std::fs::write(&path, "not a program").unwrap();
        let token = Interrupt::new();
        let err = once(path.as_os_str(), &[], None, &token).unwrap_err();
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
        let err = once(&p, &a, Some(limit), &token).unwrap_err();
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
        let err = once(&p, &a, None, &token).unwrap_err();
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
        let err = once(&p, &a, Some(limit), &token).unwrap_err();
        assert!(matches!(err, Failure::DeadlineExceeded), "{err}");
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}
