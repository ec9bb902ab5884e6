//! `steadfast simulate overload` end to end: its flags, its summary table,
//! its verdict and its charts.

mod command;

use command::{assert_png, assert_svg, steadfast};

#[test]
fn the_overload_scenario_writes_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("report");
    let out = steadfast(&[
        "simulate",
        "overload",
        "--rate",
        "500",
        "--capacity",
        "20",
        "--duration",
        "24s",
        "--incident-start",
        "8s",
        "--trigger",
        "8s",
        "--seed",
        "3",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary = String::from_utf8(out.stdout).unwrap();
    assert!(summary.starts_with("== overload"), "{summary}");
    assert!(!summary.contains("== storm"), "{summary}");
    for text in [
        "1 client makes 500 calls/s",
        "20 workers",
        "(5 of 20 workers) from 8 s to 16 s",
        "Seed 3",
        "static 20",
        "static 10",
        "Gradient2 + retries",
        "Performance Under Load",
    ] {
        assert!(summary.contains(text), "{text}: {summary}");
    }
    let index = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    for stem in ["overload_limit", "overload_goodput", "overload_latency"] {
        assert!(index.contains(&format!("{stem}.svg")), "{stem}");
        assert_svg(&out_dir.join(format!("{stem}.svg")));
        assert_png(&out_dir.join(format!("{stem}.png")));
    }
}

#[test]
fn refused_overload_flags_exit_2_and_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let o = dir.path().join("r");
    let o = o.to_str().unwrap();
    for (args, flag) in [
        (
            &[
                "simulate",
                "overload",
                "--limit-min",
                "30",
                "--limit-max",
                "10",
                "--out",
                o,
            ][..],
            "--limit-max",
        ),
        (
            &["simulate", "overload", "--overload", "0", "--out", o],
            "--overload",
        ),
        (
            &["simulate", "overload", "--duration", "40s", "--out", o],
            "--incident-start and --trigger",
        ),
        (
            &["simulate", "overload", "--limit-min", "0", "--out", o],
            "--limit-min",
        ),
    ] {
        let out = steadfast(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
    assert!(!dir.path().join("r").exists(), "nothing written");
}
