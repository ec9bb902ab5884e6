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
fn usage_errors_of_run_exit_125_with_a_message() {
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
        (
            &["run", "--kill-after", "soon", "--", "true"],
            "--kill-after",
        ),
        (
            &["run", "--stdin-limit", "1.5M", "--", "true"],
            "invalid size",
        ),
        (&["run", "--stdin", "twice", "--", "true"], "--stdin"),
        (&["run", "--attempts"], "--attempts"),
        (&["run"], "PROGRAM"),
    ] {
        let out = steadfast(args);
        assert_eq!(code(&out), 125, "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // The other commands keep 2 for a usage error.
    let out = steadfast(&["frobnicate"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("unrecognized subcommand"));
    let out = steadfast(&["schedule", "--backoff", "nope"]);
    assert_eq!(code(&out), 2);
}

/// A mistyped option before the program is a usage error with clap's
/// suggestion, not a program named `--atempts` (127); nothing runs.
#[test]
fn a_mistyped_option_is_a_usage_error_and_nothing_runs() {
    for (typo, suggestion) in [
        (&["--atempts", "5"][..], Some("--attempts")),
        (&["--quiett"], Some("--quiet")),
        (&["-x"], None),
    ] {
        let mut flags = vec!["--backoff", FAST];
        flags.extend_from_slice(typo);
        let (out, ran) = run_fixture(&flags, "fail", &["0"]);
        assert_eq!(code(&out), 125, "{typo:?}: {}", stderr(&out));
        assert_eq!(ran, 0, "{typo:?}: the fixture ran");
        let err = stderr(&out);
        assert!(
            err.contains(&format!("unexpected argument '{}'", typo[0])),
            "{err}"
        );
        assert!(!err.contains("cannot run"), "{err}");
        if let Some(s) = suggestion {
            assert!(
                err.contains(&format!("a similar argument exists: '{s}'")),
                "{err}"
            );
        }
    }
    // After `--`, a name that starts with `-` is still a program.
    let out = steadfast(&["run", "--backoff", FAST, "--", "--atempts"]);
    assert_eq!(code(&out), 127);
    assert!(stderr(&out).contains("cannot run --atempts: command not found"));
}

/// When the deadline stops an attempt, the final message still gives the
/// program's last status (here exit 3, of attempt 1), and exits 124.
#[test]
fn the_deadline_keeps_the_programs_last_status() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let out = steadfast(&[
        "run",
        "--backoff",
        FAST,
        "--deadline",
        "2s",
        "--",
        "sh",
        "-c",
        // The first run exits 3; the second sleeps into the deadline.
        r#"if [ -e "$1" ]; then exec sleep 30; fi; : > "$1"; exit 3"#,
        "sh",
        seen.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("attempt 1/5 failed (exit 3)"), "{err}");
    assert!(err.contains("(deadline exceeded)"), "{err}");
    assert!(
        err.contains(
            "the deadline stopped attempt 2; the program's last status was exit 3 (attempt 1)"
        ),
        "{err}"
    );
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
        "--kill-after",
        "--stdin-limit",
        "--foreground",
    ] {
        assert!(text.contains(needle), "{needle}");
    }
}

#[test]
fn help_documents_every_exit_code() {
    let out = steadfast(&["run", "--help"]);
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout).unwrap();
    let codes = text
        .split_once("Exit status:")
        .expect("an exit status section")
        .1;
    for needle in [
        "\n  0 ", "1-123", "124", "125", "126", "127", "128+N", "129", "130", "143",
    ] {
        assert!(codes.contains(needle), "{needle:?} in {codes}");
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
        // Not the test's own stdin: `run` would read it to its end first.
        .stdin(Stdio::null())
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
        // Not the test's own stdin: `run` would read it to its end first.
        .stdin(Stdio::null())
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

// ---- Process groups: nothing of an attempt outlives it ----------------------

/// The processes among `pids` that are still there: running, or a zombie
/// nobody reaped (on Linux steadfast reaps the orphans it adopts).
#[cfg(target_os = "linux")]
fn leftovers(pids: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(pids).expect("the pid file");
    text.lines()
        .map(str::trim)
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false; // gone
            };
            // The state follows the command name in parentheses.
            let state = stat
                .rsplit_once(')')
                .map_or("", |(_, rest)| rest.trim_start());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            state.starts_with('Z')
                || String::from_utf8_lossy(&cmdline).contains("steadfast-fixture")
        })
        .map(str::to_owned)
        .collect()
}

/// `steadfast run <flags> -- fixture tree 30000 MARKER PIDS [extra]`: the
/// output, the pid file and its directory (kept alive by the caller).
#[cfg(target_os = "linux")]
fn run_tree(flags: &[&str], extra: &[&str]) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let marker = dir.path().join("marker");
    let pids = dir.path().join("pids");
    let mut argv = vec!["run"];
    argv.extend_from_slice(flags);
    argv.extend_from_slice(&[
        "--",
        FIXTURE,
        "tree",
        "30000",
        marker.to_str().expect("utf-8"),
        pids.to_str().expect("utf-8"),
    ]);
    argv.extend_from_slice(extra);
    let out = steadfast(&argv);
    assert!(!marker.exists(), "a process ran to its end");
    (out, dir)
}

#[cfg(target_os = "linux")]
fn pid_count(dir: &tempfile::TempDir) -> usize {
    std::fs::read_to_string(dir.path().join("pids"))
        .expect("the pid file")
        .lines()
        .count()
}

#[cfg(target_os = "linux")]
#[test]
fn timed_out_attempts_leave_no_grandchild_behind() {
    let started = Instant::now();
    let (out, dir) = run_tree(
        &[
            "--backoff",
            "constant:delay=100ms",
            "--attempts",
            "2",
            "--attempt-timeout",
            "500ms",
        ],
        &[],
    );
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(25));
    // Each attempt: the fixture and its grandchild.
    wait_for_pids(&dir, 4);
    assert_eq!(leftovers(&dir.path().join("pids")), Vec::<String>::new());
}

#[cfg(target_os = "linux")]
#[test]
fn the_deadline_leaves_no_grandchild_behind() {
    let (out, dir) = run_tree(&["--deadline", "500ms"], &[]);
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    wait_for_pids(&dir, 2);
    assert_eq!(leftovers(&dir.path().join("pids")), Vec::<String>::new());
}

#[cfg(target_os = "linux")]
#[test]
fn a_grandchild_ignoring_sigterm_is_killed_after_kill_after() {
    let started = Instant::now();
    let (out, dir) = run_tree(
        &[
            "--attempts",
            "1",
            "--attempt-timeout",
            "500ms",
            "--kill-after",
            "300ms",
        ],
        &["ignore-term"],
    );
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(25));
    wait_for_pids(&dir, 2);
    assert_eq!(leftovers(&dir.path().join("pids")), Vec::<String>::new());
}

/// A timed-out attempt is stopped before its pid file has both lines only
/// if the grandchild had not started: the test would then prove nothing.
#[cfg(target_os = "linux")]
fn wait_for_pids(dir: &tempfile::TempDir, n: usize) {
    assert_eq!(pid_count(dir), n, "every process of every attempt started");
}

#[cfg(target_os = "linux")]
#[test]
fn sigterm_to_steadfast_stops_the_whole_group_before_it_exits() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let marker = dir.path().join("marker");
    let pids = dir.path().join("pids");
    let mut child = Command::new(STEADFAST)
        .args([
            "run",
            "--kill-after",
            "300ms",
            "--",
            FIXTURE,
            "tree",
            "30000",
            marker.to_str().expect("utf-8"),
            pids.to_str().expect("utf-8"),
            "ignore-term",
        ])
        // Not the test's own stdin: `run` would read it to its end first.
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("steadfast starts");
    let started = Instant::now();
    while std::fs::read_to_string(&pids).map_or(0, |t| t.lines().count()) < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the tree never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let status = child.wait().expect("steadfast ends");
    assert_eq!(status.code(), Some(143));
    // Checked the moment steadfast is gone: it waited for the group.
    assert_eq!(leftovers(&pids), Vec::<String>::new());
    assert!(!marker.exists());
}

// ---- Standard input ---------------------------------------------------------

/// Runs `steadfast run <flags> -- fixture stdin STATE <fails>` with `input`
/// piped in: the output and the fixture's log, one `(bytes, hash)` per run.
fn run_with_input(flags: &[&str], fails: &str, input: &[u8]) -> (Output, Vec<(usize, String)>) {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("a temp dir");
    let state = dir.path().join("state");
    let state_arg = state.to_str().expect("utf-8");
    let mut argv = vec!["run", "--backoff", FAST];
    argv.extend_from_slice(flags);
    argv.extend_from_slice(&["--", FIXTURE, "stdin", state_arg, fails]);
    let mut child = Command::new(STEADFAST)
        .args(&argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("steadfast starts");
    let mut pipe = child.stdin.take().expect("a pipe");
    let data = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&data);
    });
    let out = child.wait_with_output().expect("steadfast ends");
    writer.join().expect("the writer");
    let log = std::fs::read_to_string(format!("{state_arg}.input")).unwrap_or_default();
    let runs = log
        .lines()
        .map(|l| {
            let mut parts = l.split_whitespace().skip(1);
            let bytes = parts.next().expect("bytes").parse().expect("a count");
            (bytes, parts.next().expect("hash").to_owned())
        })
        .collect();
    (out, runs)
}

fn sample(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn piped_stdin_is_replayed_to_every_attempt() {
    let input = sample(300 * 1024);
    let (out, runs) = run_with_input(&["--attempts", "4"], "2", &input);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(runs.len(), 3);
    for run in &runs {
        assert_eq!(run, &runs[0], "every attempt read the same input");
    }
    assert_eq!(runs[0].0, input.len());
}

#[test]
fn the_issue_example_no_longer_succeeds_on_an_empty_stdin() {
    use std::io::Write;
    let mut child = Command::new(STEADFAST)
        .args([
            "run",
            "--backoff",
            FAST,
            "--attempts",
            "3",
            "--",
            "sh",
            "-c",
            "x=$(cat); [ -n \"$x\" ] || exit 0; exit 1",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("steadfast starts");
    child
        .stdin
        .take()
        .expect("a pipe")
        .write_all(b"data\n")
        .expect("written");
    let out = child.wait_with_output().expect("steadfast ends");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("failed after 3 attempts"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn stdin_over_the_limit_goes_to_the_first_attempt_only_and_is_not_retried() {
    let input = sample(4096);
    let (out, runs) = run_with_input(&["--stdin-limit", "1KiB", "--attempts", "3"], "9", &input);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(runs.len(), 1, "no retry");
    assert_eq!(runs[0].0, 4096, "the first attempt got all of it");
    let err = stderr(&out);
    assert!(err.contains("larger than --stdin-limit"), "{err}");
    assert!(err.contains("not retried"), "{err}");
    // Exactly at the limit it is replayed.
    let (out, runs) = run_with_input(&["--stdin-limit", "4K", "--attempts", "3"], "1", &input);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0], runs[1]);
}

#[test]
fn stdin_once_passes_through_and_never_retries() {
    let input = sample(10_000);
    let (out, runs) = run_with_input(&["--stdin", "once", "--attempts", "3"], "9", &input);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].0, input.len());
    assert!(
        stderr(&out).contains("not retried: --stdin=once"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn foreground_still_stops_the_program_itself() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("marker");
    let pids = dir.path().join("pids");
    let out = steadfast(&[
        "run",
        "--foreground",
        "--attempts",
        "1",
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
    assert!(!marker.exists());
    let pid = std::fs::read_to_string(&pids).unwrap();
    let probe = Command::new("kill")
        .args(["-0", pid.trim()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!probe.success(), "the program {pid} is still running");
}

#[test]
fn ctrl_c_while_stdin_is_still_open_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    // A pipe that never ends while the test holds its writing end.
    let mut child = Command::new(STEADFAST)
        .args(["run", "--", FIXTURE, "stdin", state.to_str().unwrap(), "0"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _writer = child.stdin.take().expect("a pipe");
    std::thread::sleep(Duration::from_millis(200));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("while reading standard input"));
    assert_eq!(runs(&state), 0, "the program never started");
}
