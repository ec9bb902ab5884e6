//! `steadfast schedule` end to end: every format parses, seeded output is
//! deterministic, and `--plot` writes a valid SVG or PNG.

mod command;

use std::process::Output;

use command::{assert_png, assert_svg, steadfast};

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

#[test]
fn table_lists_each_retry_with_the_cumulative_delay() {
    let text = stdout(&steadfast(&[
        "schedule",
        "--backoff",
        "linear:initial=1s,step=500ms",
        "--attempts",
        "4",
    ]));
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["attempt", "delay", "cumulative"]);
    assert_eq!(rows[1], ["2", "1s", "1s"]);
    assert_eq!(rows[2], ["3", "1.5s", "2.5s"]);
    assert_eq!(rows[3], ["4", "2s", "4.5s"]);
    assert_eq!(rows.len(), 4);
}

#[test]
fn json_parses_and_sums_up() {
    let text = stdout(&steadfast(&[
        "schedule",
        "--backoff",
        "exponential:initial=100ms,max=1s",
        "--seed",
        "42",
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["seed"], 42);
    assert_eq!(v["backoff"], "exponential:initial=100ms,max=1s");
    let delays = v["delays"].as_array().unwrap();
    assert_eq!(delays.len(), 9, "10 attempts by default: 9 delays");
    let mut sum = 0.0;
    for (i, d) in delays.iter().enumerate() {
        assert_eq!(d["attempt"], i + 2);
        let delay = d["delay_s"].as_f64().unwrap();
        assert!(
            (0.0..=1.0).contains(&delay),
            "full jitter under the cap: {delay}"
        );
        sum += delay;
        assert!((d["cumulative_s"].as_f64().unwrap() - sum).abs() < 1e-6);
    }
}

#[test]
fn additive_jitter_adds_to_the_curve_and_keeps_the_cap() {
    // backon's `ExponentialBuilder::default().with_jitter()`: 1s x2, max
    // 60s, plus up to 1s; 8 attempts, so the curve reaches the cap.
    let args = [
        "schedule",
        "--backoff",
        "exponential:initial=1s,max=60s,jitter=additive:1s",
        "--attempts",
        "9",
        "--seed",
        "11",
        "--format",
        "json",
    ];
    let text = stdout(&steadfast(&args));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // The canonical form of the spec.
    assert_eq!(
        v["backoff"],
        "exponential:initial=1s,max=1m,jitter=additive:1s"
    );
    let delays = v["delays"].as_array().unwrap();
    assert_eq!(delays.len(), 8);
    for (n, d) in delays.iter().enumerate() {
        let delay = d["delay_s"].as_f64().unwrap();
        let curve = f64::from(1u32 << n).min(60.0);
        assert!(
            delay >= curve && delay < curve + 1.0 && delay <= 60.0,
            "retry {n}: {delay} for curve {curve}"
        );
    }
    // 1s x 2^6 = 64s: on the plateau the cap wins over the jitter.
    assert_eq!(delays[6]["delay_s"].as_f64(), Some(60.0));
    assert_eq!(text, stdout(&steadfast(&args)), "seeded: the same delays");
}

#[test]
fn csv_parses() {
    let text = stdout(&steadfast(&[
        "schedule",
        "--backoff",
        "constant:delay=250ms",
        "--attempts",
        "3",
        "--format",
        "csv",
    ]));
    assert_eq!(
        text,
        "attempt,delay_s,cumulative_s\n2,0.25,0.25\n3,0.25,0.5\n"
    );
}

#[test]
fn seeded_output_is_deterministic_and_seeds_differ() {
    let args = |seed: &'static str| {
        [
            "schedule",
            "--backoff",
            "decorrelated:initial=10ms,max=10s",
            "--seed",
            seed,
            "--format",
            "csv",
            "--attempts",
            "20",
        ]
    };
    let a = stdout(&steadfast(&args("7")));
    let b = stdout(&steadfast(&args("7")));
    let c = stdout(&steadfast(&args("8")));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn samples_give_an_ordered_envelope() {
    let args = &[
        "schedule",
        "--backoff",
        "exponential:initial=100ms,max=5s",
        "--samples",
        "500",
        "--seed",
        "1",
        "--attempts",
        "6",
        "--format",
        "json",
    ];
    let text = stdout(&steadfast(args));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["samples"], 500);
    let rows = v["delays"].as_array().unwrap();
    assert_eq!(rows.len(), 5);
    for r in rows {
        let (p5, p50, p95) = (
            r["p5_s"].as_f64().unwrap(),
            r["p50_s"].as_f64().unwrap(),
            r["p95_s"].as_f64().unwrap(),
        );
        assert!(p5 <= p50 && p50 <= p95, "{r}");
        assert_eq!(r["runs"], 500);
    }
    // Full jitter on 100ms * 2^4 = 1.6s: the 95th percentile is near the top.
    let last = rows[4]["p95_s"].as_f64().unwrap();
    assert!(last > 1.2 && last <= 1.6, "{last}");
    let again = stdout(&steadfast(args));
    assert_eq!(text, again);
}

#[test]
fn plots_a_valid_svg_and_png() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("schedule.svg");
    stdout(&steadfast(&[
        "schedule",
        "--backoff",
        "grpc",
        "--seed",
        "3",
        "--plot",
        svg.to_str().unwrap(),
    ]));
    assert!(assert_svg(&svg).contains("attempt"));

    let png = dir.path().join("envelope.png");
    stdout(&steadfast(&[
        "schedule",
        "--backoff",
        "a6",
        "--samples",
        "50",
        "--plot",
        png.to_str().unwrap(),
    ]));
    assert!(assert_png(&png).len() > 1000);
}

#[test]
fn bad_input_exits_2() {
    for args in [
        &["schedule", "--backoff", "exponential:multiplier=0.5"][..],
        &["schedule", "--backoff", "grpc", "--format", "xml"],
        &["schedule", "--backoff", "grpc", "--attempts", "1"],
        &["schedule", "--backoff", "grpc", "--plot", "out.jpg"],
        &["schedule"],
        &[
            "schedule",
            "--backoff",
            "grpc",
            "--samples",
            "1000000",
            "--attempts",
            "100000",
        ],
    ] {
        let out = steadfast(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    for (spec, needle) in [
        (
            "exponential:jitter=additive:lots",
            "`jitter=additive:` takes the largest amount to add",
        ),
        (
            "grpc:jitter=additive:1s",
            "`jitter` must be a proportional factor",
        ),
    ] {
        let out = steadfast(&["schedule", "--backoff", spec]);
        assert_eq!(out.status.code(), Some(2), "{spec}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{spec}: {err}");
    }
    let out = steadfast(&["schedule", "--backoff", "exponential:multiplier=0.5"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`multiplier` must be a finite number >= 1"),
        "{err}"
    );
}

/// The plot file is checked before anything is computed or printed: no
/// table, then a drawing error, but one message naming the file.
#[test]
fn an_unwritable_plot_fails_before_anything_is_printed() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("folder.svg");
    std::fs::create_dir(&folder).unwrap();
    for path in [
        "/nonexistent-dir/x/plot.svg",
        "/nonexistent/x.svg",
        folder.to_str().unwrap(),
    ] {
        let out = steadfast(&["schedule", "--backoff", "grpc", "--plot", path]);
        assert_eq!(out.status.code(), Some(1), "{path}");
        assert!(out.stdout.is_empty(), "{path}: a table was printed");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("--plot: cannot write {path}")),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // An existing file is kept as it is until the chart replaces it.
    let svg = dir.path().join("again.svg");
    std::fs::write(&svg, "old").unwrap();
    stdout(&steadfast(&[
        "schedule",
        "--backoff",
        "constant",
        "--plot",
        svg.to_str().unwrap(),
    ]));
    assert_svg(&svg);
}

#[test]
fn an_initial_delay_above_the_cap_is_refused() {
    for (spec, needle) in [
        (
            "exponential:initial=10s,max=1s",
            "`initial` must not be above `max`: every delay would be `max` (got initial=10s with max=1s)",
        ),
        (
            "exponential:initial=20s",
            "(got initial=20s with max=10s, the preset's default)",
        ),
    ] {
        let out = steadfast(&["schedule", "--backoff", spec]);
        assert_eq!(out.status.code(), Some(2), "{spec}");
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{spec}: {err}");
    }
    // The same spec through run is its usage error, 125.
    let out = steadfast(&[
        "run",
        "--backoff",
        "exponential:initial=10s,max=1s",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
}

#[test]
fn help_lists_the_exit_codes() {
    let out = steadfast(&["schedule", "--help"]);
    let text = stdout(&out);
    let codes = text
        .split_once("Exit status:")
        .expect("an exit status section")
        .1;
    for needle in ["\n  0 ", "\n  1 ", "\n  2 ", "--plot"] {
        assert!(codes.contains(needle), "{needle:?} in {codes}");
    }
}
