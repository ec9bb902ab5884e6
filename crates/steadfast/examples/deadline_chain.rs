//! A deadline passed down two calls: a client calls service A, which calls
//! service B, over HTTP on 127.0.0.1.
//!
//! The client gives the whole call 1 s and sends that in the
//! `x-steadfast-timeout` header. Each service reads the header into a
//! deadline on its own clock, keeps 100 ms to answer its caller, and handles
//! the request under what is left: A works 100 ms and calls B (through the
//! retry engine, whose attempts see the ambient deadline) with its own time
//! left; B does its work under its deadline. Each hop sees less time than the
//! one before, and none can hand on more than it received.
//!
//! The first request's work fits. The second asks B for 2 s of work: B stops
//! at its deadline and answers 504 while A can still pass that on, instead of
//! working for an answer no one waits for.
//!
//! ```sh
//! cargo run -p steadfast --example deadline_chain
//! ```
//!
//! `cargo test -p steadfast --example deadline_chain` runs the same code as a
//! test.
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use steadfast::clock::{Clock, TokioClock};
use steadfast::deadline::DeadlineHeader;
use steadfast::{Attempt, Deadline, RetryPolicy, Retryable, Verdict, deadline};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What the client gives the whole call.
const BUDGET: Duration = Duration::from_secs(1);
/// What each service keeps to send its answer back.
const REPLY_MARGIN: Duration = Duration::from_millis(100);
/// A's own work before it calls B.
const A_WORK: Duration = Duration::from_millis(100);

/// The deadline header: `x-steadfast-timeout`, in the `grpc-timeout` format.
const HEADER: DeadlineHeader = DeadlineHeader::DEFAULT;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let log = Log::printing();
    let a = start_services(&log).await?;
    for b_work in [Duration::from_millis(150), Duration::from_secs(2)] {
        log.say("");
        call_a(&log, a, b_work).await?;
    }
    Ok(())
}

/// What the client got back (`main` prints it as it comes; the test reads it).
#[derive(Debug)]
#[allow(dead_code)]
struct Answer {
    status: StatusCode,
    body: String,
}

/// The client: calls A with [`BUDGET`] to spare, asking B for `b_work`.
async fn call_a(log: &Log, a: SocketAddr, b_work: Duration) -> Result<Answer, Error> {
    let sent = HEADER.encode(BUDGET);
    log.say(&format!(
        "client: GET A /quote (B's work: {}) with {} to spare: {}: {sent}",
        show(b_work),
        show(BUDGET),
        HEADER.name(),
    ));
    let start = Instant::now();
    let response = reqwest::Client::new()
        .get(format!("http://{a}/quote/{}", b_work.as_millis()))
        .header(HEADER.name(), sent.as_str())
        .timeout(BUDGET)
        .send()
        .await?;
    let status = response.status();
    let body = response.text().await?;
    log.say(&format!(
        "client: {status} {body:?} after {}",
        show(start.elapsed())
    ));
    Ok(Answer { status, body })
}

/// Both services, sharing the log; returns A's address.
async fn start_services(log: &Log) -> Result<SocketAddr, Error> {
    let b = serve(
        Router::new()
            .route("/price/{work_ms}", get(service_b))
            .with_state(log.clone()),
    )
    .await?;
    let a_state = A {
        log: log.clone(),
        b,
        http: reqwest::Client::new(),
        // Up to 3 attempts at B, but never past A's own deadline.
        policy: RetryPolicy::builder().max_attempts(3).build()?,
    };
    serve(
        Router::new()
            .route("/quote/{work_ms}", get(service_a))
            .with_state(a_state),
    )
    .await
}

async fn serve(router: Router) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// The deadline a request carries, decoded on this service's clock, less
/// the time it keeps to answer.
fn own_deadline(headers: &HeaderMap) -> Option<Deadline> {
    let now = TokioClock.now();
    let received = HEADER
        .decode_deadline(headers.get(HEADER.name())?.as_bytes(), now)
        .ok()?;
    Some(received.shave(REPLY_MARGIN, now))
}

#[derive(Clone)]
struct A {
    log: Log,
    b: SocketAddr,
    http: reqwest::Client,
    policy: RetryPolicy,
}

/// Service A: its own work, then a call to B, all under its deadline.
async fn service_a(
    State(a): State<A>,
    Path(work_ms): Path<u64>,
    headers: HeaderMap,
) -> (StatusCode, String) {
    let Some(deadline) = own_deadline(&headers) else {
        return (StatusCode::BAD_REQUEST, "no deadline".into());
    };
    let left = deadline.remaining(TokioClock.now());
    a.log.hop("A", left);
    a.log.say(&format!(
        "A: request in; {} left for it (after {} kept to answer); working {}",
        show(left),
        show(REPLY_MARGIN),
        show(A_WORK)
    ));
    // Everything below runs with `deadline` as the ambient deadline.
    deadline::scope_async(deadline, async {
        tokio::time::sleep(A_WORK).await;
        let url = format!("http://{}/price/{work_ms}", a.b);
        let call_b = |attempt: Attempt| {
            // The attempt's deadline is A's (the ambient one): send on what is left.
            let left = attempt.time_left(TokioClock.now()).unwrap_or_default();
            let sent = HEADER.encode(left);
            a.log.say(&format!(
                "A: attempt {} at B with {} left: {}: {sent}",
                attempt.number,
                show(left),
                HEADER.name()
            ));
            let request = a.http.get(&url).header(HEADER.name(), sent.as_str());
            async move {
                let response = request.send().await?;
                let status = response.status();
                Ok::<_, reqwest::Error>((status, response.text().await?))
            }
        };
        let outcome = call_b
            .retry(&a.policy)
            .classify(
                |outcome: &Result<(StatusCode, String), reqwest::Error>| match outcome {
                    Ok((status, _)) if status.is_success() => Verdict::Success,
                    // Overloaded, or down for a moment: worth another attempt.
                    Ok((StatusCode::SERVICE_UNAVAILABLE, _)) => Verdict::Retry,
                    Err(e) if e.is_connect() => Verdict::Retry,
                    // B ran out of time (504), or anything else: final.
                    _ => Verdict::Stop,
                },
            )
            .name("A -> B")
            .await;
        let left = show(deadline.remaining(TokioClock.now()));
        match outcome {
            Ok((status, body)) => {
                a.log
                    .say(&format!("A: B answered {status} {body:?}; {left} left"));
                (status, body)
            }
            Err(e) => {
                a.log.say(&format!("A: {e}; {left} left"));
                (StatusCode::GATEWAY_TIMEOUT, e.to_string())
            }
        }
    })
    .await
}

/// Service B: its work (a stand-in for a slow query), stopped at its
/// deadline.
async fn service_b(
    State(log): State<Log>,
    Path(work_ms): Path<u64>,
    headers: HeaderMap,
) -> (StatusCode, String) {
    let Some(deadline) = own_deadline(&headers) else {
        return (StatusCode::BAD_REQUEST, "no deadline".into());
    };
    let work = Duration::from_millis(work_ms);
    log.hop("B", deadline.remaining(TokioClock.now()));
    log.say(&format!(
        "B: request in; {} left for it; the work takes {}",
        show(deadline.remaining(TokioClock.now())),
        show(work)
    ));
    match deadline::timeout_at(TokioClock, deadline, tokio::time::sleep(work)).await {
        Ok(()) => {
            let left = show(deadline.remaining(TokioClock.now()));
            log.say(&format!("B: done; {left} left"));
            (StatusCode::OK, "42 EUR".into())
        }
        Err(exceeded) => {
            log.say(&format!("B: stopped the work: {exceeded}"));
            (StatusCode::GATEWAY_TIMEOUT, exceeded.to_string())
        }
    }
}

/// What happened, each line stamped with the time since the start: printed
/// as it happens (unless quiet), and kept for the test, with the time left
/// each service saw on arrival.
#[derive(Clone)]
struct Log {
    start: Instant,
    print: bool,
    seen: Arc<Mutex<Vec<(&'static str, Duration)>>>,
}

impl Log {
    fn printing() -> Self {
        Self {
            start: Instant::now(),
            print: true,
            seen: Arc::default(),
        }
    }

    fn say(&self, line: &str) {
        if self.print && line.is_empty() {
            println!();
        } else if self.print {
            println!("{:>9}  {line}", show(self.start.elapsed()));
        }
    }

    /// A service received a request with `left` for it.
    fn hop(&self, service: &'static str, left: Duration) {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((service, left));
    }
}

/// `15.2ms` below a second, `1.000s` from there.
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

    fn seen(log: &Log) -> Vec<(&'static str, Duration)> {
        std::mem::take(&mut *log.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }

    #[tokio::test]
    async fn each_hop_gets_less_time_and_b_stops_at_its_deadline() -> Result<(), Error> {
        let log = Log {
            print: false,
            ..Log::printing()
        };
        let a = start_services(&log).await?;

        let fits = call_a(&log, a, Duration::from_millis(50)).await?;
        assert_eq!(
            (fits.status, fits.body.as_str()),
            (StatusCode::OK, "42 EUR")
        );
        let hops = seen(&log);
        assert_eq!(hops.iter().map(|h| h.0).collect::<Vec<_>>(), ["A", "B"]);
        // A: the budget less its reply margin (and the trip); B: A's time
        // less A's work (and B's own margin).
        assert!(hops[0].1 <= BUDGET - REPLY_MARGIN, "{hops:?}");
        assert!(hops[1].1 <= hops[0].1 - A_WORK - REPLY_MARGIN, "{hops:?}");

        let too_slow = call_a(&log, a, Duration::from_secs(30)).await?;
        assert_eq!(too_slow.status, StatusCode::GATEWAY_TIMEOUT);
        assert!(too_slow.body.contains("deadline exceeded"), "{too_slow:?}");
        let hops = seen(&log);
        assert_eq!(hops.iter().map(|h| h.0).collect::<Vec<_>>(), ["A", "B"]);
        Ok(())
    }
}
