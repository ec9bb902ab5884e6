//! `steadfast run` end to end: the real binary runs the test fixture as a
//! real child process. Delays are 1ms so the tests are fast; time bounds are
//! generous upper limits only.
#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod command;

use command::{STEADFAST, code, stderr, steadfast};

const FIXTURE: &str = env!("CARGO_BIN_EXE_steadfast-fixture");
const FAST: &str = "constant:delay=1ms";

/// Runs `steadfast run <flags> -- <fixture> <mode> <state file> <args>` with
/// a state file in a fresh directory: the output, and how many times the
/// fixture ran.
fn run_fixture(flags: &[&str], mode: &str, args: &[&str]) -> (Output, u32) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let state = dir.path().join("state");
    let state_arg = state.to_str().expect("a UTF-8 path");
    let mut argv = vec!["run"];
    argv.extend_from_slice(flags);
    argv.extend_from_slice(&["--", FIXTURE, mode, state_arg]);
    argv.extend_from_slice(args);
    let out = steadfast(&argv);
    let ran = runs(&state);
    (out, ran)
}

fn runs(state: &Path) -> u32 {
    std::fs::read_to_string(state)
        .map(|s| s.trim().parse().expect("a count"))
        .unwrap_or(0)
}

#[test]
fn retries_until_the_program_succeeds() {
    let (out, ran) = run_fixture(&["--backoff", FAST, "--attempts", "5"], "fail", &["2"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(ran, 3);
    let err = stderr(&out);
    assert!(
        err.contains("attempt 1/5 failed (exit 1); retrying in 1ms"),
        "{err}"
    );
    assert!(
        err.contains("attempt 2/5 failed (exit 1); retrying in 1ms"),
        "{err}"
    );
    assert!(!err.contains("attempt 3/5"), "{err}");
}

#[test]
fn gives_up_with_the_last_exit_status() {
    let (out, ran) = run_fixture(
        &["--backoff", FAST, "--attempts", "3"],
        "codes",
        &["5,6,7,8"],
    );
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert_eq!(ran, 3);
    let err = stderr(&out);
    assert!(err.contains("failed after 3 attempts"), "{err}");
    assert!(err.contains("attempts exhausted"), "{err}");
}

#[test]
fn attempts_default_to_five() {
    let (out, ran) = run_fixture(&["--backoff", FAST], "fail", &["100", "3"]);
    assert_eq!(code(&out), 3);
    assert_eq!(ran, 5);
}

#[test]
fn one_attempt_means_no_retry() {
    let (out, ran) = run_fixture(&["--attempts", "1"], "fail", &["1", "4"]);
    assert_eq!(code(&out), 4);
    assert_eq!(ran, 1);
    assert!(!stderr(&out).contains("retrying"));
}

#[test]
fn stop_on_stops_at_once() {
    let (out, ran) = run_fixture(
        &["--backoff", FAST, "--stop-on", "3,40-50"],
        "codes",
        &["1,42,1"],
    );
    assert_eq!(code(&out), 42, "{}", stderr(&out));
    assert_eq!(ran, 2);
}

#[test]
fn retry_on_limits_what_is_retried() {
    let (out, ran) = run_fixture(
        &["--backoff", FAST, "--retry-on", "75,100-110"],
        "codes",
        &["75,105,9,0"],
    );
    assert_eq!(code(&out), 9, "{}", stderr(&out));
    assert_eq!(ran, 3);
}

#[test]
fn quiet_prints_nothing_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let s = state.to_str().unwrap();
    let out = steadfast(&[
        "run",
        "-q",
        "--backoff",
        FAST,
        "--attempts",
        "2",
        "--",
        FIXTURE,
        "fail",
        s,
        "5",
    ]);
    assert_eq!(code(&out), 1);
    // Only the fixture's own lines.
    for line in stderr(&out).lines() {
        assert!(line.starts_with("fixture: "), "{line}");
    }
}

#[test]
fn arguments_are_passed_literally_without_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(STEADFAST)
        .current_dir(dir.path())
        .args([
            "run",
            "--",
            FIXTURE,
            "echo",
            "$(touch x)",
            "a b",
            "*",
            "`touch y`;touch z",
            "--attempts",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "$(touch x)\na b\n*\n`touch y`;touch z\n--attempts\n"
    );
    for f in ["x", "y", "z"] {
        assert!(!dir.path().join(f).exists(), "{f} was created");
    }
}

#[test]
fn a_missing_program_exits_127() {
    let out = steadfast(&[
        "run",
        "--backoff",
        FAST,
        "--",
        "/nonexistent/steadfast-no-such-program",
    ]);
    assert_eq!(code(&out), 127);
    let err = stderr(&out);
    assert!(err.contains("command not found"), "{err}");
    assert!(!err.contains("retrying"), "{err}");
}

#[test]
fn a_non_executable_program_exits_126() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "just text").unwrap();
    let out = steadfast(&["run", "--", file.to_str().unwrap()]);
    assert_eq!(code(&out), 126, "{}", stderr(&out));
}

#[test]
fn usage_errors_exit_2_with_a_message() {
    for (args, needle) in [
        (
            &["run", "--deadline", "5", "--", "true"][..],
            "missing unit",
        ),
        (&["run", "--attempts", "0", "--", "true"], "--attempts"),
        (
            &["run", "--backoff", "exponential:jitter=lots", "--", "true"],
            "`jitter` must be",
        ),
        (
            &["run", "--retry-on", "1-", "--", "true"],
            "invalid exit codes",
        ),
        (&["run"], "PROGRAM"),
        (&["frobnicate"], "unrecognized subcommand"),
    ] {
        let out = steadfast(args);
        assert_eq!(code(&out), 2, "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn help_documents_the_spec_syntax() {
    let out = steadfast(&["run", "--help"]);
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "PRESET[:KEY=VALUE,...]",
        "decorrelated",
        "exponential:initial=100ms",
        "124",
        "130",
    ] {
        assert!(text.contains(needle), "{needle}");
    }
}

#[test]
fn the_attempt_timeout_kills_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let pids = dir.path().join("pids");
    let started = Instant::now();
    let out = steadfast(&[
        "run",
        "--backoff",
        FAST,
        "--attempts",
        "2",
        "--attempt-timeout",
        "200ms",
        "--",
        FIXTURE,
        "sleep",
        "30000",
        marker.to_str().unwrap(),
        pids.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(25));
    let err = stderr(&out);
    assert!(
        err.contains("attempt 1/2 failed (timed out after 200ms)"),
        "{err}"
    );
    let pid_lines = std::fs::read_to_string(&pids).unwrap();
    assert_eq!(pid_lines.lines().count(), 2, "two attempts started");
    assert!(!marker.exists(), "the child ran to its end");
}

#[test]
fn the_deadline_ends_the_run_with_124() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let pids = dir.path().join("pids");
    let started = Instant::now();
    let out = steadfast(&[
        "run",
        "--backoff",
        FAST,
        "--deadline",
        "300ms",
        "--",
        FIXTURE,
        "sleep",
        "30000",
        marker.to_str().unwrap(),
        pids.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(25));
    assert!(!marker.exists());
    assert!(
        stderr(&out).contains("deadline exceeded"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_deadline_shorter_than_the_backoff_stops_before_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let s = state.to_str().unwrap();
    let started = Instant::now();
    let out = steadfast(&[
        "run",
        "--backoff",
        "constant:delay=1h",
        "--deadline",
        "2s",
        "--",
        FIXTURE,
        "fail",
        s,
        "9",
    ]);
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    assert_eq!(runs(&state), 1);
    assert!(started.elapsed() < Duration::from_secs(25));
}

/// Starts `steadfast run` on a fixture that sleeps 30 s, sends `signal` to
/// steadfast once the fixture runs, and checks the exit code and that the
/// fixture was stopped (it never wrote its marker, and it is gone).
fn interrupt_while_the_child_runs(signal: &str, expected: i32) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let marker = dir.path().join("marker");
    let pids = dir.path().join("pids");
    let mut child = Command::new(STEADFAST)
        .args([
            "run",
            "--",
            FIXTURE,
            "sleep",
            "30000",
            marker.to_str().expect("utf-8"),
            pids.to_str().expect("utf-8"),
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("steadfast starts");
    // Wait until the fixture runs (it writes its pid first).
    let started = Instant::now();
    let fixture_pid = loop {
        if let Ok(text) = std::fs::read_to_string(&pids)
            && let Some(line) = text.lines().next()
        {
            break line.trim().to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the fixture never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let kill = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let status = child.wait().expect("steadfast ends");
    assert_eq!(status.code(), Some(expected), "{signal}");
    assert!(started.elapsed() < Duration::from_secs(25));
    assert!(!marker.exists(), "the child ran to its end");
    assert_eq!(
        std::fs::read_to_string(&pids)
            .expect("the pid file")
            .lines()
            .count(),
        1,
        "no retry"
    );
    // The fixture is gone (and reaped): signalling it fails.
    let probe = Command::new("kill")
        .args(["-0", &fixture_pid])
        .stderr(Stdio::null())
        .status()
        .expect("kill runs");
    assert!(
        !probe.success(),
        "the fixture {fixture_pid} is still running"
    );
}

#[test]
fn ctrl_c_stops_the_child_and_exits_130() {
    interrupt_while_the_child_runs("-INT", 130);
}

#[test]
fn sigterm_is_passed_on_and_exits_143() {
    interrupt_while_the_child_runs("-TERM", 143);
}

#[test]
fn sighup_is_passed_on_and_exits_129() {
    interrupt_while_the_child_runs("-HUP", 129);
}

#[test]
fn ctrl_c_during_the_backoff_wait_exits_130_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut child = Command::new(STEADFAST)
        .args([
            "run",
            "--backoff",
            "constant:delay=1h",
            "--",
            FIXTURE,
            "fail",
            state.to_str().unwrap(),
            "9",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while runs(&state) < 1 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the fixture never ran"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Let it reach the wait (the first attempt has finished).
    std::thread::sleep(Duration::from_millis(200));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the hour-long wait was not cut short"
    );
    assert_eq!(runs(&state), 1);
}

#[test]
fn a_seeded_run_waits_the_delays_schedule_prints() {
    let spec = "exponential:initial=2ms,max=20ms,jitter=full";
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = steadfast(&[
        "run",
        "--backoff",
        spec,
        "--seed",
        "77",
        "--attempts",
        "5",
        "--",
        FIXTURE,
        "fail",
        state.to_str().unwrap(),
        "99",
    ]);
    assert_eq!(code(&out), 1);
    let waited: Vec<String> = stderr(&out)
        .lines()
        .filter_map(|l| l.split_once("; retrying in ").map(|(_, d)| d.to_owned()))
        .collect();
    let schedule = steadfast(&[
        "schedule",
        "--backoff",
        spec,
        "--seed",
        "77",
        "--attempts",
        "5",
    ]);
    let printed: Vec<String> = String::from_utf8(schedule.stdout)
        .unwrap()
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().nth(1).unwrap().to_owned())
        .collect();
    assert_eq!(waited.len(), 4);
    assert_eq!(waited, printed);
}
