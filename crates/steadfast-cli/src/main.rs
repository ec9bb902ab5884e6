//! The `steadfast` command: see `steadfast --help`.

use std::process::ExitCode;

use clap::Parser;
use steadfast_cli::cli::{Cli, Command};
use steadfast_cli::interrupt::Interrupt;

/// Whether the command line asks for `steadfast run` (its first argument
/// that is not an option is `run`).
fn runs_a_program() -> bool {
    std::env::args_os()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'))
        .is_some_and(|a| a == "run")
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // --help and --version exit 0; a usage error of `run` exits 125
            // (its own codes must not look like the program's), of the other
            // commands 2.
            let code = if !e.use_stderr() {
                0
            } else if runs_a_program() {
                steadfast_cli::exit::RUN_ERROR
            } else {
                steadfast_cli::exit::USAGE
            };
            return ExitCode::from(u8::try_from(code).unwrap_or(1));
        }
    };
    let code = match &cli.command {
        Command::Run(args) => {
            let interrupt = Interrupt::new();
            if let Err(e) = interrupt.install() {
                eprintln!("steadfast: cannot handle Ctrl-C ({e}); it will stop steadfast at once");
            }
            steadfast_cli::run::run(args, &interrupt)
        }
        Command::Schedule(args) => steadfast_cli::schedule::run(args),
        Command::Simulate(args) => steadfast_cli::simulate::run(args),
        Command::Get(args) => steadfast_cli::get::run(args),
        Command::Proxy(args) => {
            let interrupt = Interrupt::new();
            if let Err(e) = interrupt.install() {
                eprintln!("steadfast: cannot handle Ctrl-C ({e}); it will stop the proxy at once");
            }
            steadfast_cli::proxy::run(args, &interrupt)
        }
    };
    match u8::try_from(code) {
        Ok(c) => ExitCode::from(c),
        // Exit statuses beyond 255 exist on some platforms: pass them on.
        Err(_) => std::process::exit(code),
    }
}
