//! The exit codes of the `steadfast` command.
//!
//! `steadfast run` ends with its program's last exit code, or one of these
//! ([`RUN_ERROR`] for its own errors, usage errors included); the other
//! commands end with 0, [`FAILURE`] (output that cannot be written) or
//! [`USAGE`] (clap's errors, and what they check before they start), and
//! `get` also with its own codes ([`crate::get::TRANSPORT`],
//! [`crate::get::HTTP_ERROR`]) and [`TIMEOUT`]. Each command's `--help`
//! lists its codes.

/// Something went wrong that is not the user's input (writing a report failed...).
pub const FAILURE: i32 = 1;
/// Bad command-line input: an unknown option, a malformed duration, code list or spec.
pub const USAGE: i32 = 2;
/// `steadfast run`'s own failure (a bad flag value, no program, standard
/// input that cannot be read, a program that cannot be waited for): 125, as
/// `timeout`, `env` and `nohup` do, so it never looks like the program's own
/// exit status.
pub const RUN_ERROR: i32 = 125;
/// The `--deadline` or an `--attempt-timeout` ended the run (as `timeout(1)`).
pub const TIMEOUT: i32 = 124;
/// The program exists but could not be executed (as a shell's 126).
pub const CANNOT_EXECUTE: i32 = 126;
/// The program was not found (as a shell's 127).
pub const NOT_FOUND: i32 = 127;
/// Interrupted by Ctrl-C (SIGINT): 128 + 2, as a shell reports it (SIGTERM
/// gives 143 and SIGHUP 129 the same way).
pub const INTERRUPTED: i32 = 130;
