//! The `steadfast` command: see `steadfast --help`.

use std::process::ExitCode;

use clap::Parser;
use steadfast_cli::cli::{Cli, Command};
use steadfast_cli::interrupt::Interrupt;

fn main() -> ExitCode {
    // Usage errors exit 2 (and --help / --version 0) inside `parse`.
    let cli = Cli::parse();
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
    };
    match u8::try_from(code) {
        Ok(c) => ExitCode::from(c),
        // Exit statuses beyond 255 exist on some platforms: pass them on.
        Err(_) => std::process::exit(code),
    }
}
