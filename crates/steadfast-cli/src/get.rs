//! `steadfast get URL`: one HTTP request through the `steadfast-http`
//! client, in the style of `curl --retry`, but retrying only what is safe
//! to retry, honouring `Retry-After`, and with one deadline for the whole.
//!
//! Exit status: 0 on a 2xx response; [`HTTP_ERROR`] (22, as `curl -f`) on
//! any other status; [`TRANSPORT`] when no response came (connection
//! refused or reset, DNS, an attempt timed out); 124 when the deadline
//! ended the call; 1 if the body cannot be written; 2 for a usage error
//! (nothing is sent): a bad flag value, a URL this build cannot fetch, a
//! body file that cannot be read, `--hedge` with an option it excludes.

mod attempts;

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use steadfast_http::{Client, Error, Response};

use crate::duration::{format_duration, parse_duration};
use crate::exit::{FAILURE, TIMEOUT, USAGE};
use crate::spec::BackoffSpec;

/// A response with a status other than 2xx (as `curl -f`).
pub const HTTP_ERROR: i32 = 22;
/// No response: the connection failed, was reset, or every attempt timed out.
pub const TRANSPORT: i32 = 7;

/// The long help of `steadfast get` (its exit codes included).
pub(crate) const GET_ABOUT: &str = "\
Send one HTTP request, retrying it while the server is unavailable.

Retries connection failures, timeouts and the statuses 408, 429, 500, 502, \
503 and 504, with the backoff between attempts, or the server's Retry-After \
(clamped to --max-delay; a hint that would end past --deadline is not waited \
for: the call stops at once and says so). Only idempotent methods (GET, \
HEAD, OPTIONS, TRACE, PUT, DELETE) are retried unless --retry-non-idempotent \
is given or an Idempotency-Key header is set. Each attempt carries the time \
left in the x-steadfast-timeout header. The body goes to standard output \
(or --output); -v prints each attempt on standard error.

The request body, as curl sends it: -d TEXT as given; -d @FILE the file's \
bytes without carriage returns, newlines and NUL bytes, -d @- standard input \
the same way; --data-binary @FILE (or @-) the bytes exactly; --data-raw TEXT \
as given, even when it starts with @.

Hedging: --hedge N sends up to N copies of an idempotent request, \
--hedge-delay apart (a copy that fails sends the next one at once), and the \
first success wins. The copies are the call's attempts: a hedged call is not \
also retried, so --attempts, --backoff and --attempt-timeout cannot be given \
with --hedge (--deadline and --max-delay apply), nor can a method that is not \
idempotent (it would never be hedged).

The URL is checked before anything is sent: an absolute http:// URL, or \
https:// in a build with TLS (the `rustls` feature of steadfast-cli).

Exit status:
  0    a 2xx response; its body was written
  1    the body could not be written (--output cannot be created, a write failed)
  2    a usage error, and nothing was sent: an unknown option, a bad flag \
value, a URL that is not absolute http:// (or https:// with TLS), a -d @FILE \
that cannot be read, --hedge with an option it excludes
  7    no response came (connection refused or reset, DNS, every attempt \
timed out), or the body was cut off
  22   any other status (as curl -f; the body is not written)
  124  --deadline ended the call (a Retry-After that does not fit it included)";

/// The examples at the end of `steadfast get --help`.
pub(crate) const GET_EXAMPLES: &str = "\
Examples:
  steadfast get http://example.invalid/health
  steadfast get --attempts 5 --deadline 30s --attempt-timeout 5s -v http://example.invalid/report -o report.json
  steadfast get -X POST -H 'Content-Type: application/json' -d @job.json --retry-non-idempotent http://example.invalid/jobs
  steadfast get --hedge 3 --hedge-delay 50ms http://example.invalid/search?q=rust";

/// The options of `steadfast get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The URL: http://, or https:// in a build with TLS (checked before anything is sent).
    #[arg(value_name = "URL", value_parser = url_value)]
    pub url: String,

    /// Another replica of the same service, as scheme://host or scheme://host:port (repeatable): each attempt goes to URL's server or one of these, picked by load; a retry goes to one not tried yet, and one that keeps failing is set aside.
    #[arg(long = "also", value_name = "ORIGIN", value_parser = origin_value)]
    pub also: Vec<String>,

    /// The method (default GET, or POST when a body is given).
    #[arg(short = 'X', long = "request", value_name = "METHOD", value_parser = method_value)]
    pub method: Option<http::Method>,

    /// A request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER", value_parser = header_value)]
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,

    /// The request body, as curl's -d: TEXT as given, @FILE (or @- for standard input) without its CR, LF and NUL bytes.
    #[arg(
        short = 'd',
        long = "data",
        value_name = "DATA",
        conflicts_with_all = ["data_raw", "data_binary"]
    )]
    pub data: Option<String>,

    /// The request body, the text as given (a leading @ too).
    #[arg(long = "data-raw", value_name = "TEXT", conflicts_with = "data_binary")]
    pub data_raw: Option<String>,

    /// The request body: the exact bytes of FILE with @FILE (@- for standard input), else the text as given.
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

    /// Send up to N copies of an idempotent request; the first success wins. The copies are the attempts: not with --attempts, --backoff or --attempt-timeout.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32),
          conflicts_with_all = ["attempts", "backoff", "attempt_timeout"])]
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

    /// Print each attempt (status, wait, Retry-After honoured, clamped or past the deadline) on standard error.
    #[arg(short, long)]
    pub verbose: bool,
}

/// Checks a URL the way the client will read it (reqwest's parser), and
/// that this build can fetch it: an absolute `http://` URL, or `https://`
/// with TLS. Returns it as given.
fn url_value(text: &str) -> Result<String, String> {
    // curl reads a URL without a scheme as http://: say so, but send
    // nothing the user did not write.
    let guess = || {
        if text.contains("://") {
            String::new()
        } else {
            format!("; did you mean http://{text}?")
        }
    };
    let url = url::Url::parse(text).map_err(|e| format!("not an absolute URL ({e}){}", guess()))?;
    match url.scheme() {
        "http" => Ok(text.to_owned()),
        "https" if steadfast_http::TLS => Ok(text.to_owned()),
        "https" => Err(
            "this steadfast was built without TLS, so it speaks http:// only; \
             https:// needs a build with the rustls feature \
             (from a checkout: cargo install --path crates/steadfast-cli --features rustls)"
                .to_owned(),
        ),
        other => Err(format!(
            "the scheme {other}: is not HTTP (steadfast get speaks http://{}){}",
            if steadfast_http::TLS {
                " and https://"
            } else {
                ""
            },
            guess()
        )),
    }
}

/// Checks a replica's origin for `--also`: an absolute URL as [`url_value`]
/// takes, with no path beyond `/`, no query and no fragment (the path and
/// query are the main URL's).
fn origin_value(text: &str) -> Result<String, String> {
    let text = url_value(text)?;
    let url = url::Url::parse(&text).map_err(|e| e.to_string())?;
    if url.host_str().is_none() {
        return Err("a replica needs a host: scheme://host[:port]".to_owned());
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "--also takes a replica's origin, scheme://host[:port], not a path: the path and query \
             come from URL (did you mean {}://{}?)",
            url.scheme(),
            url.host_str()
                .map_or_else(String::new, |h| match url.port() {
                    Some(port) => format!("{h}:{port}"),
                    None => h.to_owned(),
                })
        ));
    }
    Ok(text)
}

/// The origin of the main URL, for the set of replicas (`--also`).
fn origin_of(url: &str) -> Result<String, String> {
    let url = url::Url::parse(url).map_err(|e| e.to_string())?;
    Ok(url.origin().ascii_serialization())
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
    let body = match body(args, || {
        let mut all = Vec::new();
        io::stdin().lock().read_to_end(&mut all).map(|_| all)
    }) {
        Ok(body) => body,
        Err(message) => {
            eprintln!("steadfast get: {message}");
            return USAGE;
        }
    };
    let method = method(args, body.is_some());
    if args.hedge.is_some() && !steadfast_http::is_idempotent(&method) {
        eprintln!(
            "steadfast get: --hedge: {method} is not idempotent, so it is never hedged \
             (send it without --hedge, or with an idempotent method such as PUT)"
        );
        return USAGE;
    }
    let progress = io::stderr().is_terminal();
    let client = match client(args, progress) {
        Ok(client) => client,
        Err(message) => {
            eprintln!("steadfast get: {message}");
            return USAGE;
        }
    };
    crate::runtime::block_on("get", send(args, &client, method, body))
}

/// The method: `-X`, else POST with a body and GET without (as curl).
fn method(args: &GetArgs, has_body: bool) -> http::Method {
    args.method.clone().unwrap_or(if has_body {
        http::Method::POST
    } else {
        http::Method::GET
    })
}

/// The request body from `-d`, `--data-raw` or `--data-binary`, as curl
/// makes it; `stdin` reads standard input for `@-`.
fn body(
    args: &GetArgs,
    stdin: impl FnOnce() -> io::Result<Vec<u8>>,
) -> Result<Option<Vec<u8>>, String> {
    if let Some(text) = &args.data {
        // curl: "carriage returns, newlines and null bytes are stripped
        // out" of what -d reads from a file (text given inline is kept).
        return Ok(Some(match read_at("-d", text, stdin)? {
            Source::Inline(bytes) => bytes,
            Source::Read(mut bytes) => {
                bytes.retain(|b| !matches!(b, b'\r' | b'\n' | 0));
                bytes
            }
        }));
    }
    if let Some(text) = &args.data_raw {
        return Ok(Some(text.clone().into_bytes()));
    }
    match &args.data_binary {
        None => Ok(None),
        Some(text) => Ok(Some(match read_at("--data-binary", text, stdin)? {
            Source::Inline(bytes) | Source::Read(bytes) => bytes,
        })),
    }
}

/// Where a body came from.
enum Source {
    /// The argument's own text.
    Inline(Vec<u8>),
    /// A file's or standard input's bytes (`@FILE`, `@-`).
    Read(Vec<u8>),
}

/// `TEXT`, `@FILE` or `@-` (standard input, read by `stdin`).
fn read_at(
    flag: &str,
    text: &str,
    stdin: impl FnOnce() -> io::Result<Vec<u8>>,
) -> Result<Source, String> {
    match text.strip_prefix('@') {
        None => Ok(Source::Inline(text.as_bytes().to_vec())),
        Some("") => Err(format!(
            "{flag} @: a file name must follow @ (@- reads standard input; \
             --data-raw sends a literal @)"
        )),
        Some("-") => stdin()
            .map(Source::Read)
            .map_err(|e| format!("{flag} @-: cannot read standard input: {e}")),
        Some(path) => std::fs::read(path).map(Source::Read).map_err(|e| {
            format!("{flag}: cannot read {path:?}: {e}; --data-raw sends a literal @")
        }),
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
    if !args.also.is_empty() {
        let mut replicas = vec![origin_of(&args.url)?];
        replicas.extend(args.also.iter().cloned());
        builder = builder.endpoints(replicas);
    }
    builder
        .on_attempt(attempts::hook(args.verbose, progress))
        .build()
        .map_err(|e| e.to_string())
}

async fn send(args: &GetArgs, client: &Client, method: http::Method, body: Option<Vec<u8>>) -> i32 {
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
        Err(e) => {
            let code = failed(&e);
            if e.is_deadline()
                && let Some(asked) = attempts::past_deadline()
            {
                let of = args.deadline.map_or_else(
                    || "the deadline".to_owned(),
                    |d| format!("--deadline {}", format_duration(d)),
                );
                eprintln!(
                    "steadfast get: the server's Retry-After {} did not fit in what was left of {of}, \
                     so it was not waited for",
                    format_duration(asked)
                );
            }
            code
        }
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
            Err(e) if e.is_deadline() => {
                eprintln!("steadfast get: the deadline passed while the body was read: cut off");
                return TIMEOUT;
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(argv: &[&str]) -> GetArgs {
        let cli = crate::cli::Cli::try_parse_from(["steadfast", "get"].iter().chain(argv).copied())
            .expect("parses");
        match cli.command {
            crate::cli::Command::Get(args) => args,
            _ => panic!("not get"),
        }
    }

    fn no_stdin() -> io::Result<Vec<u8>> {
        panic!("standard input is not read")
    }

    fn body_of(argv: &[&str], stdin: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let mut a = vec![argv[0], argv[1]];
        a.push("http://127.0.0.1:9/");
        body(&args(&a), || Ok(stdin.to_vec()))
    }

    #[test]
    fn bodies_follow_curl() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("body.json");
        std::fs::write(&file, b"{\r\n  \"a\": 1,\n\0 \"b\": 2\n}\n").expect("write");
        let at_file = format!("@{}", file.display());
        // -d TEXT as given, -d @FILE without CR, LF and NUL.
        assert_eq!(
            body_of(&["-d", "a=1\n"], b"").unwrap(),
            Some(b"a=1\n".to_vec())
        );
        assert_eq!(
            body_of(&["-d", &at_file], b"").unwrap(),
            Some(b"{  \"a\": 1, \"b\": 2}".to_vec())
        );
        // -d @- reads standard input the same way; --data-binary keeps
        // every byte.
        assert_eq!(
            body_of(&["-d", "@-"], b"x\r\ny\n").unwrap(),
            Some(b"xy".to_vec())
        );
        assert_eq!(
            body_of(&["--data-binary", "@-"], b"x\r\ny\n").unwrap(),
            Some(b"x\r\ny\n".to_vec())
        );
        assert_eq!(
            body_of(&["--data-binary", &at_file], b"").unwrap(),
            Some(std::fs::read(&file).unwrap())
        );
        // --data-raw: a leading @ is text.
        assert_eq!(
            body(&args(&["--data-raw", &at_file, "http://h/"]), no_stdin).unwrap(),
            Some(at_file.clone().into_bytes())
        );
        assert_eq!(body(&args(&["http://h/"]), no_stdin).unwrap(), None);
        // Files that cannot be read, and a bare @, are errors naming the flag.
        for (flag, text) in [
            ("-d", "@"),
            ("-d", "@/nonexistent/x"),
            ("--data-binary", "@"),
        ] {
            let err = body(&args(&[flag, text, "http://h/"]), no_stdin).unwrap_err();
            assert!(err.starts_with(flag), "{err}");
        }
    }

    #[test]
    fn only_one_body_flag() {
        for pair in [
            ["-d", "--data-raw"],
            ["-d", "--data-binary"],
            ["--data-raw", "--data-binary"],
        ] {
            let err = crate::cli::Cli::try_parse_from([
                "steadfast",
                "get",
                pair[0],
                "a",
                pair[1],
                "b",
                "http://h/",
            ])
            .expect_err("conflict");
            assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        }
    }

    #[test]
    fn urls_are_checked_before_anything_is_sent() {
        assert_eq!(
            url_value("http://127.0.0.1:8080/x?q=1").unwrap(),
            "http://127.0.0.1:8080/x?q=1"
        );
        for (text, needle) in [
            ("not-a-url", "did you mean http://not-a-url?"),
            ("localhost:8080", "did you mean http://localhost:8080?"),
            ("ftp://example.invalid/", "the scheme ftp: is not HTTP"),
            ("http://", "not an absolute URL"),
        ] {
            let err = url_value(text).unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
        let https = url_value("https://example.invalid/");
        if steadfast_http::TLS {
            assert!(https.is_ok());
        } else {
            assert!(https.unwrap_err().contains("built without TLS"));
        }
    }

    #[test]
    fn hedge_excludes_the_retry_options() {
        for other in [
            &["--attempts", "5"][..],
            &["--backoff", "constant"],
            &["--attempt-timeout", "1s"],
        ] {
            let mut argv = vec!["steadfast", "get", "--hedge", "2"];
            argv.extend_from_slice(other);
            argv.push("http://h/");
            let err = crate::cli::Cli::try_parse_from(argv).expect_err("conflict");
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{other:?}"
            );
        }
        // What still applies to hedged calls.
        let a = args(&[
            "--hedge",
            "3",
            "--hedge-delay",
            "5ms",
            "--deadline",
            "2s",
            "--max-delay",
            "1s",
            "http://h/",
        ]);
        assert_eq!((a.hedge, a.attempts), (Some(3), 3));
    }
}
