//! `steadfast simulate quota` end to end: its flags, its summary table, its
//! notes and its charts.

mod command;

use command::{assert_png, assert_svg, steadfast};

#[test]
fn the_quota_scenario_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("report");
    let out = steadfast(&[
        "simulate",
        "quota",
        "--quota",
        "50",
        "--clients",
        "10",
        "--rate",
        "80",
        "--duration",
        "20s",
        "--skew",
        "0",
        "--retry-after",
        "ms",
        "--latency",
        "const:5ms",
        "--backoff",
        "exponential:initial=50ms",
        "--seed",
        "3",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary = String::from_utf8(out.stdout).unwrap();
    assert!(summary.starts_with("== quota"), "{summary}");
    assert!(!summary.contains("== storm"), "{summary}");
    for text in [
        "10 clients share a provider's quota of 50 requests/s (GCRA, a burst of 50)",
        "80 calls/s in all (1.6 times the quota), 8.0 calls/s from each client, for 20 s",
        "exact wait in milliseconds rounded up",
        "serves one it admits in const:5ms",
        "the configured backoff schedule",
        "its share, 5/s each (a burst of 5)",
        "provider (quota 50/s)",
        "no limit, ignoring Retry-After",
        "shared limit, waiting",
        "Seed 3",
    ] {
        assert!(summary.contains(text), "{text}: {summary}");
    }
    let index = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    for stem in ["quota_received", "quota_goodput", "quota_latency"] {
        assert!(index.contains(&format!("{stem}.svg")), "{stem}");
        assert_svg(&out_dir.join(format!("{stem}.svg")));
        assert_png(&out_dir.join(format!("{stem}.png")));
    }
}

#[test]
fn refused_quota_flags_exit_2_and_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("r");
    let o = o.to_str().unwrap();
    for (args, flag) in [
        (
            &["simulate", "quota", "--quota", "1000000001", "--out", o][..],
            "invalid value for --quota: must be at most 1,000,000,000 requests per second",
        ),
        (
            &["simulate", "quota", "--quota", "0", "--out", o],
            "--quota",
        ),
        (
            &["simulate", "quota", "--skew", "NaN", "--out", o],
            "--skew",
        ),
        (
            &["simulate", "quota", "--retry-after", "minutes", "--out", o],
            "--retry-after",
        ),
        (
            &["simulate", "quota", "--duration", "0s", "--out", o],
            "--duration",
        ),
    ] {
        let out = steadfast(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
    assert!(!dir.path().join("r").exists(), "nothing written");
}
