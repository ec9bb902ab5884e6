//! `steadfast simulate` end to end: small scenarios through the flags into a
//! temporary folder, and the files of the report.

mod command;

use command::{assert_png, assert_svg, steadfast};

#[test]
fn every_scenario_writes_a_report() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("report");
    let out = steadfast(&[
        "simulate",
        "all",
        "--clients",
        "20",
        "--outage",
        "1s",
        "--horizon",
        "1m",
        "--rate",
        "50",
        "--duration",
        "10s",
        "--incident-start",
        "4s",
        "--trigger",
        "2s",
        "--calls",
        "2000",
        "--seed",
        "5",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary = String::from_utf8(out.stdout).unwrap();
    assert!(summary.contains("== herd"), "{summary}");
    assert!(summary.contains("== storm"), "{summary}");
    assert!(summary.contains("== tail"), "{summary}");
    assert!(summary.contains("== metastable"), "{summary}");
    assert!(summary.contains("== overload"), "{summary}");
    assert!(summary.contains("== quota"), "{summary}");
    assert!(summary.contains("== replicas"), "{summary}");
    assert!(summary.contains("20 clients"), "{summary}");
    assert!(summary.contains("Seed 5"), "{summary}");
    let index = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    for stem in [
        "herd_attempts",
        "herd_connected",
        "storm_attempts",
        "storm_success",
        "metastable_goodput",
        "metastable_attempts",
        "tail_latency",
        "overload_limit",
        "overload_goodput",
        "overload_latency",
        "quota_received",
        "quota_goodput",
        "quota_latency",
        "replicas_bad_load",
    ] {
        assert!(index.contains(&format!("{stem}.svg")), "{stem}");
        assert_svg(&out_dir.join(format!("{stem}.svg")));
        assert_png(&out_dir.join(format!("{stem}.png")));
    }
}

#[test]
fn one_scenario_and_the_same_seed_give_the_same_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let run = |sub: &str| {
        let out = steadfast(&[
            "simulate",
            "herd",
            "--clients",
            "30",
            "--outage",
            "1s",
            "--horizon",
            "1m",
            "--out",
            dir.path().join(sub).to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let (a, b) = (run("a"), run("b"));
    assert_eq!(a, b);
    assert!(!a.contains("== storm"));
    assert!(dir.path().join("a/herd_attempts.svg").exists());
    assert!(!dir.path().join("a/storm_attempts.svg").exists());
}

#[test]
fn refused_settings_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("r");
    let o = out_dir.to_str().unwrap();
    for args in [
        &["simulate", "herd", "--outage", "2h", "--out", o][..],
        &[
            "simulate", "herd", "--base", "5s", "--cap", "1s", "--out", o,
        ],
        &["simulate", "storm", "--overload", "1.5", "--out", o],
        &["simulate", "storm", "--latency", "weird:1ms", "--out", o],
        &["simulate", "tornado", "--out", o],
        &["simulate", "--clients", "0", "--out", o],
    ] {
        let out = steadfast(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
    }
    assert!(!out_dir.exists(), "nothing written for refused settings");
}

#[test]
fn an_unwritable_folder_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a folder").unwrap();
    let out = steadfast(&[
        "simulate",
        "herd",
        "--clients",
        "10",
        "--outage",
        "1s",
        "--horizon",
        "30s",
        "--out",
        file.join("sub").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write"));
}

/// Runs `steadfast simulate ARGS --out <temp>`; returns (exit code, stdout, stderr).
fn simulate(args: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let out_dir = dir.path().join("r");
    let mut full = vec!["simulate"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--out", out_dir.to_str().expect("a UTF-8 path")]);
    let out = steadfast(&full);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_metastable_scenario_shows_the_collapse_and_its_cures() {
    let (code, stdout, stderr) = simulate(&["metastable", "--duration", "60s"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("== metastable"), "{stdout}");
    assert!(stdout.contains("Metastable Failures"), "{stdout}");
    assert!(stdout.contains("This run agrees"), "{stdout}");
    let plain = stdout
        .lines()
        .find(|l| l.starts_with("3 attempts "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(plain.contains("never"), "{plain}");
}

#[test]
fn every_refused_flag_is_named_in_the_message() {
    for (args, flag, rule) in [
        (
            &["herd", "--horizon", "99999999999h"][..],
            "--horizon",
            "1,000,000",
        ),
        (
            &["herd", "--clients", "10000000"][..],
            "--clients",
            "1,000,000",
        ),
        (
            &["tail", "--calls", "4294967295"][..],
            "--calls",
            "20,000,000",
        ),
        (
            &["storm", "--rate", "1000000", "--duration", "1h"][..],
            "--rate",
            "--duration",
        ),
        (
            &["metastable", "--duration", "35s"][..],
            "--trigger",
            "before --duration",
        ),
        (
            &["storm", "--latency", "exp:1e400s"][..],
            "--latency",
            "too large",
        ),
        (&["herd", "--outage", "1e400s"][..], "--outage", "exponents"),
        (
            &["quota", "--quota", "2000000000"][..],
            "--quota",
            "at most 1,000,000,000",
        ),
        (
            &["quota", "--rate", "100000", "--duration", "1h"][..],
            "--rate",
            "--duration",
        ),
        (
            &["storm", "--latency", "exp:1y"][..],
            "--latency",
            "unknown unit \"y\"",
        ),
    ] {
        let (code, _, stderr) = simulate(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(stderr.contains(rule), "{args:?}: {stderr}");
        assert!(!stderr.contains("`window`"), "{args:?}: {stderr}");
    }
}

#[test]
fn hours_are_a_latency_unit() {
    let (code, stdout, stderr) = simulate(&["tail", "--calls", "50", "--latency", "const:1h"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("3600000.00"), "{stdout}");
}

#[test]
fn zero_latency_gives_no_nan() {
    let (code, stdout, stderr) = simulate(&["tail", "--calls", "200", "--latency", "exp:0ms"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains("NaN"), "{stdout}");
    assert!(stdout.contains("both zero"), "{stdout}");
}

#[test]
fn accept_rates_are_modelled_exactly() {
    for (rate, shown) in [
        ("1", "1 per 1000 ms (1 per second)"),
        ("14", "14 per 1000 ms (14 per second)"),
        ("15", "15 per 1000 ms (15 per second)"),
        ("120", "12 per 100 ms (120 per second)"),
    ] {
        let (code, stdout, stderr) = simulate(&[
            "herd",
            "--clients",
            "20",
            "--outage",
            "1s",
            "--horizon",
            "5m",
            "--accept-rate",
            rate,
        ]);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.contains(shown), "{rate}: {stdout}");
    }
}

#[test]
fn herd_verdicts_stay_true_for_odd_flags() {
    // Nobody connects before the horizon: no "all connected after not all".
    let (code, stdout, stderr) = simulate(&[
        "herd",
        "--clients",
        "5",
        "--outage",
        "30s",
        "--horizon",
        "31s",
        "--base",
        "20s",
        "--cap",
        "40s",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stdout.contains("after not all"), "{stdout}");
    assert!(
        stdout.contains("when the run stopped at the horizon"),
        "{stdout}"
    );
    // Everyone connects: the slowest is named among the jittered ones, and
    // "the slowest" is never said of full jitter by mistake.
    let (code, stdout, _) = simulate(&["herd", "--clients", "200", "--outage", "2s"]);
    assert_eq!(code, Some(0));
    assert!(!stdout.contains("full jitter (the slowest)"), "{stdout}");
    assert!(
        stdout.contains("later than every jittered strategy")
            || stdout.contains("which is not the slowest"),
        "{stdout}"
    );
}

#[test]
fn help_lists_every_scenario() {
    let out = steadfast(&["simulate", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for name in [
        "herd",
        "storm",
        "metastable",
        "tail",
        "breaker",
        "overload",
        "every one of them",
    ] {
        assert!(help.contains(name), "{name}: {help}");
    }
    assert!(!help.contains("all    both"), "{help}");
}

#[test]
fn the_help_examples_agree_with_their_sources() {
    for args in [
        &[
            "storm",
            "--rate",
            "500",
            "--capacity",
            "10",
            "--overload",
            "0.3",
        ][..],
        &[
            "metastable",
            "--rate",
            "800",
            "--trigger",
            "5s",
            "--overload",
            "0.5",
        ][..],
        &["overload", "--rate", "1500", "--overload", "0.5"][..],
    ] {
        let (code, stdout, stderr) = simulate(args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(stdout.contains("This run agrees"), "{args:?}: {stdout}");
        assert!(!stdout.contains("does NOT agree"), "{args:?}: {stdout}");
    }
}
