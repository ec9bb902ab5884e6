//! The `steadfast` command: see `steadfast --help`.

use std::process::ExitCode;

use clap::Parser;
use steadfast::CancelToken;
use steadfast_cli::cli::{Cli, Command};

fn main() -> ExitCode {
    // Usage errors exit 2 (and --help / --version 0) inside `parse`.
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Run(args) => {
            let cancel = CancelToken::new();
            let on_interrupt = cancel.clone();
            if let Err(e) = ctrlc::set_handler(move || on_interrupt.cancel()) {
                eprintln!("steadfast: cannot handle Ctrl-C ({e}); it will stop steadfast at once");
            }
            steadfast_cli::run::run(args, &cancel)
        }
        Command::Schedule(args) => steadfast_cli::schedule::run(args),
        Command::Simulate(args) => steadfast_cli::simulate::run(args),
    };
    match u8::try_from(code) {
        Ok(c) => ExitCode::from(c),
        // Exit statuses beyond 255 exist on some platforms: pass them on.
        Err(_) => std::process::exit(code),
    }
}
