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
    assert!(summary.contains("20 clients"), "{summary}");
    assert!(summary.contains("Seed 5"), "{summary}");
    let index = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    for stem in [
        "herd_attempts",
        "herd_connected",
        "storm_attempts",
        "storm_success",
        "tail_latency",
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
