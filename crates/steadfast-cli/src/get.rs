//! `steadfast get URL`: one HTTP request through the `steadfast-http`
//! client, in the style of `curl --retry`, but retrying only what is safe
//! to retry, honouring `Retry-After`, and with one deadline for the whole.
//!
//! Exit status: 0 on a 2xx response; [`HTTP_ERROR`] (22, as `curl -f`) on
//! any other status; [`TRANSPORT`] when no response came (connection
//! refused or reset, DNS, an attempt timed out); 124 when the deadline
//! ended the call; 1 if the body cannot be written; 2 for a usage error.

mod attempts;

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use steadfast_http::{Client, Error, Response};

use crate::duration::parse_duration;
use crate::exit::{FAILURE, TIMEOUT, USAGE};
use crate::spec::BackoffSpec;

/// A response with a status other than 2xx (as `curl -f`).
pub const HTTP_ERROR: i32 = 22;
/// No response: the connection failed, was reset, or every attempt timed out.
pub const TRANSPORT: i32 = 7;

const GET_ABOUT: &str = "\
Send one HTTP request, retrying it while the server is unavailable.

Retries connection failures, timeouts and the statuses 408, 429, 500, 502, \
503 and 504, with the backoff between attempts, or the server's Retry-After \
(clamped so it never waits past --deadline). Only idempotent methods (GET, \
HEAD, OPTIONS, TRACE, PUT, DELETE) are retried unless --retry-non-idempotent \
is given or an Idempotency-Key header is set. Each attempt carries the time \
left in the x-steadfast-timeout header. The body goes to standard output \
(or --output); -v prints each attempt on standard error.

Exit status: 0 on a 2xx response; 22 on another status (as curl -f; the body \
is not written); 7 when no response came (connection refused or reset, every \
attempt timed out); 124 when --deadline ended the call; 1 when the body \
cannot be written; 2 for a usage error.";

const GET_EXAMPLES: &str = "\
Examples:
  steadfast get https://example.invalid/health
  steadfast get --attempts 5 --deadline 30s --attempt-timeout 5s -v https://example.invalid/report -o report.json
  steadfast get -X POST -H 'Content-Type: application/json' -d '{\"n\":1}' --retry-non-idempotent https://example.invalid/jobs
  steadfast get --hedge 3 --hedge-delay 50ms https://example.invalid/search?q=rust";

/// The options of `steadfast get`.
#[derive(Debug, Args)]
#[command(long_about = GET_ABOUT, after_long_help = GET_EXAMPLES)]
pub struct GetArgs {
    /// The URL (http://; https:// needs a build with TLS).
    #[arg(value_name = "URL")]
    pub url: String,

    /// The method (default GET, or POST when a body is given).
    #[arg(short = 'X', long = "request", value_name = "METHOD", value_parser = method_value)]
    pub method: Option<http::Method>,

    /// A request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = header_value)]
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,

    /// The request body, as given.
    #[arg(
        short = 'd',
        long = "data",
        value_name = "DATA",
        conflicts_with = "data_binary"
    )]
    pub data: Option<String>,

    /// The request body: the bytes of FILE with @FILE, else the text as given.
    #[arg(long = "data-binary", value_name = "DATA")]
    pub data_binary: Option<String>,

    /// Attempts in all, counting the first.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub attempts: u32,

    /// The backoff schedule (PRESET[:KEY=VALUE,...], as for `steadfast run`).
    #[arg(long, value_name = "SPEC", default_value = "exponential", value_parser = backoff_value)]
    pub backoff: BackoffSpec,

    /// Give up once this much time has passed since the start (every attempt and wait included).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration_value)]
    pub deadline: Option<Duration>,

    /// Stop an attempt that takes longer than this (it is retried).
    #[arg(long, value_name = "DURATION", value_parser = positive_duration_value)]
    pub attempt_timeout: Option<Duration>,

    /// The longest wait between attempts, for the backoff and Retry-After alike.
    #[arg(long, value_name = "DURATION", value_parser = positive_duration_value)]
    pub max_delay: Option<Duration>,

    /// Send up to N copies of an idempotent request; the first success wins.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32))]
    pub hedge: Option<u32>,

    /// The delay before each further copy (0 = all at once).
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = duration_value,
          requires = "hedge")]
    pub hedge_delay: Duration,

    /// Retry POST, PATCH and other non-idempotent methods too.
    #[arg(long)]
    pub retry_non_idempotent: bool,

    /// Write the body to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Print each attempt (status, wait, Retry-After honoured or clamped) on standard error.
    #[arg(short, long)]
    pub verbose: bool,
}

fn method_value(text: &str) -> Result<http::Method, String> {
    http::Method::from_bytes(text.as_bytes())
        .map_err(|_| format!("invalid method {text:?}: a method is a token such as GET or POST"))
}

fn header_value(text: &str) -> Result<(http::HeaderName, http::HeaderValue), String> {
    let Some((name, value)) = text.split_once(':') else {
        return Err(format!("invalid header {text:?}: expected 'Name: value'"));
    };
    let name = http::HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| format!("invalid header name {:?}", name.trim()))?;
    let value = http::HeaderValue::from_str(value.trim()).map_err(|_| {
        format!("invalid value for header {name}: control characters are not allowed")
    })?;
    Ok((name, value))
}

fn backoff_value(text: &str) -> Result<BackoffSpec, String> {
    let spec: BackoffSpec = text
        .parse()
        .map_err(|e: crate::spec::SpecError| e.to_string())?;
    crate::backoff::build(&spec, None)
        .map_err(|e| crate::spec::SpecError::rejected(text, e).to_string())?;
    Ok(spec)
}

fn duration_value(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

fn positive_duration_value(text: &str) -> Result<Duration, String> {
    match parse_duration(text) {
        Ok(d) if d.is_zero() => Err(format!(
            "invalid duration {text:?}: a time limit must be greater than zero"
        )),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `steadfast get`: the exit code.
pub fn run(args: &GetArgs) -> i32 {
    let body = match body(args) {
        Ok(body) => body,
        Err(message) => {
            eprintln!("steadfast get: {message}");
            return USAGE;
        }
    };
    let progress = io::stderr().is_terminal();
    let client = match client(args, progress) {
        Ok(client) => client,
        Err(message) => {
            eprintln!("steadfast get: {message}");
            return USAGE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("steadfast get: cannot start the async runtime: {e}");
            return FAILURE;
        }
    };
    runtime.block_on(send(args, &client, body))
}

/// The request body from `-d` or `--data-binary`.
fn body(args: &GetArgs) -> Result<Option<Vec<u8>>, String> {
    if let Some(data) = &args.data {
        return Ok(Some(data.clone().into_bytes()));
    }
    match args.data_binary.as_deref() {
        None => Ok(None),
        Some(text) => match text.strip_prefix('@') {
            Some(path) => std::fs::read(path)
                .map(Some)
                .map_err(|e| format!("--data-binary: cannot read {path:?}: {e}")),
            None => Ok(Some(text.as_bytes().to_vec())),
        },
    }
}

fn client(args: &GetArgs, progress: bool) -> Result<Client, String> {
    let backoff =
        crate::backoff::build(&args.backoff, None).map_err(|e| format!("--backoff: {e}"))?;
    let mut builder = Client::builder()
        .attempts(args.attempts)
        .backoff(backoff)
        .retry_non_idempotent(args.retry_non_idempotent)
        .name("steadfast get");
    if let Some(d) = args.deadline {
        builder = builder.deadline(d);
    }
    if let Some(d) = args.attempt_timeout {
        builder = builder.attempt_timeout(d);
    }
    if let Some(d) = args.max_delay {
        builder = builder.max_delay(d);
    }
    if let Some(n) = args.hedge {
        builder = builder.hedge(n, args.hedge_delay);
    }
    if let Some(hook) = attempts::hook(args.verbose, progress) {
        builder = builder.on_attempt(hook);
    }
    builder.build().map_err(|e| e.to_string())
}

async fn send(args: &GetArgs, client: &Client, body: Option<Vec<u8>>) -> i32 {
    let method = args.method.clone().unwrap_or(if body.is_some() {
        http::Method::POST
    } else {
        http::Method::GET
    });
    let mut request = client.request(method, args.url.as_str());
    for (name, value) in &args.headers {
        request = request.header(name.clone(), value.clone());
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    let outcome = request.send().await;
    attempts::finish();
    match outcome {
        Ok(response) if response.status().is_success() => write_body(args, response).await,
        Ok(response) => {
            let r = response.ending();
            eprintln!(
                "steadfast get: HTTP {} after {} attempt{}",
                response.status(),
                r.attempts,
                if r.attempts == 1 { "" } else { "s" }
            );
            HTTP_ERROR
        }
        Err(e) => failed(&e),
    }
}

/// The exit code of a call that did not succeed, with its message.
fn failed(e: &Error) -> i32 {
    eprintln!("steadfast get: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        eprintln!("  caused by: {cause}");
        source = cause.source();
    }
    if e.is_deadline() {
        TIMEOUT
    } else if e.status().is_some() {
        HTTP_ERROR
    } else {
        TRANSPORT
    }
}

async fn write_body(args: &GetArgs, mut response: Response) -> i32 {
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => match File::create(path) {
            Ok(f) => Box::new(io::BufWriter::new(f)),
            Err(e) => {
                eprintln!(
                    "steadfast get: --output: cannot create {}: {e}",
                    path.display()
                );
                return FAILURE;
            }
        },
        None => Box::new(io::stdout().lock()),
    };
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if let Err(e) = out.write_all(&chunk) {
                    eprintln!("steadfast get: cannot write the body: {e}");
                    return FAILURE;
                }
            }
            Ok(None) => break,
            Err(e) => {
                eprintln!("steadfast get: the body was cut off: {e}");
                return TRANSPORT;
            }
        }
    }
    if let Err(e) = out.flush() {
        eprintln!("steadfast get: cannot write the body: {e}");
        return FAILURE;
    }
    0
}
