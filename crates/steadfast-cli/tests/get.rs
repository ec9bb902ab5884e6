//! `steadfast get` end to end: the real binary against a real axum server
//! on 127.0.0.1 with injected faults. Exit codes, `-v` output, and body
//! bytes identical to what the server sent.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

mod command;

use command::{STEADFAST, code, stderr};

const FAST: &str = "constant:delay=1ms";

#[derive(Default)]
struct Seen {
    requests: Mutex<HashMap<String, u32>>,
    headers: Mutex<Vec<HeaderMap>>,
}

impl Seen {
    fn requests(&self, path: &str) -> u32 {
        self.requests
            .lock()
            .expect("lock")
            .get(path)
            .copied()
            .unwrap_or(0)
    }
}

/// The bytes `/bytes/N/_` answers with: every byte value, over and over.
fn binary(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 256) as u8).collect()
}

/// `/fail/N/STATUS`, `/retry-after/N/VALUE`, `/bytes/LEN/_`, `/echo/_/_`.
async fn handle(
    State(seen): State<Arc<Seen>>,
    Path((kind, n, arg)): Path<(String, u32, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    seen.headers.lock().expect("lock").push(headers);
    let count = {
        let mut all = seen.requests.lock().expect("lock");
        let c = all.entry(uri.path().to_owned()).or_default();
        *c += 1;
        *c
    };
    match kind.as_str() {
        "fail" if count <= n => {
            let status = arg.parse().ok().and_then(|s| StatusCode::from_u16(s).ok());
            (
                status.unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                "failure",
            )
                .into_response()
        }
        "retry-after" if count <= n => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", arg)],
            "later",
        )
            .into_response(),
        "bytes" => binary(n as usize).into_response(),
        "echo" => body.into_response(),
        _ => "ok".into_response(),
    }
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

impl Server {
    async fn start() -> Self {
        let seen = Arc::new(Seen::default());
        let router = Router::new()
            .route("/{kind}/{n}/{arg}", any(handle))
            .with_state(Arc::clone(&seen));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Runs `steadfast get <args>` without blocking the server's runtime.
async fn get(args: &[&str]) -> Output {
    let args: Vec<String> = std::iter::once("get".to_owned())
        .chain(args.iter().map(|s| (*s).to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        Command::new(STEADFAST)
            .args(&args)
            .output()
            .expect("steadfast runs")
    })
    .await
    .expect("the child finished")
}

/// Runs `steadfast get <args>` with `input` on its standard input.
async fn get_with_stdin(args: &[&str], input: &[u8]) -> Output {
    let args: Vec<String> = std::iter::once("get".to_owned())
        .chain(args.iter().map(|s| (*s).to_owned()))
        .collect();
    let input = input.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(STEADFAST)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("steadfast starts");
        let mut stdin = child.stdin.take().expect("a pipe");
        stdin.write_all(&input).expect("write the input");
        drop(stdin);
        child.wait_with_output().expect("steadfast runs")
    })
    .await
    .expect("the child finished")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_is_written_byte_for_byte() {
    let server = Server::start().await;
    let out = get(&[&server.url("/bytes/100000/x")]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(out.stdout, binary(100_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_and_verbose_prints_each_attempt() {
    let server = Server::start().await;
    let out = get(&["--backoff", FAST, "-v", &server.url("/fail/2/503")]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(out.stdout, b"ok");
    let err = stderr(&out);
    assert!(err.contains("attempt 1: 503 Service Unavailable"), "{err}");
    assert!(err.contains("attempt 2 (after waiting"), "{err}");
    assert!(err.contains("attempt 3 (after waiting"), "{err}");
    assert!(err.contains(": 200 OK"), "{err}");
    assert_eq!(server.seen.requests("/fail/2/503"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_says_when_retry_after_is_honoured_or_clamped() {
    let server = Server::start().await;
    let out = get(&[
        "-v",
        "--max-delay",
        "20ms",
        &server.url("/retry-after/1/3600"),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Retry-After 1h clamped to the max delay"),
        "{}",
        stderr(&out)
    );
    let out = get(&["-v", &server.url("/retry-after/1/1")]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Retry-After 1s honoured"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_error_status_exits_22_without_the_body() {
    let server = Server::start().await;
    let out = get(&[&server.url("/fail/1/404")]).await;
    assert_eq!(code(&out), 22);
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("404"), "{}", stderr(&out));
    assert_eq!(
        server.seen.requests("/fail/1/404"),
        1,
        "a 404 is not retried"
    );

    let out = get(&[
        "--attempts",
        "2",
        "--backoff",
        FAST,
        &server.url("/fail/9/503"),
    ])
    .await;
    assert_eq!(code(&out), 22);
    assert!(
        stderr(&out).contains("attempts exhausted"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.seen.requests("/fail/9/503"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_response_exits_7() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("address")
    };
    let out = get(&[
        "--attempts",
        "2",
        "--backoff",
        FAST,
        &format!("http://{addr}/"),
    ])
    .await;
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("after 2 attempts"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_ends_it_with_124() {
    let server = Server::start().await;
    let out = get(&["--deadline", "2s", &server.url("/retry-after/9/31536000")]).await;
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("deadline exceeded"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.seen.requests("/retry-after/9/31536000"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_is_sent_once_unless_opted_in() {
    let server = Server::start().await;
    let out = get(&[
        "-d",
        "pay 42",
        "--backoff",
        FAST,
        &server.url("/fail/1/503"),
    ])
    .await;
    assert_eq!(code(&out), 22);
    assert!(stderr(&out).contains("not idempotent"), "{}", stderr(&out));
    assert_eq!(server.seen.requests("/fail/1/503"), 1);

    let out = get(&[
        "-d",
        "pay 42",
        "--retry-non-idempotent",
        "--backoff",
        FAST,
        &server.url("/fail/1/502"),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(server.seen.requests("/fail/1/502"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_binary_from_a_file_headers_and_output_file() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let input = dir.path().join("in.bin");
    let output = dir.path().join("out.bin");
    std::fs::write(&input, binary(5000)).expect("write the input");
    let out = get(&[
        "-X",
        "PUT",
        "-H",
        "X-Trace: abc123",
        "--data-binary",
        &format!("@{}", input.display()),
        "--deadline",
        "30s",
        "-o",
        output.to_str().expect("UTF-8"),
        &server.url("/echo/0/x"),
    ])
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read(&output).expect("the output"), binary(5000));
    let headers = server.seen.headers.lock().expect("lock");
    let sent = headers.last().expect("a request");
    assert_eq!(
        sent.get("x-trace").map(axum::http::HeaderValue::as_bytes),
        Some(&b"abc123"[..])
    );
    assert!(
        sent.get("x-steadfast-timeout").is_some(),
        "the deadline travels"
    );
}

/// `-d @FILE` sends the file as curl does (without CR, LF and NUL bytes),
/// `-d @-` standard input the same way, `--data-binary @-` every byte, and
/// `--data-raw` the text itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_follows_curl() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("body.json");
    std::fs::write(&file, b"{\r\n  \"n\": 1\n}\n").expect("write the body");
    let at_file = format!("@{}", file.display());
    let echo = server.url("/echo/0/x");
    for (args, input, sent) in [
        (vec!["-d", at_file.as_str()], &b""[..], &b"{  \"n\": 1}"[..]),
        (vec!["-d", "@-"], b"a=1\r\n&b=2\n", b"a=1&b=2"),
        (vec!["--data-binary", "@-"], b"a=1\r\n", b"a=1\r\n"),
        (
            vec!["--data-raw", at_file.as_str()],
            b"",
            at_file.as_bytes(),
        ),
        (vec!["-d", "@"], b"", b""),
    ] {
        let mut argv = args.clone();
        argv.push(&echo);
        let out = get_with_stdin(&argv, input).await;
        if sent.is_empty() {
            assert_eq!(code(&out), 2, "{args:?}");
            assert!(
                stderr(&out).contains("a file name must follow @"),
                "{}",
                stderr(&out)
            );
        } else {
            assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
            assert_eq!(out.stdout, sent, "{args:?}");
        }
    }
    // A POST each (the body makes it one), and nothing for the bare @.
    assert_eq!(server.seen.requests("/echo/0/x"), 4);
}

/// A hedged call's copies are its attempts: the options of retries are
/// usage errors with `--hedge`, as is a method that is never hedged; nothing
/// is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedge_with_retry_options_is_a_usage_error() {
    let server = Server::start().await;
    let url = server.url("/fail/9/503");
    for (args, needle) in [
        (&["--hedge", "2", "--attempts", "5"][..], "'--attempts <N>'"),
        (&["--hedge", "2", "--backoff", FAST], "'--backoff <SPEC>'"),
        (
            &["--hedge", "2", "--attempt-timeout", "1s"],
            "'--attempt-timeout <DURATION>'",
        ),
        (
            &["--hedge", "2", "-d", "x"],
            "POST is not idempotent, so it is never hedged",
        ),
        (&["--hedge", "2", "-X", "PATCH"], "PATCH is not idempotent"),
    ] {
        let mut argv = args.to_vec();
        argv.push(&url);
        let out = get(&argv).await;
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--hedge"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(server.seen.requests("/fail/9/503"), 0);
    // Alone, --hedge sends its copies, and they are all the attempts.
    let out = get(&["--hedge", "2", &url]).await;
    assert_eq!(code(&out), 22, "{}", stderr(&out));
    assert_eq!(server.seen.requests("/fail/9/503"), 2);

    let help = String::from_utf8(get(&["--help"]).await.stdout).expect("UTF-8");
    assert!(help.contains("a hedged call is not also retried"), "{help}");
}

/// A URL the client cannot fetch is a usage error with a hint, found
/// before anything is sent (and so never retried).
#[test]
fn a_bad_url_is_a_usage_error_with_a_hint() {
    for (url, needle) in [
        ("not-a-url", "did you mean http://not-a-url?"),
        ("localhost:8080/x", "did you mean http://localhost:8080/x?"),
        ("ftp://127.0.0.1/", "the scheme ftp: is not HTTP"),
    ] {
        let out = Command::new(STEADFAST)
            .args(["get", "-v", url])
            .output()
            .expect("steadfast runs");
        assert_eq!(code(&out), 2, "{url}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(needle), "{url}: {err}");
        assert!(!err.contains("attempt"), "{url}: {err}");
    }
    // https:// without TLS: refused before a connection is made (a build
    // with TLS fetches it; nothing to check there).
    if steadfast_http::TLS {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let out = Command::new(STEADFAST)
        .args(["get", "-v", &format!("https://{addr}/")])
        .output()
        .expect("steadfast runs");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("built without TLS"), "{err}");
    assert!(err.contains("--features rustls"), "{err}");
    assert!(!err.contains("attempt"), "{err}");
    listener.set_nonblocking(true).expect("non-blocking");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection was made"
    );
}

/// A Retry-After that does not fit the deadline: the call stops at once,
/// and says why, with or without -v.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_past_the_deadline_says_so() {
    let server = Server::start().await;
    let url = server.url("/retry-after/9/2");
    let out = get(&["--deadline", "1s", &url]).await;
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("deadline exceeded"), "{err}");
    assert!(
        err.contains("the server's Retry-After 2s did not fit in what was left of --deadline 1s, so it was not waited for"),
        "{err}"
    );
    let out = get(&["-v", "--deadline", "1s", &url]).await;
    assert_eq!(code(&out), 124, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("attempt 1: 503 Service Unavailable; Retry-After 2s does not fit the deadline: not waited"),
        "{err}"
    );
    assert!(!err.contains("honoured"), "{err}");
    assert_eq!(server.seen.requests("/retry-after/9/2"), 2);
}

#[test]
fn help_lists_the_exit_codes() {
    let out = Command::new(STEADFAST)
        .args(["get", "--help"])
        .output()
        .expect("steadfast runs");
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let codes = text
        .split_once("Exit status:")
        .expect("an exit status section")
        .1;
    for needle in [
        "\n  0 ", "\n  1 ", "\n  2 ", "\n  7 ", "\n  22 ", "\n  124 ",
    ] {
        assert!(codes.contains(needle), "{needle:?} in {codes}");
    }
}

#[test]
fn usage_errors_name_the_flag() {
    for (args, flag) in [
        (
            vec!["get", "-H", "no colon", "http://127.0.0.1:9/"],
            "--header",
        ),
        (
            vec!["get", "--attempts", "0", "http://127.0.0.1:9/"],
            "--attempts",
        ),
        (
            vec!["get", "--deadline", "soon", "http://127.0.0.1:9/"],
            "--deadline",
        ),
        (
            vec!["get", "--backoff", "bogus", "http://127.0.0.1:9/"],
            "--backoff",
        ),
        (
            vec!["get", "--hedge-delay", "5ms", "http://127.0.0.1:9/"],
            "--hedge",
        ),
    ] {
        let out = Command::new(STEADFAST)
            .args(&args)
            .output()
            .expect("steadfast runs");
        assert_eq!(code(&out), 2, "{args:?}");
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
    }
    let out = Command::new(STEADFAST)
        .args([
            "get",
            "--data-binary",
            "@/nonexistent/file",
            "http://127.0.0.1:9/",
        ])
        .output()
        .expect("steadfast runs");
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--data-binary"), "{}", stderr(&out));
}

/// On a terminal, a progress line says what the call waits for while it
/// waits, redrawn in place, and is cleared before the body is written; off
/// a terminal (every other test here) there is none. The terminal is a
/// real pseudo-terminal from util-linux's `script`, with the binary in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_gets_a_progress_line_while_the_call_waits() {
    let server = Server::start().await;
    // A 1 s Retry-After: long enough for several redraws (every 100 ms).
    let url = server.url("/retry-after/1/1");
    let shown = tokio::task::spawn_blocking(move || {
        Command::new("script")
            .args([
                "-q",
                "-e",
                "-c",
                &format!("{STEADFAST} get {url}"),
                "/dev/null",
            ])
            .output()
            .expect("util-linux's script runs")
    })
    .await
    .expect("the child finished");
    assert_eq!(code(&shown), 0, "{}", stderr(&shown));
    let screen = String::from_utf8_lossy(&shown.stdout);
    let redraws = screen
        .matches("\r\x1b[2Ksteadfast get: attempt 1 got 503; waiting ")
        .count();
    assert!(redraws >= 3, "{redraws} redraws: {screen:?}");
    // Cleared, then the body.
    assert!(screen.ends_with("\r\x1b[2Kok"), "{screen:?}");
    assert_eq!(server.seen.requests("/retry-after/1/1"), 2);

    // Off a terminal, the same wait (`01` is one second too): the body
    // alone, nothing on standard error.
    let out = get(&[&server.url("/retry-after/1/01")]).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(out.stdout, b"ok");
    assert_eq!(stderr(&out), "");
    assert_eq!(server.seen.requests("/retry-after/1/01"), 2);
}

/// `--also`: another replica of the same service. The main URL's server
/// refuses connections; every attempt that meets it goes on to the other,
/// which serves the URL's path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn also_sends_to_another_replica_when_the_first_refuses() {
    let good = Server::start().await;
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address")
    };
    let url = format!("http://{dead}/ok/0/x");
    let also = format!("http://{}", good.addr);
    for _ in 0..3 {
        let out = get(&["--backoff", FAST, "-v", &url, "--also", &also]).await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(out.stdout, b"ok");
    }
    assert_eq!(good.seen.requests("/ok/0/x"), 3);
}

#[test]
fn also_with_a_path_is_a_usage_error() {
    let out = Command::new(STEADFAST)
        .args([
            "get",
            "http://127.0.0.1:1/item",
            "--also",
            "http://127.0.0.1:2/item",
        ])
        .output()
        .expect("steadfast runs");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("--also takes a replica's origin"), "{err}");
    assert!(err.contains("did you mean http://127.0.0.1:2?"), "{err}");
}
