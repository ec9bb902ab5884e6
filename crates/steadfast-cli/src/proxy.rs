//! `steadfast proxy`: a fault-injecting proxy between a client and a server,
//! for testing a program written in any language against the failures of
//! the network: added latency with jitter, refused and reset connections,
//! stalls, a bandwidth limit, and in `--http` mode injected statuses (with
//! `Retry-After`) and delays before the response. Each fault happens at its
//! own rate, drawn with its own random number from one seed (`--seed`
//! repeats a run's draws); the summary of what was injected is printed when
//! the proxy stops (Ctrl-C, SIGTERM or `--duration`).
//!
//! It forwards to the `--to` address only, resolved once at the start: a
//! request's `Host`, an absolute URI or anything else a client sends never
//! sends traffic anywhere else. Memory and connections are bounded: at most
//! `--max-connections` at once (further clients wait in the listen
//! backlog), a fixed buffer per direction in TCP mode, hyper's bounded
//! buffers in HTTP mode, bodies streamed.
//!
//! Exit status: 0 when stopped (by a signal or `--duration`), after the
//! summary (and its JSON, with `--summary-json FILE`); 1 when it cannot
//! listen, the target cannot be resolved or the JSON cannot be written; 2
//! for a usage error.

mod faults;
mod http;
mod serve;
mod stats;
mod tcp;

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use steadfast::chaos::InjectionRate;

use crate::duration::parse_duration;
use crate::exit::USAGE;
use crate::input::parse_size;
use crate::interrupt::Interrupt;

pub use faults::{ConnectionFaults, FaultPlan};
pub use stats::Stats;

/// The long help of `steadfast proxy`.
pub(crate) const PROXY_ABOUT: &str = "\
Forward connections to a server, injecting faults on purpose.

steadfast proxy listens on --listen and forwards every connection to --to \
(and nowhere else), breaking some of them in the ways the network does, so \
that a client written in any language can be tested against those failures. \
Give each fault a rate (a fraction such as 0.25, or a percentage such as \
25%); each is drawn with its own random number, and a connection or request \
can be hit by several (a stronger one wins: refuse, then stall, then reset; \
latency and bandwidth add up). --seed makes the draws repeatable: the Nth \
connection (and in --http mode the Nth request) gets the same faults on every \
run with the same seed.

Faults on connections (TCP and --http):
  --refuse RATE
      The connection is accepted and closed at once, before a byte is read
      or anything is forwarded: the client reads end-of-file (curl: \"Empty
      reply from server\"), as from a server that crashed on accept.
        steadfast proxy --to 127.0.0.1:8080 --refuse 0.2
  --reset RATE  [--reset-after DURATION]
      Once the client has sent its first bytes, and --reset-after later
      (default 0: before anything is forwarded), the connection is reset
      (TCP RST) on both sides: the client sees \"connection reset by peer\".
        steadfast proxy --to 127.0.0.1:8080 --reset 0.1 --reset-after 50ms
  --stall RATE  [--stall-for DURATION]
      The connection is accepted and then nothing is forwarded and nothing
      comes back: the client waits until its own timeout (the proxy reads
      and drops what it sends). After --stall-for the proxy closes it; by
      default it holds it until the client gives up.
        steadfast proxy --to 127.0.0.1:8080 --stall 0.05 --stall-for 30s

Faults on data (TCP mode: on what the server sends back):
  --latency DURATION  [--jitter DURATION]  [--latency-rate RATE]
      Each chunk the server sends is held for DURATION plus a uniform 0 to
      --jitter before it is passed on, on a share --latency-rate (default
      1) of the connections. In --http mode: before each response, on a
      share of the requests.
        steadfast proxy --to 127.0.0.1:8080 --latency 200ms --jitter 50ms
  --bandwidth SIZE  [--bandwidth-rate RATE]
      What the server sends reaches the client at SIZE bytes a second (e.g.
      64KiB), on a share --bandwidth-rate (default 1) of the connections.
      TCP mode only.
        steadfast proxy --to 127.0.0.1:8080 --bandwidth 16KiB

Faults on HTTP requests (--http):
  --status CODE  [--status-rate RATE]  [--retry-after DURATION]
      A share --status-rate (default 1) of the requests is answered CODE by
      the proxy itself (not forwarded), with a Retry-After header if asked
      (whole seconds, rounded up).
        steadfast proxy --http --to 127.0.0.1:8080 --status 503 --status-rate 0.3 --retry-after 1s
  In --http mode a request may also ask for a fault with Envoy's headers
  (x-envoy-fault-abort-request: 503, x-envoy-fault-delay-request: 200
  milliseconds, and their -percentage headers), each capped by the rate
  configured here: a request never gets a fault the command line did not
  allow.

A summary of what was injected is printed on standard error when the proxy \
stops: on Ctrl-C (or SIGTERM), or after --duration; --summary-json FILE also \
writes its counts as JSON. The first line it prints \
is `listening on ADDRESS`, with the port the system picked for --listen \
127.0.0.1:0.

Exit status:
  0    stopped by a signal or --duration (after the summary)
  1    it cannot listen on --listen, or --to cannot be resolved, or
       --summary-json cannot be written
  2    a usage error (a bad flag value, a fault only --http has without it)";

/// The examples at the end of `steadfast proxy --help`.
pub(crate) const PROXY_EXAMPLES: &str = "\
Examples:
  # a slow, lossy network in front of a database
  steadfast proxy --listen 127.0.0.1:15432 --to 127.0.0.1:5432 --latency 100ms --jitter 40ms --reset 0.05
  # an overloaded HTTP service: 30% of the requests get 503 with Retry-After
  steadfast proxy --http --listen 127.0.0.1:8081 --to 127.0.0.1:8080 --status 503 --status-rate 0.3 --retry-after 1s
  # a repeatable run of one minute
  steadfast proxy --to 127.0.0.1:8080 --refuse 0.1 --stall 0.02 --seed 7 --duration 60s";

/// The options of `steadfast proxy`.
#[derive(Debug, Clone, Args)]
pub struct ProxyArgs {
    /// The address to listen on (IP:PORT; port 0 lets the system pick one, printed at the start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,

    /// The server to forward to (HOST:PORT), and the only place anything is forwarded.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_target)]
    pub to: String,

    /// Speak HTTP/1.1: faults per request (--status, --latency before each response) besides the connection faults.
    #[arg(long)]
    pub http: bool,

    /// Close this share of the connections at once, before reading a byte (e.g. 0.2 or 20%).
    #[arg(long, value_name = "RATE", help_heading = "Faults", value_parser = parse_rate)]
    pub refuse: Option<InjectionRate>,

    /// Reset (TCP RST) this share of the connections once the client has sent its first bytes.
    #[arg(long, value_name = "RATE", help_heading = "Faults", value_parser = parse_rate)]
    pub reset: Option<InjectionRate>,

    /// How long after the client's first bytes a reset connection is reset (default 0: before anything is forwarded).
    #[arg(long, value_name = "DURATION", help_heading = "Faults", value_parser = duration_value, requires = "reset")]
    pub reset_after: Option<Duration>,

    /// Stall this share of the connections: nothing is forwarded or answered.
    #[arg(long, value_name = "RATE", help_heading = "Faults", value_parser = parse_rate)]
    pub stall: Option<InjectionRate>,

    /// Close a stalled connection after this long (default: hold it until the client closes it).
    #[arg(long, value_name = "DURATION", help_heading = "Faults", value_parser = duration_value, requires = "stall")]
    pub stall_for: Option<Duration>,

    /// Hold each chunk from the server this long (--http: each response).
    #[arg(long, value_name = "DURATION", help_heading = "Faults", value_parser = duration_value)]
    pub latency: Option<Duration>,

    /// Add a uniform 0 to this much to each injected latency.
    #[arg(long, value_name = "DURATION", help_heading = "Faults", value_parser = duration_value, requires = "latency")]
    pub jitter: Option<Duration>,

    /// The share of connections (--http: requests) that get the latency (default 1).
    #[arg(long, value_name = "RATE", help_heading = "Faults", value_parser = parse_rate, requires = "latency")]
    pub latency_rate: Option<InjectionRate>,

    /// Limit what the server sends to this many bytes a second (e.g. 64KiB; TCP mode only).
    #[arg(long, value_name = "SIZE", help_heading = "Faults", value_parser = bandwidth_value)]
    pub bandwidth: Option<u64>,

    /// The share of connections that get the bandwidth limit (default 1).
    #[arg(long, value_name = "RATE", help_heading = "Faults", value_parser = parse_rate, requires = "bandwidth")]
    pub bandwidth_rate: Option<InjectionRate>,

    /// Answer requests with this status instead of forwarding them (--http only).
    #[arg(long, value_name = "CODE", help_heading = "HTTP faults", value_parser = status_value)]
    pub status: Option<u16>,

    /// The share of requests answered --status (default 1).
    #[arg(long, value_name = "RATE", help_heading = "HTTP faults", value_parser = parse_rate, requires = "status")]
    pub status_rate: Option<InjectionRate>,

    /// A Retry-After on every injected status (whole seconds, rounded up).
    #[arg(long, value_name = "DURATION", help_heading = "HTTP faults", value_parser = duration_value, requires = "status")]
    pub retry_after: Option<Duration>,

    /// The seed of the random draws (default: a random one, printed in the summary).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Stop after this long (default: run until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration_value)]
    pub duration: Option<Duration>,

    /// The most connections open at once; more clients wait in the listen backlog.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,

    /// Print a line on standard error for each fault injected.
    #[arg(long, short)]
    pub verbose: bool,

    /// Also write the summary's counts as JSON to this file when the proxy
    /// stops (the text summary on standard error is unchanged).
    #[arg(long, value_name = "FILE")]
    pub summary_json: Option<std::path::PathBuf>,
}

/// A fault rate: a fraction in 0..=1 (`0.25`) or a percentage (`25%`).
///
/// # Errors
/// Anything else, with a message that says what a rate looks like.
///
/// ```
/// use steadfast::chaos::InjectionRate;
/// use steadfast_cli::proxy::parse_rate;
/// assert_eq!(parse_rate("25%"), Ok(InjectionRate::new(0.25)?));
/// assert!(parse_rate("1.5").is_err());
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub fn parse_rate(text: &str) -> Result<InjectionRate, String> {
    let trimmed = text.trim();
    let (number, scale) = match trimmed.strip_suffix('%') {
        Some(pct) => (pct.trim(), 100.0),
        None => (trimmed, 1.0),
    };
    let p: f64 = number.parse().map_err(|_| {
        format!(
            "invalid rate {text:?}: expected a fraction such as 0.25 or a percentage such as 25%"
        )
    })?;
    InjectionRate::new(p / scale)
        .map_err(|_| format!("invalid rate {text:?}: it must be between 0 and 1 (0% and 100%)"))
}

fn duration_value(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

fn positive_duration_value(text: &str) -> Result<Duration, String> {
    match duration_value(text)? {
        Duration::ZERO => Err(format!(
            "invalid duration {text:?}: it must be more than zero"
        )),
        d => Ok(d),
    }
}

fn bandwidth_value(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err(format!(
            "invalid bandwidth {text:?}: it must be at least 1 byte a second"
        )),
        n => Ok(n),
    }
}

fn status_value(text: &str) -> Result<u16, String> {
    match text.trim().parse::<u16>() {
        Ok(code @ 100..=599) => Ok(code),
        _ => Err(format!(
            "invalid status {text:?}: expected an HTTP status code from 100 to 599"
        )),
    }
}

/// `HOST:PORT`, with a port in 1..=65535 (an IPv6 address in brackets).
///
/// # Errors
/// A text without a host or with a port out of range.
///
/// ```
/// use steadfast_cli::proxy::parse_target;
/// assert!(parse_target("127.0.0.1:8080").is_ok());
/// assert!(parse_target("127.0.0.1").is_err());
/// ```
pub fn parse_target(text: &str) -> Result<String, String> {
    let bad = || format!("invalid target {text:?}: expected HOST:PORT, e.g. 127.0.0.1:8080");
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    match port.parse::<u16>() {
        Ok(p) if p > 0 && !host.is_empty() => Ok(text.to_owned()),
        _ => Err(bad()),
    }
}

/// Runs `steadfast proxy` until `interrupt` or `--duration`; its exit status.
pub fn run(args: &ProxyArgs, interrupt: &Interrupt) -> i32 {
    let plan = match FaultPlan::from_args(args) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("steadfast proxy: {e}");
            return USAGE;
        }
    };
    crate::runtime::block_on("proxy", serve::serve(args, plan, interrupt))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn rates_take_fractions_and_percentages() {
        assert_eq!(
            parse_rate("0.25").unwrap(),
            InjectionRate::new(0.25).unwrap()
        );
        assert_eq!(
            parse_rate("25%").unwrap(),
            InjectionRate::new(0.25).unwrap()
        );
        assert_eq!(parse_rate(" 100 % ").unwrap(), InjectionRate::ALWAYS);
        assert_eq!(parse_rate("0").unwrap(), InjectionRate::NEVER);
        for bad in ["", "x", "1.5", "-0.1", "150%", "NaN", "inf", "%"] {
            assert!(parse_rate(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn targets_need_a_host_and_a_port() {
        assert!(parse_target("127.0.0.1:8080").is_ok());
        assert!(parse_target("[::1]:8080").is_ok());
        assert!(parse_target("localhost:1").is_ok());
        for bad in ["127.0.0.1", ":80", "host:0", "host:65536", "host:x", ""] {
            assert!(parse_target(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn statuses_and_bandwidths_are_checked() {
        assert_eq!(status_value("503").unwrap(), 503);
        assert!(status_value("99").is_err());
        assert!(status_value("600").is_err());
        assert_eq!(bandwidth_value("16KiB").unwrap(), 16 * 1024);
        assert!(bandwidth_value("0").is_err());
        assert!(positive_duration_value("0s").is_err());
    }
}
