//! Running the `steadfast` binary and checking what it wrote: included with
//! `mod command;` by each end-to-end test binary (each uses its own part).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// The binary under test, built by cargo for the integration tests.
pub const STEADFAST: &str = env!("CARGO_BIN_EXE_steadfast");

/// Runs `steadfast <args>` to completion.
pub fn steadfast(args: &[&str]) -> Output {
    Command::new(STEADFAST)
        .args(args)
        .output()
        .expect("steadfast runs")
}

/// The exit code (the process was not killed by a signal).
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited with a code")
}

/// Standard error, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Checks that `path` holds a whole SVG document.
pub fn assert_svg(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("the SVG is there");
    assert!(text.starts_with("<svg"), "{}", path.display());
    assert!(text.trim_end().ends_with("</svg>"), "{}", path.display());
    text
}

/// Checks that `path` holds a PNG file.
pub fn assert_png(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).expect("the PNG is there");
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{}",
        path.display()
    );
    bytes
}
