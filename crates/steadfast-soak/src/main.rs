//! `steadfast-soak`: many concurrent callers of steadfast's HTTP client and
//! gRPC layer against hostile servers on 127.0.0.1, with every call judged
//! against what the server did with its attempts.
//!
//! ```text
//! cargo run -p steadfast-soak --release -- --calls 100000 --seeds 1,2   # the long run
//! cargo run -p steadfast-soak -- --calls 3000 --check                    # what CI runs
//! ```
//!
//! Per seed, per protocol: a run at `--faults` (retryable and final
//! statuses, hostile `Retry-After` and pushback, stalls past the deadline,
//! resets in the head and the body, closes before the head, a trickling
//! body; for gRPC a head then a failure, resets before and after the head,
//! a server that enforces `grpc-timeout` as tonic does), then a retry storm
//! (`--storm-faults` of plain retryable failures) with throttling, and for
//! gRPC without it too, to show what throttling holds back.
//!
//! What it checks of every call, and what `--check` makes fatal: no panic;
//! no POST without opt-in executed twice; no gRPC retry after a commit;
//! `grpc-previous-rpc-attempts` right on every retry; no call returns later
//! than its deadline plus `--late-slack-ms` plus the runtime's own worst
//! timer lag in that run (measured beside it, and printed; with
//! `--lateness-report-only`, as CI runs it, lateness is printed and not
//! judged: a loaded host makes any bound on it fail); descriptors,
//! tasks and connections back to their start once the client is dropped;
//! the error (or status) describes the server's last attempt; the client's
//! attempt count is the server's; attempts within the policy; and, under
//! throttling, attempts per call at most `--max-amplification`.
#![allow(clippy::print_stdout)]

mod callers;
mod findings;
mod grpc_run;
mod grpc_server;
mod http_run;
mod http_server;
mod ledger;
mod listener;
mod plan;
mod probe;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::findings::Findings;
use crate::plan::Plan;

/// The soak's knobs.
#[derive(Debug, Parser)]
#[command(
    name = "steadfast-soak",
    about = "Soak steadfast's HTTP client and gRPC layer against hostile servers on 127.0.0.1"
)]
struct Args {
    /// Calls per protocol, per seed.
    #[arg(long, default_value_t = 2000)]
    calls: u64,
    /// The seeds of the fault plans, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    seeds: Vec<u64>,
    /// The share of attempts that get a fault, from 0 to 1.
    #[arg(long, default_value_t = 0.2)]
    faults: f64,
    /// Calls in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Each call's deadline, in milliseconds.
    #[arg(long, default_value_t = 300)]
    deadline_ms: u64,
    /// Attempts per call (the first counted).
    #[arg(long, default_value_t = 4)]
    attempts: u32,
    /// How late past its deadline a call may return, beyond the runtime's
    /// own measured timer lag, in milliseconds.
    #[arg(long, default_value_t = 5)]
    late_slack_ms: u64,
    /// Print how late calls returned without judging it (what CI runs:
    /// how late a call wakes on a busy host is the host's, not the code's;
    /// the long run judges it, and the deadlines are proved on virtual
    /// time by the unit tests).
    #[arg(long)]
    lateness_report_only: bool,
    /// Calls of each retry storm (0: no storm).
    #[arg(long, default_value_t = 1000)]
    storm_calls: u64,
    /// The share of attempts that fail in a storm.
    #[arg(long, default_value_t = 0.9)]
    storm_faults: f64,
    /// The most attempts per call a throttled storm may make.
    #[arg(long, default_value_t = 1.2)]
    max_amplification: f64,
    /// Which protocols to soak.
    #[arg(long, value_enum, default_value_t = Protocols::Both)]
    protocol: Protocols,
    /// Exit with status 1 if any invariant broke.
    #[arg(long)]
    check: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Protocols {
    Http,
    Grpc,
    Both,
}

/// What every run of the soak shares.
#[derive(Debug, Clone)]
pub struct Setup {
    pub calls: u64,
    pub concurrency: usize,
    pub deadline: Duration,
    pub attempts: u32,
    /// How late past its deadline (and the timer lag) a call may return;
    /// `None`: lateness is reported, not judged.
    pub late_slack: Option<Duration>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !(0.0..=1.0).contains(&args.faults) || !(0.0..=1.0).contains(&args.storm_faults) {
        eprintln!("steadfast-soak: --faults and --storm-faults take a share from 0 to 1");
        return ExitCode::from(2);
    }
    if args.concurrency == 0 || args.attempts == 0 || args.deadline_ms == 0 {
        eprintln!("steadfast-soak: --concurrency, --attempts and --deadline-ms take 1 or more");
        return ExitCode::from(2);
    }
    probe::count_panics();
    let servers = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("soak-server")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("steadfast-soak: no server runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let clients = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("soak-client")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("steadfast-soak: no client runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let setup = Setup {
        calls: args.calls,
        concurrency: args.concurrency,
        deadline: Duration::from_millis(args.deadline_ms),
        attempts: args.attempts,
        late_slack: (!args.lateness_report_only).then(|| Duration::from_millis(args.late_slack_ms)),
    };
    println!(
        "steadfast-soak: {} calls per protocol per seed, {:.0} % faults, {} in flight, deadline {} ms, {} attempts",
        args.calls,
        args.faults * 100.0,
        args.concurrency,
        args.deadline_ms,
        args.attempts
    );
    let all = clients.block_on(run(&args, &setup, servers.handle()));
    let mut broken = 0;
    for findings in &all {
        println!("{findings}");
        broken += findings.violations();
    }
    let panics = probe::panics();
    println!("panics: {panics}");
    drop(clients);
    drop(servers);
    if broken == 0 && panics == 0 {
        println!("steadfast-soak: every invariant held");
        ExitCode::SUCCESS
    } else {
        println!("steadfast-soak: {broken} broken invariants, {panics} panics");
        if args.check {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}

async fn run(args: &Args, setup: &Setup, servers: &tokio::runtime::Handle) -> Vec<Findings> {
    let http = args.protocol != Protocols::Grpc;
    let grpc = args.protocol != Protocols::Http;
    let mut all = Vec::new();
    for &seed in &args.seeds {
        let plan = Plan {
            seed,
            fault_rate: args.faults,
        };
        if http {
            let title = format!("HTTP, seed {seed}, {:.0} % faults", args.faults * 100.0);
            all.push(
                http_run::soak(
                    &title,
                    setup,
                    servers,
                    Arc::new(move |c, n| plan.http(c, n)),
                    false,
                )
                .await,
            );
        }
        if grpc {
            let title = format!("gRPC, seed {seed}, {:.0} % faults", args.faults * 100.0);
            all.push(
                grpc_run::soak(
                    &title,
                    setup,
                    servers,
                    Arc::new(move |c, n| plan.grpc(c, n)),
                    false,
                )
                .await,
            );
        }
        if args.storm_calls == 0 {
            continue;
        }
        let storm = Plan {
            seed,
            fault_rate: args.storm_faults,
        }
        .storm();
        let stormy = Setup {
            calls: args.storm_calls,
            ..setup.clone()
        };
        let pct = args.storm_faults * 100.0;
        if http {
            let title = format!("HTTP storm, seed {seed}, {pct:.0} % failures, token bucket");
            let mut f = http_run::soak(
                &title,
                &stormy,
                servers,
                Arc::new(move |c, n| storm.http(c, n)),
                true,
            )
            .await;
            bound(&mut f, args.max_amplification);
            all.push(f);
        }
        if grpc {
            let title = format!("gRPC storm, seed {seed}, {pct:.0} % failures, retryThrottling");
            let mut f = grpc_run::soak(
                &title,
                &stormy,
                servers,
                Arc::new(move |c, n| storm.grpc(c, n)),
                true,
            )
            .await;
            bound(&mut f, args.max_amplification);
            all.push(f);
            let title = format!(
                "gRPC storm, seed {seed}, {pct:.0} % failures, no throttling (for comparison)"
            );
            all.push(
                grpc_run::soak(
                    &title,
                    &stormy,
                    servers,
                    Arc::new(move |c, n| storm.grpc(c, n)),
                    false,
                )
                .await,
            );
        }
    }
    all
}

/// Under throttling, attempts per call stay at most `max`.
fn bound(findings: &mut Findings, max: f64) {
    let amplification = findings.amplification();
    if amplification > max {
        findings.violation("throttling let the storm amplify past its bound", || {
            format!("{amplification:.3} attempts per call, bound {max}")
        });
    }
}
