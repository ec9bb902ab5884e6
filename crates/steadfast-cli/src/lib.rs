//! # steadfast-cli
//!
//! The library behind the `steadfast` command: its parsers of outside input
//! (durations, exit-code lists, backoff specs), the clap definition of the
//! command line, and the handling of one attempt's child process. The
//! parsers are public so that tests and the fuzz targets can call them.
#![warn(missing_docs)]

pub mod backoff;
pub mod child;
pub mod cli;
pub mod codes;
pub mod duration;
pub mod exit;
pub mod fuzzing;
pub mod get;
pub mod input;
pub mod interrupt;
pub mod plot;
pub mod proxy;
pub mod run;
mod runtime;
pub mod schedule;
pub mod simulate;
pub mod spec;
pub mod table;
