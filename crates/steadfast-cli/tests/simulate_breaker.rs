//! `steadfast simulate breaker` end to end: the flags it shares with the
//! storm scenario, its summary table and its charts.

mod command;

use command::{assert_png, assert_svg, steadfast};

#[test]
fn the_breaker_scenario_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("report");
    let out = steadfast(&[
        "simulate",
        "breaker",
        "--clients",
        "10",
        "--rate",
        "200",
        "--duration",
        "20s",
        "--incident-start",
        "5s",
        "--outage",
        "8s",
        "--seed",
        "3",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary = String::from_utf8(out.stdout).unwrap();
    assert!(summary.starts_with("== breaker"), "{summary}");
    assert!(!summary.contains("== storm"), "{summary}");
    for text in [
        "10 clients",
        "200 calls/s",
        "down from 5 s to 13 s",
        "Seed 3",
        "breaker + budget",
        "Release It!",
    ] {
        assert!(summary.contains(text), "{text}: {summary}");
    }
    let index = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    for stem in ["breaker_attempts", "breaker_success"] {
        assert!(index.contains(&format!("{stem}.svg")), "{stem}");
        assert_svg(&out_dir.join(format!("{stem}.svg")));
        assert_png(&out_dir.join(format!("{stem}.png")));
    }
}

#[test]
fn an_outage_past_the_end_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = steadfast(&[
        "simulate",
        "breaker",
        "--duration",
        "10s",
        "--incident-start",
        "5s",
        "--outage",
        "6s",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`outage_length`"));
}
