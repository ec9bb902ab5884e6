//! `steadfast simulate`'s flags end to end: a flag the chosen scenario does
//! not take, a zero service time where a capacity is computed from it, and
//! negative numbers, each refused with a message that says what is accepted.

mod command;

use command::steadfast;

/// Runs `steadfast simulate ARGS --out <temp>`; returns (exit code, stdout,
/// stderr, whether the report folder was created).
fn simulate(args: &[&str]) -> (Option<i32>, String, String, bool) {
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
        out_dir.exists(),
    )
}

#[test]
fn a_flag_the_scenario_does_not_take_is_a_usage_error_naming_the_ones_that_do() {
    for (args, message) in [
        (
            &["herd", "--rate", "100"][..],
            "--rate does not apply to the herd scenario; it applies to storm, metastable, \
             tail, breaker, overload, quota and replicas",
        ),
        (
            &["herd", "--trigger", "5s"],
            "--trigger does not apply to the herd scenario; it applies to metastable and \
             overload",
        ),
        (
            &["storm", "--trigger", "5s"],
            "--trigger does not apply to the storm scenario; it applies to metastable and \
             overload",
        ),
        (
            &["tail", "--clients", "5"],
            "--clients does not apply to the tail scenario; it applies to herd, storm, \
             metastable, breaker, overload, quota and replicas",
        ),
        (
            &["breaker", "--overload", "0.5"],
            "--overload does not apply to the breaker scenario; it applies to storm, \
             metastable and overload",
        ),
        (
            &["metastable", "--limit-max", "50"],
            "--limit-max does not apply to the metastable scenario; it applies to overload",
        ),
        (
            &["overload", "--outage", "5s"],
            "--outage does not apply to the overload scenario; it applies to herd, storm and \
             breaker",
        ),
        (
            &["overload", "--calls", "500"],
            "--calls does not apply to the overload scenario; it applies to tail",
        ),
        (
            &["storm", "--accept-rate", "10"],
            "--accept-rate does not apply to the storm scenario; it applies to herd",
        ),
        (
            &["quota", "--capacity", "10"],
            "--capacity does not apply to the quota scenario; it applies to storm, \
             metastable, breaker and overload",
        ),
        (
            &["quota", "--attempt-timeout", "1s"],
            "--attempt-timeout does not apply to the quota scenario; it applies to \
             metastable and overload",
        ),
        (
            &["overload", "--quota", "50"],
            "--quota does not apply to the overload scenario; it applies to quota",
        ),
        (
            &["quota", "--bad-replicas", "2"],
            "--bad-replicas does not apply to the quota scenario; it applies to replicas",
        ),
        (
            &["storm", "--retry-after", "ms"],
            "--retry-after does not apply to the storm scenario; it applies to quota",
        ),
    ] {
        let (code, stdout, stderr, wrote) = simulate(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(stdout.is_empty() && !wrote, "{args:?}: nothing is run");
    }
}

#[test]
fn the_overload_scenario_takes_the_metastable_flags_and_its_own() {
    let (code, stdout, stderr, _) = simulate(&[
        "overload",
        "--clients",
        "2",
        "--rate",
        "400",
        "--duration",
        "12s",
        "--capacity",
        "8",
        "--incident-start",
        "4s",
        "--trigger",
        "4s",
        "--overload",
        "0.5",
        "--attempt-timeout",
        "300ms",
        "--backoff",
        "constant:delay=50ms",
        "--limit-window",
        "200ms",
        "--limit-min",
        "2",
        "--limit-max",
        "40",
        "--latency",
        "exp:20ms",
        "--seed",
        "2",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("== overload"), "{stdout}");
}

#[test]
fn a_zero_service_time_is_refused_where_a_capacity_comes_from_it() {
    for scenario in ["storm", "metastable", "breaker", "overload"] {
        for latency in ["exp:0ms", "const:0s", "lognormal:0ms:1"] {
            let (code, stdout, stderr, wrote) = simulate(&[scenario, "--latency", latency]);
            assert_eq!(code, Some(2), "{scenario} {latency}: {stderr}");
            assert!(
                stderr.contains("invalid value for --latency: must have a mean above zero"),
                "{scenario} {latency}: {stderr}"
            );
            assert!(!stdout.contains("inf") && !wrote, "{scenario}: {stdout}");
        }
    }
    // A mixture with some instant requests has a capacity.
    let (code, stdout, stderr, _) = simulate(&[
        "storm",
        "--duration",
        "20s",
        "--incident-start",
        "5s",
        "--outage",
        "5s",
        "--latency",
        "0.5*const:0ms + 0.5*exp:10ms",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("a server of about 6000 requests/s"),
        "{stdout}"
    );
}

#[test]
fn a_negative_number_is_refused_with_the_range_accepted() {
    for (args, accepted) in [
        (&["storm", "--clients", "-5"][..], "from 1 to 4294967295"),
        (&["storm", "--capacity", "-1"], "from 1 to 4294967295"),
        (&["overload", "--limit-min", "-2"], "from 1 to 4294967295"),
        (&["tail", "--calls", "-100"], "from 1 to 4294967295"),
        (&["herd", "--accept-rate", "-5"], "from 1 to 4294967295"),
        (&["storm", "--rate", "-5"], "calls per second > 0"),
        (&["storm", "--seed", "-1"], "from 0 to 18446744073709551615"),
        (&["storm", "--overload", "-0.5"], "a number from 0 to 1"),
        (&["storm", "--incident-start", "-5s"], "cannot be negative"),
        (&["herd", "--outage", "-1s"], "cannot be negative"),
        (&["metastable", "--trigger", "-2s"], "cannot be negative"),
        (&["quota", "--quota", "-100"], "from 1 to 4294967295"),
        (&["quota", "--skew", "-1"], "a number from 0 up"),
    ] {
        let (code, _, stderr, wrote) = simulate(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(accepted), "{args:?}: {stderr}");
        assert!(!stderr.contains("-- -"), "{args:?}: {stderr}");
        assert!(!wrote);
    }
    // A missing value is still said to be missing, not taken from the next flag.
    let (code, _, stderr, _) = simulate(&["storm", "--clients", "--rate", "5"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("a value is required"), "{stderr}");
}

#[test]
fn the_replicas_scenario_takes_its_flags() {
    let (code, stdout, stderr, _) = simulate(&[
        "replicas",
        "--replicas",
        "3",
        "--bad-replicas",
        "1",
        "--clients",
        "4",
        "--rate",
        "200",
        "--duration",
        "5s",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("== replicas"), "{stdout}");
    assert!(stdout.contains("4 clients"), "{stdout}");
    assert!(stdout.contains("against 3 replicas"), "{stdout}");
    // Every replica bad is refused, naming the field.
    let (code, _, stderr, _) = simulate(&["replicas", "--replicas", "3", "--bad-replicas", "3"]);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("`bad`"), "{stderr}");
}
