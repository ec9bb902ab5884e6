//! The client against a local server that fails a few times:
//! `cargo run -p steadfast-http --example flaky`.
//!
//! The server (axum, on 127.0.0.1 with a port the OS picks) answers `/flaky`
//! with 503 twice (the second time with `Retry-After: 1`), then 200. The
//! client retries the GET (up to 4 attempts, all within 2 s), waiting the
//! backoff's delay after the first 503 and the server's second after the
//! other. A POST to a route that fails the same way is sent once: it is not
//! idempotent. And a
//! one-year `Retry-After` on `/busy` under the 2 s deadline gives up at once
//! instead of waiting. Each request the server sees is printed, with the
//! time since the start.
//!
//! `cargo test -p steadfast-http --example flaky` runs the same code as a
//! test.
#![allow(clippy::print_stdout)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    run(&Log::printing()).await?;
    Ok(())
}

/// What the client saw, for the test.
#[derive(Debug)]
#[allow(dead_code)]
struct Seen {
    /// The GET's status, attempts and body.
    get: (u16, u32, String),
    /// The POST's error.
    post: String,
    /// The error of the GET that was told to wait a year.
    busy: String,
}

async fn run(log: &Log) -> Result<Seen, Error> {
    let addr = start_server(log.clone()).await?;
    let client = steadfast_http::Client::builder()
        .attempts(4)
        .deadline(Duration::from_secs(2))
        .build()?;

    log.say("client: GET /flaky (4 attempts, 2s for all)".to_owned());
    let response = client.get(format!("http://{addr}/flaky")).send().await?;
    let report = response.ending();
    let (status, attempts) = (response.status(), report.attempts);
    log.say(format!(
        "client: {status} after {attempts} attempts, {} of it waiting",
        show(report.waited)
    ));
    let body = response.text().await?;
    log.say(format!("client: body {body:?}"));

    log.say("client: POST /flaky/again".to_owned());
    let post = client
        .post(format!("http://{addr}/flaky/again"))
        .body("pay 42")
        .send()
        .await
        .expect_err("a POST is not retried")
        .to_string();
    log.say(format!("client: {post}"));

    log.say("client: GET /busy".to_owned());
    let busy = client
        .get(format!("http://{addr}/busy"))
        .send()
        .await
        .expect_err("cannot wait a year")
        .to_string();
    log.say(format!("client: {busy}"));
    Ok(Seen {
        get: (status.as_u16(), attempts, body),
        post,
        busy,
    })
}

/// The server: `/flaky` and `/flaky/again` each fail twice (503, then 503
/// with `Retry-After: 1`) before they answer; `/busy` asks for a year.
async fn start_server(log: Log) -> std::io::Result<std::net::SocketAddr> {
    let flaky = |log: Log| {
        let hits = Arc::new(AtomicU32::new(0));
        any(move |method: Method| {
            let n = hits.fetch_add(1, Ordering::SeqCst) + 1;
            let response: Response = match n {
                1 => StatusCode::SERVICE_UNAVAILABLE.into_response(),
                2 => (StatusCode::SERVICE_UNAVAILABLE, [("retry-after", "1")]).into_response(),
                _ => "hello".into_response(),
            };
            let retry_after = response.headers().get("retry-after").cloned();
            log.say(format!(
                "server: {method} #{n} -> {}{}",
                response.status(),
                retry_after
                    .and_then(|v| v.to_str().map(|v| format!(", Retry-After: {v}")).ok())
                    .unwrap_or_default()
            ));
            async move { response }
        })
    };
    let router = Router::new()
        .route("/flaky", flaky(log.clone()))
        .route("/flaky/again", flaky(log.clone()))
        .route(
            "/busy",
            any(move |method: Method| {
                log.say(format!(
                    "server: {method} /busy -> 429, Retry-After: 31536000 (a year)"
                ));
                async { (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "31536000")]) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// What happened, each line stamped with the time since the start: printed
/// as it happens (unless quiet), and kept for the test.
#[derive(Clone)]
struct Log {
    start: Instant,
    print: bool,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Log {
    fn printing() -> Self {
        Self {
            start: Instant::now(),
            print: true,
            lines: Arc::default(),
        }
    }

    fn say(&self, line: String) {
        if self.print {
            println!("{:>9}  {line}", show(self.start.elapsed()));
        }
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }
}

/// `15.2ms` below a second, `1.109s` from there.
fn show(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.3}s", d.as_secs_f64())
    } else {
        format!("{:.1}ms", d.as_secs_f64() * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn retries_the_get_sends_the_post_once_and_will_not_wait_a_year() -> Result<(), Error> {
        let log = Log {
            print: false,
            ..Log::printing()
        };
        let seen = run(&log).await?;
        assert_eq!(seen.get, (200, 3, "hello".to_owned()));
        assert!(seen.post.contains("not idempotent"), "{}", seen.post);
        assert!(seen.busy.contains("deadline exceeded"), "{}", seen.busy);
        let lines = log
            .lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let server: Vec<_> = lines.iter().filter(|l| l.starts_with("server:")).collect();
        assert_eq!(
            server,
            [
                "server: GET #1 -> 503 Service Unavailable",
                "server: GET #2 -> 503 Service Unavailable, Retry-After: 1",
                "server: GET #3 -> 200 OK",
                "server: POST #1 -> 503 Service Unavailable",
                "server: GET /busy -> 429, Retry-After: 31536000 (a year)",
            ],
            "{lines:#?}"
        );
        Ok(())
    }
}
