//! The command line, as clap types: `steadfast run | schedule | simulate | get | proxy`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::codes::CodeSet;
use crate::duration::parse_duration;
use crate::input::{StdinMode, parse_size};

use crate::spec::BackoffSpec;

/// The `steadfast` command.
#[derive(Debug, Parser)]
#[command(
    name = "steadfast",
    version,
    about = "Retry a program or an HTTP request with backoff, show a backoff schedule, simulate retry storms, or inject faults with a proxy.",
    propagate_version = true
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands (room is left for more, such as an HTTP client).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a program, retrying while it fails.
    #[command(
        long_about = RUN_ABOUT,
        after_long_help = RUN_EXAMPLES,
        override_usage = "steadfast run [OPTIONS] -- PROGRAM [ARGS]..."
    )]
    Run(RunArgs),
    /// Print (or plot) the delays of a backoff schedule.
    #[command(long_about = SCHEDULE_ABOUT, after_long_help = SCHEDULE_EXAMPLES)]
    Schedule(ScheduleArgs),
    /// Simulate many clients retrying against a server, and write a report.
    #[command(long_about = SIMULATE_ABOUT, after_long_help = SIMULATE_EXAMPLES)]
    Simulate(SimulateArgs),
    /// Send an HTTP request, retrying it while the server is unavailable (see `get --help`).
    #[command(long_about = crate::get::GET_ABOUT, after_long_help = crate::get::GET_EXAMPLES)]
    Get(crate::get::GetArgs),
    /// Forward connections to a server, injecting faults on purpose (see `proxy --help`).
    #[command(long_about = crate::proxy::PROXY_ABOUT, after_long_help = crate::proxy::PROXY_EXAMPLES)]
    Proxy(crate::proxy::ProxyArgs),
}

const SIMULATE_ABOUT: &str = "\
Simulate many clients retrying against a server, and write a report.

The simulator drives steadfast's real backoff schedules, retry policies, \
retry controls and rate limits on virtual time (a run of minutes takes seconds). Scenarios:
  herd        clients reconnecting after an outage, per jitter strategy
  storm       a retry storm during an incident, per retry control
  metastable  a short overload that retries turn into a lasting collapse,
              and what prevents it (budgets, token bucket, deadlines)
  tail        tail latency, with and without hedged requests
  breaker     a dependency down for a while, with and without a circuit
              breaker (takes the storm flags: --clients --rate --duration
              --capacity --latency --incident-start --outage --backoff)
  overload    a server whose capacity drops and recovers: no concurrency
              limit, static limits, AIMD, Vegas, Gradient2, with and
              without retries (takes the metastable flags and --limit-*)
  quota       many clients sharing one provider's quota (429 with
              Retry-After): no limit (retries ignoring or honouring
              Retry-After), per-client limits, one shared limit, refusing
              or waiting (takes --quota --skew --retry-after --clients
              --rate --duration --latency --backoff)
  replicas    one bad replica among good ones: retries anywhere, retries
              elsewhere (an endpoint set), and with outlier ejection
              (takes --replicas --bad-replicas --clients --rate --duration
              --latency --backoff)
  all         every one of them (the default)

Prints the summary tables and writes SVG and PNG charts and an index.html \
into --out. Flags not given keep the scenario's built-in defaults; the same \
seed gives the same numbers.";

const SIMULATE_EXAMPLES: &str = "\
Examples:
  steadfast simulate
  steadfast simulate herd --clients 5000 --outage 30s --accept-rate 1000
  steadfast simulate metastable --rate 800 --trigger 5s --overload 0.5
  steadfast simulate overload --rate 1500 --overload 0.5
  steadfast simulate quota --quota 50 --clients 10 --skew 0 --retry-after ms
  steadfast simulate storm --rate 500 --capacity 10 --overload 0.3 --out storm-report";

const RUN_ABOUT: &str = "\
Run a program, retrying while it fails.

The options of run come first, then `--` and the program (`--` may be left \
out unless the program's name starts with `-`). From the program's name on, \
every argument is the program's own, even one that looks like an option of \
run. Before it, an argument that starts with `-` and is no option of run is \
a usage error (exit 125, with a suggestion when an option is close): a \
mistyped `--atempts` is never run as a program.

The program is started directly, without a shell, so its arguments are passed \
as they are. Its standard output and error are inherited. Between attempts \
steadfast waits as the backoff schedule says, and prints one line per retry \
on stderr (with a live countdown when stderr is a terminal).

Standard input: a terminal is inherited by every attempt. Piped or \
redirected input is read into memory first (up to --stdin-limit, default \
16MiB) and every attempt gets all of it. Larger input, or any input with \
--stdin=once, goes to the first attempt only, and the program is not \
retried (steadfast says so).

Stopping: each attempt runs in a process group of its own (as with \
timeout(1)); on --attempt-timeout, --deadline or an interruption the whole \
group gets the signal (SIGTERM on a time limit, the received signal on an \
interruption), then SIGKILL if anything of it is still there after \
--kill-after (default 2s), and steadfast waits until the group is gone. \
--foreground keeps the program in steadfast's group instead, so it can read \
the terminal; then only the program itself is signalled.

Exit status:
  0       the program succeeded (on some attempt)
  1-123   the program's last exit status
  124     --deadline or --attempt-timeout ended the run (as timeout(1)); \
when the deadline stops an attempt, steadfast still prints the last status the \
program gave
  125     steadfast itself failed: a usage error (an unknown option, a bad \
flag value, no program), input it could not read, a program it could not wait \
for
  126     the program exists but cannot be executed
  127     the program was not found
  128+N   the program was ended by signal N
  129     steadfast got SIGHUP, 130 Ctrl-C (SIGINT), 143 SIGTERM: it passed \
the signal on and exited once the program's processes were gone
A program's own exit status of 124 to 127 is passed on as it is.";

const RUN_EXAMPLES: &str = "\
Examples:
  steadfast run -- curl -fsS https://example.invalid/health
  steadfast run --attempts 10 --backoff exponential:initial=200ms,max=10s,jitter=full -- make test
  steadfast run --deadline 2m --attempt-timeout 20s --retry-on 75,100-110 -- ./flaky-job --verbose
  steadfast run --backoff constant:delay=1s --stop-on 2 -- ./deploy.sh";

const SCHEDULE_ABOUT: &str = "\
Print (or plot) the delays of a backoff schedule.

The delays are drawn the way the retry policy draws them, so `steadfast run \
--seed S` waits what `steadfast schedule --seed S` prints. A --plot file is \
checked before anything is computed or printed.

Exit status:
  0   the schedule was printed (and plotted)
  1   the output could not be written: standard output, or the --plot file \
(which cannot be created, or the chart could not be drawn into it)
  2   a usage error: an unknown option, a bad flag value or backoff spec \
(initial above max included), too many samples x attempts";

const SCHEDULE_EXAMPLES: &str = "\
Examples:
  steadfast schedule --backoff exponential:initial=100ms,max=5s --attempts 8
  steadfast schedule --backoff grpc --seed 7 --format json
  steadfast schedule --backoff decorrelated:initial=100ms,max=10s --samples 1000 --plot envelope.svg";

/// The long help of `--backoff`: the SPEC grammar.
pub const SPEC_HELP: &str = "\
The backoff schedule, as PRESET[:KEY=VALUE,...].

Presets, their keys and defaults (keys left out keep the default):
  constant      delay, jitter                      1s, no jitter
  linear        initial, step, max, jitter         1s + 1s per retry, no cap, no jitter
  exponential   initial, max, multiplier, jitter   100ms x2, max 10s, full jitter
  fibonacci     initial, max, jitter               100ms x F(n), max 10s, no jitter
  decorrelated  initial, max                       min(max, U(initial, 3 x previous)), 100ms, max 10s
  a6            initial, max, multiplier, jitter   gRFC A6 retry backoff: 100ms x2, max 1s, x U(0.8, 1.2)
  grpc          initial, max, multiplier, jitter   gRPC connection backoff: 1s x1.6, max 120s, jitter 0.2

Values: durations like 250ms, 1.5s, 2m, 1h30m, 10us; multiplier a number;
jitter one of none, full (U(0, d)), equal (d/2 + U(0, d/2)), additive:DURATION
(d + U(0, DURATION), still capped at max: lancet's and backon's jitter), or a
proportional factor such as 0.2 or 20% (d x U(0.8, 1.2)). The jitter of a6 is
0.2, or full for the pre-2024 text of the spec; grpc takes a factor only.
Aliases: base = initial, cap = max, factor = multiplier.

Examples: grpc, constant:delay=500ms, exponential:initial=100ms,max=5s,multiplier=2,jitter=full,
a6:initial=1s,max=30s,jitter=full, exponential:initial=1s,max=60s,jitter=additive:1s";

/// Parses `--backoff` into a spec the core accepts (usage error otherwise).
fn backoff_value(text: &str) -> Result<BackoffSpec, String> {
    let spec: BackoffSpec = text
        .parse()
        .map_err(|e: crate::spec::SpecError| e.to_string())?;
    crate::backoff::build(&spec, None)
        .map_err(|e| crate::spec::SpecError::rejected(text, e).to_string())?;
    Ok(spec)
}

fn parse_duration_value(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

/// A duration greater than zero (a zero time limit could never be met).
fn positive_duration_value(text: &str) -> Result<Duration, String> {
    match parse_duration(text) {
        Ok(d) if d.is_zero() => Err(format!(
            "invalid duration {text:?}: a time limit must be greater than zero"
        )),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

fn codes_value(text: &str) -> Result<CodeSet, String> {
    let set: CodeSet = text.parse().map_err(|e| format!("{e}"))?;
    if set.contains(0) {
        return Err(format!(
            "invalid exit codes {text:?}: 0 means success and is never retried or stopped on"
        ));
    }
    Ok(set)
}

/// The options of `steadfast run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Attempts in all, counting the first.
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub attempts: u32,

    /// The backoff schedule (PRESET[:KEY=VALUE,...]; see --help).
    #[arg(long, value_name = "SPEC", default_value = "exponential",
          value_parser = backoff_value, long_help = SPEC_HELP)]
    pub backoff: BackoffSpec,

    /// Give up (and stop the program) once this much time has passed since the start.
    #[arg(long, value_name = "DURATION", value_parser = positive_duration_value)]
    pub deadline: Option<Duration>,

    /// Stop an attempt that runs longer than this (it counts as a failed attempt).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration_value)]
    pub attempt_timeout: Option<Duration>,

    /// Retry only on these exit codes, e.g. 1,2,10-20 (default: any non-zero).
    #[arg(long, value_name = "CODES", value_parser = codes_value)]
    pub retry_on: Option<CodeSet>,

    /// Stop at once on these exit codes (wins over --retry-on).
    #[arg(long, value_name = "CODES", value_parser = codes_value)]
    pub stop_on: Option<CodeSet>,

    /// Seed the backoff's jitter, for a reproducible schedule.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// How long a program has to exit after SIGTERM (or the received signal) before it gets SIGKILL.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration_value)]
    pub kill_after: Duration,

    /// Keep the program in steadfast's process group (it can read the terminal); only it is signalled, not its children.
    #[arg(long)]
    pub foreground: bool,

    /// Standard input that is not a terminal: replay it to every attempt, or pass it to the first attempt only and never retry.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = StdinMode::Replay)]
    pub stdin: StdinMode,

    /// The most standard input kept for replay (e.g. 64KiB, 16MiB); larger input goes to the first attempt only.
    #[arg(long, value_name = "SIZE", default_value = "16MiB", value_parser = parse_size)]
    pub stdin_limit: u64,

    /// Print nothing of steadfast's own (the program's output still passes through).
    #[arg(long, short)]
    pub quiet: bool,

    /// The program and its arguments (after `--`; everything from the program on is its own).
    // No `allow_hyphen_values`: before the program, an argument that starts
    // with `-` and is no option of `run` is a usage error (with clap's
    // suggestion), not a program named `--atempts`. After `--`, or after
    // the program's name, anything goes.
    #[arg(value_name = "PROGRAM", required = true, num_args = 1.., trailing_var_arg = true)]
    pub command: Vec<OsString>,
}

/// Output formats of `steadfast schedule`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// A JSON array of objects, one per retry.
    Json,
    /// Comma-separated values with a header line.
    Csv,
}

fn plot_value(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
    {
        Some(ext) if ext == "svg" || ext == "png" => Ok(path),
        _ => Err(format!(
            "invalid plot file {text:?}: the name must end in .svg or .png"
        )),
    }
}

/// The scenarios of `steadfast simulate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// A thundering herd of clients reconnecting after an outage.
    Herd,
    /// A retry storm during an incident.
    Storm,
    /// A short trigger that retries turn into a lasting collapse.
    Metastable,
    /// Tail latency, with and without hedged requests.
    Tail,
    /// A dependency down for a while, with and without a circuit breaker.
    Breaker,
    /// A capacity drop, with and without concurrency limits.
    Overload,
    /// Many clients sharing one provider's quota, with and without a rate limit.
    Quota,
    /// One bad replica among good ones: retries anywhere, elsewhere, and with ejection.
    Replicas,
    /// Every scenario.
    All,
}

fn latency_value(text: &str) -> Result<steadfast_sim::Latency, String> {
    text.parse()
        .map_err(|e: steadfast_sim::SimError| e.to_string())
}

/// A count: a whole number from 1 to 4294967295.
fn count_value(text: &str) -> Result<u32, String> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| {
            format!(
                "invalid number {text:?}: expected a whole number from 1 to {}",
                u32::MAX
            )
        })
}

/// A seed: a whole number from 0 to 18446744073709551615.
fn seed_value(text: &str) -> Result<u64, String> {
    text.trim().parse::<u64>().map_err(|_| {
        format!(
            "invalid seed {text:?}: expected a whole number from 0 to {}",
            u64::MAX
        )
    })
}

fn rate_value(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "invalid rate {text:?}: expected a number of calls per second > 0"
        )),
    }
}

fn skew_value(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "invalid skew {text:?}: expected a number from 0 up (0: every client alike)"
        )),
    }
}

/// How the provider of `simulate quota` writes its wait into `Retry-After`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RetryAfterUnit {
    /// Whole seconds, rounded up (HTTP's delta-seconds).
    Seconds,
    /// Milliseconds, rounded up (as gRPC's pushback).
    Ms,
}

fn fraction_value(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "invalid fraction {text:?}: expected a number from 0 to 1"
        )),
    }
}

/// The options of `steadfast simulate`.
///
/// Each scenario flag's help starts with the scenarios that take it (a test
/// holds it to `simulate::scenario_flags`); given to a scenario that does
/// not take it, a flag is a usage error. Numbers and durations take a
/// leading `-`, so a negative value is refused with the range accepted
/// rather than read as an unknown option.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct SimulateArgs {
    /// The scenario to run (default: all).
    #[arg(value_enum)]
    pub scenario: Option<Scenario>,

    /// Write the report (index.html, SVG and PNG charts) into this folder.
    #[arg(long, value_name = "DIR", default_value = "steadfast-report")]
    pub out: PathBuf,

    /// The seed of every random draw, 0 to 18446744073709551615 (default: the scenarios' own, 1).
    #[arg(long, value_name = "S", value_parser = seed_value)]
    pub seed: Option<u64>,

    /// herd, storm, metastable, breaker, overload, quota and replicas: clients, at least 1 (herd: reconnecting clients, default 1000; storm and metastable: client processes, default 100; breaker: 50, each with its own breaker; overload: 1, each with its own limit; quota: 20, sharing the provider's quota; replicas: 10, each with its own endpoint set).
    #[arg(long, value_name = "N", value_parser = count_value)]
    pub clients: Option<u32>,

    /// herd, storm and breaker: how long the server is down, more than 0 (herd: from the start, default 10s; storm: the incident, default 30s; breaker: default 15s).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true, value_parser = positive_duration_value)]
    pub outage: Option<Duration>,

    /// herd: connections the server accepts per second once back, at least 1 (default 500), counted per 100 ms when the rate divides by 10, else per second.
    #[arg(long, value_name = "N", help_heading = "Herd", value_parser = count_value)]
    pub accept_rate: Option<u32>,

    /// herd: the first delay of the exponential strategies, more than 0 (default 1s).
    #[arg(long, value_name = "DURATION", help_heading = "Herd", allow_hyphen_values = true, value_parser = positive_duration_value)]
    pub base: Option<Duration>,

    /// herd: the cap on a delay of the exponential strategies, more than 0 (default 60s).
    #[arg(long, value_name = "DURATION", help_heading = "Herd", allow_hyphen_values = true, value_parser = positive_duration_value)]
    pub cap: Option<Duration>,

    /// herd: stop the simulation here even if clients are still trying, more than 0 (default 1h).
    #[arg(long, value_name = "DURATION", help_heading = "Herd", allow_hyphen_values = true, value_parser = positive_duration_value)]
    pub horizon: Option<Duration>,

    /// storm, metastable, tail, breaker, overload, quota and replicas: calls per second, all clients together, more than 0 (default 2000 for storm, 700 for metastable, 1000 for tail, breaker, overload and replicas, 160 for quota).
    #[arg(long, value_name = "PER_SEC", help_heading = "Storm", value_parser = rate_value)]
    pub rate: Option<f64>,

    /// storm, metastable, breaker, overload, quota and replicas: calls start during this time, then the run lets them finish, more than 0 (default 3m for storm, 2m for metastable, 1m for breaker, overload, quota and replicas).
    #[arg(long, value_name = "DURATION", help_heading = "Storm", allow_hyphen_values = true, value_parser = positive_duration_value)]
    pub duration: Option<Duration>,

    /// storm, metastable, breaker and overload: requests the server serves at once, at least 1 (default 30 for storm and breaker, 10 for metastable, 40 for overload); storm's and breaker's queue holds as many again, metastable's 200 per slot, overload's 25 per slot.
    #[arg(long, value_name = "N", help_heading = "Storm", value_parser = count_value)]
    pub capacity: Option<u32>,

    /// storm, metastable, tail, breaker, overload, quota and replicas: the server's service time: const:D, exp:MEAN, lognormal:MEDIAN:SIGMA, or a mixture W*D + W*D, with a mean above zero except for tail and quota (default exp:10ms; 0.98*exp:1ms + 0.02*exp:200ms for tail, exp:20ms for overload and quota, the provider's time for a request it admits; replicas: each replica's).
    #[arg(long, value_name = "DIST", help_heading = "Storm", value_parser = latency_value)]
    pub latency: Option<steadfast_sim::Latency>,

    /// storm, metastable, breaker and overload: when the incident (the trigger, the outage, the capacity drop) starts, 0 or more (default 30s; 20s for breaker and overload).
    #[arg(long, value_name = "DURATION", help_heading = "Storm", allow_hyphen_values = true, value_parser = parse_duration_value)]
    pub incident_start: Option<Duration>,

    /// storm, metastable and overload: the capacity left, 0 to 1 (storm: make the incident an overload that leaves this fraction of capacity, instead of an outage; metastable: during the trigger, default 0.3; overload: during the drop, default 0.25, more than 0 and less than 1).
    #[arg(long, value_name = "FRACTION", help_heading = "Storm", value_parser = fraction_value)]
    pub overload: Option<f64>,

    /// storm, metastable, breaker, overload, quota and replicas: the backoff every strategy retries with (PRESET[:KEY=VALUE,...], default exponential; quota: a 429 retried without its Retry-After).
    #[arg(long, value_name = "SPEC", help_heading = "Storm", value_parser = backoff_value)]
    pub backoff: Option<BackoffSpec>,

    /// metastable and overload: how long the trigger lasts, more than 0 (metastable: default 10s; overload: the capacity drop, default 20s).
    #[arg(long, value_name = "DURATION", help_heading = "Metastable", allow_hyphen_values = true, value_parser = positive_duration_value)]
    pub trigger: Option<Duration>,

    /// metastable and overload: how long a caller waits for one attempt, more than 0 (metastable: default 1s, the deadline strategy's call deadline too; overload: default 500ms).
    #[arg(long, value_name = "DURATION", help_heading = "Metastable", allow_hyphen_values = true, value_parser = positive_duration_value)]
    pub attempt_timeout: Option<Duration>,

    /// tail: calls made, at least 1 (default 100000).
    #[arg(long, value_name = "N", help_heading = "Tail", value_parser = count_value)]
    pub calls: Option<u32>,

    /// overload: the adaptive limits' sample window, at least this long, more than 0 (default 100ms; the core's own default is 1s).
    #[arg(long, value_name = "DURATION", help_heading = "Overload", allow_hyphen_values = true, value_parser = positive_duration_value)]
    pub limit_window: Option<Duration>,

    /// overload: the least the adaptive limits may become, at least 1 (default 1).
    #[arg(long, value_name = "N", help_heading = "Overload", value_parser = count_value)]
    pub limit_min: Option<u32>,

    /// overload: the most the adaptive limits may become, at least 1 (default 200).
    #[arg(long, value_name = "N", help_heading = "Overload", value_parser = count_value)]
    pub limit_max: Option<u32>,

    /// quota: requests per second the provider admits, its burst the same, from 1 to 1000000000 (default 100).
    #[arg(long, value_name = "PER_SEC", help_heading = "Quota", value_parser = count_value)]
    pub quota: Option<u32>,

    /// quota: how unevenly the calls are spread over the clients, 0 or more: client i makes a share proportional to 1/i^SKEW (default 1; 0: every client alike).
    #[arg(long, value_name = "SKEW", help_heading = "Quota", value_parser = skew_value)]
    pub skew: Option<f64>,

    /// quota: how the provider writes its wait into a 429's Retry-After: seconds (whole, rounded up, as HTTP does; the default) or ms (milliseconds, rounded up).
    #[arg(long, value_name = "UNIT", help_heading = "Quota", value_enum)]
    pub retry_after: Option<RetryAfterUnit>,

    /// replicas: replicas of the service, from 2 to 1000 (default 5).
    #[arg(long, value_name = "N", help_heading = "Replicas", value_parser = count_value)]
    pub replicas: Option<u32>,

    /// replicas: how many of them fail what they serve, fewer than --replicas (default 1).
    #[arg(long, value_name = "N", help_heading = "Replicas", value_parser = clap::value_parser!(u32))]
    pub bad_replicas: Option<u32>,
}

/// The options of `steadfast schedule`.
#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// The backoff schedule (PRESET[:KEY=VALUE,...]; see --help).
    #[arg(long, value_name = "SPEC", value_parser = backoff_value, long_help = SPEC_HELP)]
    pub backoff: BackoffSpec,

    /// Attempts in all, counting the first (so attempts - 1 delays).
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub attempts: u32,

    /// Seed the jitter (default: a random seed, printed in table output).
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,

    /// Run K seeds (S, S+1, ...) and print the p5/p50/p95 of each delay.
    #[arg(long, value_name = "K",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub samples: Option<u32>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Also draw the schedule into this file (.svg or .png).
    #[arg(long, value_name = "FILE", value_parser = plot_value)]
    pub plot: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_the_program_literally() {
        let cli = Cli::try_parse_from([
            "steadfast",
            "run",
            "--attempts",
            "3",
            "--",
            "prog",
            "--attempts",
            "$(touch x)",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run");
        };
        assert_eq!(run.attempts, 3);
        assert_eq!(run.command, ["prog", "--attempts", "$(touch x)"]);
        let cli = Cli::try_parse_from(["steadfast", "run", "prog", "-x"]).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run");
        };
        assert_eq!(run.command, ["prog", "-x"]);
    }

    #[test]
    fn an_unknown_option_before_the_program_is_a_usage_error() {
        for (typo, suggestion) in [
            ("--atempts", Some("--attempts")),
            ("--quiett", Some("--quiet")),
            ("-x", None),
        ] {
            let err = Cli::try_parse_from(["steadfast", "run", typo, "5", "--", "true"])
                .expect_err("a usage error");
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::UnknownArgument,
                "{typo}"
            );
            let text = err.to_string();
            assert!(text.contains(typo), "{typo}: {text}");
            if let Some(s) = suggestion {
                assert!(
                    text.contains(&format!("a similar argument exists: '{s}'")),
                    "{typo}: {text}"
                );
            }
        }
        // After `--`, or after the program's name, it is the program's own.
        for (args, command) in [
            (
                &["steadfast", "run", "--", "--atempts"][..],
                &["--atempts"][..],
            ),
            (
                &["steadfast", "run", "prog", "--atempts", "5"],
                &["prog", "--atempts", "5"],
            ),
            (&["steadfast", "run", "-q", "--", "-x", "-y"], &["-x", "-y"]),
        ] {
            let cli = Cli::try_parse_from(args).expect("parses");
            let Command::Run(run) = cli.command else {
                panic!("not run");
            };
            assert_eq!(run.command, command, "{args:?}");
        }
    }

    #[test]
    fn run_defaults_match_the_library_constants() {
        let cli = Cli::try_parse_from(["steadfast", "run", "--", "p"]).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run");
        };
        assert_eq!(run.kill_after, crate::child::GRACE);
        assert_eq!(run.stdin_limit, crate::input::DEFAULT_LIMIT);
        assert_eq!(run.stdin, StdinMode::Replay);
        assert!(!run.foreground);
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["steadfast", "run", "--attempts", "0", "--", "p"][..],
            &["steadfast", "run", "--deadline", "10", "--", "p"],
            &["steadfast", "run", "--attempt-timeout", "0s", "--", "p"],
            &[
                "steadfast",
                "run",
                "--backoff",
                "exponential:multiplier=0.5",
                "--",
                "p",
            ],
            &["steadfast", "run", "--retry-on", "0-3", "--", "p"],
            &["steadfast", "run", "--backoff", "nope", "--", "p"],
            &["steadfast", "run"],
            &[
                "steadfast",
                "schedule",
                "--backoff",
                "grpc",
                "--plot",
                "x.gif",
            ],
        ] {
            let err = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        }
    }
}
