//! The soak's short variant, as `.ci/run` runs it: the real binary, its
//! servers and clients on 127.0.0.1, every invariant that load cannot break
//! asserted (`--check`; lateness reported, not judged).
//! Ignored by default (about 20 s of real traffic); run it with
//! `cargo test --workspace --test soak -- --ignored --nocapture`. The long
//! run and its figures: RELIABILITY.md.

use std::process::Command;

#[test]
#[ignore = "20 s of real traffic: .ci/run runs it with --ignored"]
fn the_short_soak_holds_every_invariant() {
    let out = Command::new(env!("CARGO_BIN_EXE_steadfast-soak"))
        .args([
            "--calls",
            "3000",
            "--storm-calls",
            "1000",
            "--seeds",
            "1,2",
            "--check",
            // How late a call wakes on a loaded host is the host's doing:
            // printed, not judged, here (the long run judges it).
            "--lateness-report-only",
        ])
        .output()
        .expect("the soak runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the soak found broken invariants");
    assert!(stdout.ends_with("steadfast-soak: every invariant held\n"));
    // Every protocol and phase ran, for both seeds.
    for phase in ["HTTP, seed", "gRPC, seed", "HTTP storm", "gRPC storm"] {
        assert_eq!(
            stdout.matches(phase).count(),
            if phase == "gRPC storm" { 4 } else { 2 },
            "{phase}"
        );
    }
}

#[test]
fn bad_knobs_are_usage_errors() {
    for args in [
        &["--faults", "1.5"][..],
        &["--concurrency", "0"],
        &["--calls", "-3"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_steadfast-soak"))
            .args(args)
            .output()
            .expect("the soak runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
