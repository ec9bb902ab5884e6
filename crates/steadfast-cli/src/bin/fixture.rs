//! TEST FIXTURE for the integration tests of `steadfast run`; not a tool.
//!
//! ```text
//! steadfast-fixture fail STATE N [CODE]    exits CODE (default 1) on its first N runs, then 0
//! steadfast-fixture codes STATE C1,C2,...  run k exits with Ck (the last code repeats)
//! steadfast-fixture sleep MS MARKER PIDS   appends its pid to PIDS, sleeps MS ms,
//!                                          then creates MARKER and exits 0
//! steadfast-fixture echo ARGS...           prints each argument on its own line, exits 0
//! steadfast-fixture tree MS MARKER PIDS [ignore-term]
//!                                          appends its pid to PIDS, starts a grandchild
//!                                          `sleep MS MARKER PIDS` (through `sh`, which ignores
//!                                          SIGTERM first with `ignore-term`), sleeps MS ms, exits 0
//! steadfast-fixture stdin STATE N          reads all of stdin, appends "RUN BYTES FNV64" to
//!                                          STATE.input, exits 1 on its first N runs, then 0
//! ```
//!
//! STATE is a file holding the number of runs so far (missing means 0).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

fn runs_so_far(state: &Path) -> Result<u32, String> {
    match std::fs::read_to_string(state) {
        Ok(text) => text
            .trim()
            .parse()
            .map_err(|e| format!("bad state file {}: {e}", state.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(format!("cannot read {}: {e}", state.display())),
    }
}

/// Counts this run in STATE and returns its number (1-based).
fn count_run(state: &Path) -> Result<u32, String> {
    let run = runs_so_far(state)? + 1;
    std::fs::write(state, run.to_string())
        .map_err(|e| format!("cannot write {}: {e}", state.display()))?;
    Ok(run)
}

/// Appends this process's id to the file `pids`.
fn append_pid(pids: &str) -> Result<(), String> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(pids)
        .map_err(|e| format!("cannot open {pids}: {e}"))?;
    writeln!(file, "{}", std::process::id()).map_err(|e| e.to_string())
}

fn number<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("not a number: {text:?}"))
}

fn code(c: i32) -> ExitCode {
    ExitCode::from(u8::try_from(c).unwrap_or(255))
}

fn main_result() -> Result<ExitCode, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || "usage: steadfast-fixture fail|codes|sleep|tree|stdin|echo ...".to_owned();
    let Some(mode) = args.first() else {
        return Err(usage());
    };
    match (mode.as_str(), &args[1..]) {
        ("fail", [state, n, rest @ ..]) => {
            let n: u32 = number(n)?;
            let fail_code: i32 = rest.first().map_or(Ok(1), |c| number(c))?;
            let run = count_run(Path::new(state))?;
            eprintln!("fixture: run {run}");
            Ok(if run <= n {
                code(fail_code)
            } else {
                ExitCode::SUCCESS
            })
        }
        ("codes", [state, list]) => {
            let codes: Vec<i32> = list.split(',').map(number).collect::<Result<_, _>>()?;
            let run = count_run(Path::new(state))?;
            let index = usize::try_from(run - 1).unwrap_or(usize::MAX);
            let c = codes.get(index).or(codes.last()).copied().unwrap_or(0);
            eprintln!("fixture: run {run} exits {c}");
            Ok(code(c))
        }
        ("sleep", [ms, marker, pids]) => {
            let ms: u64 = number(ms)?;
            append_pid(pids)?;
            std::thread::sleep(Duration::from_millis(ms));
            std::fs::write(marker, "done").map_err(|e| format!("cannot write {marker}: {e}"))?;
            Ok(ExitCode::SUCCESS)
        }
        ("tree", [ms, marker, pids, rest @ ..]) => {
            let ms: u64 = number(ms)?;
            let ignore = match rest {
                [] => "",
                [flag] if flag == "ignore-term" => "trap '' TERM; ",
                _ => return Err(usage()),
            };
            append_pid(pids)?;
            let me = std::env::current_exe().map_err(|e| e.to_string())?;
            // `exec` keeps the ignored SIGTERM in the sleeping grandchild.
            let script = format!("{ignore}exec \"$0\" sleep \"$1\" \"$2\" \"$3\"");
            let mut grandchild = std::process::Command::new("sh")
                .arg("-c")
                .arg(script)
                .arg(me)
                .args([&ms.to_string(), marker, pids])
                .spawn()
                .map_err(|e| format!("cannot start the grandchild: {e}"))?;
            std::thread::sleep(Duration::from_millis(ms));
            let _ = grandchild.wait();
            Ok(ExitCode::SUCCESS)
        }
        ("stdin", [state, n]) => {
            let n: u32 = number(n)?;
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut data)
                .map_err(|e| format!("cannot read stdin: {e}"))?;
            let run = count_run(Path::new(state))?;
            // FNV-1a, 64 bits: enough to tell two inputs apart in a test.
            let hash = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            let mut log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(format!("{state}.input"))
                .map_err(|e| format!("cannot open {state}.input: {e}"))?;
            writeln!(log, "{run} {} {hash:016x}", data.len()).map_err(|e| e.to_string())?;
            Ok(if run <= n { code(1) } else { ExitCode::SUCCESS })
        }
        ("echo", rest) => {
            let mut out = std::io::stdout().lock();
            for arg in rest {
                writeln!(out, "{arg}").map_err(|e| e.to_string())?;
            }
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(usage()),
    }
}

fn main() -> ExitCode {
    match main_result() {
        Ok(c) => c,
        Err(message) => {
            eprintln!("steadfast-fixture: {message}");
            ExitCode::from(99)
        }
    }
}
