//! Deadline propagation over real sockets: a client calls service B, which
//! calls service C, both axum servers on 127.0.0.1. The time left travels in
//! the `x-steadfast-timeout` header.
//!
//! Real time is used (this is an integration test), but nothing asserts a
//! timing threshold other than generous upper bounds.

#![cfg(feature = "tokio")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use steadfast::clock::{Clock, TokioClock};
use steadfast::deadline::{CancelCause, DeadlineGuard, DeadlineHeader, TimeBudget};
use steadfast::{Deadline, deadline};
use tokio::sync::mpsc;

/// A bound that only a broken implementation reaches.
const GENEROUS: Duration = Duration::from_secs(30);

/// What service C reports to the test.
#[derive(Debug)]
enum Event {
    /// C received a request with this much time left.
    Received(Duration),
    /// The work C started for a request was stopped, for this reason.
    Stopped(CancelCause),
}

#[derive(Clone)]
struct CState {
    events: mpsc::UnboundedSender<Event>,
    header: DeadlineHeader,
}

/// The deadline a request carries, decoded on the local clock.
fn incoming_deadline(header: &DeadlineHeader, headers: &HeaderMap) -> Option<Deadline> {
    let value = headers.get(header.name())?;
    header
        .decode_deadline(value.as_bytes(), TokioClock.now())
        .ok()
}

/// Service C: holds a [`DeadlineGuard`] for each request, starts background
/// work that watches the guard's token, and answers only when `/slow`'s work
/// runs out of time (it never finishes on its own).
async fn c_handler(State(state): State<CState>, headers: HeaderMap) -> (StatusCode, String) {
    let clock = TokioClock;
    let deadline = incoming_deadline(&state.header, &headers);
    if let Some(d) = deadline {
        let _ = state.events.send(Event::Received(d.remaining(clock.now())));
    }
    let guard = DeadlineGuard::spawn(clock, deadline);
    // Background work for this request: it stops when the token fires,
    // whether because the deadline passed or because the guard was dropped
    // (the client went away and the server dropped this handler).
    let token = guard.token().clone();
    let events = state.events.clone();
    tokio::spawn(async move {
        token.cancelled().await;
        let cause = CancelCause::classify(deadline, TokioClock.now());
        let _ = events.send(Event::Stopped(cause));
    });
    let Some(d) = deadline else {
        return (StatusCode::BAD_REQUEST, "no deadline".into());
    };
    // The handler's own work, under the deadline: never finishes by itself.
    match deadline::timeout_at(clock, d, std::future::pending::<()>()).await {
        Ok(()) => (StatusCode::OK, "done".into()),
        Err(exceeded) => (StatusCode::GATEWAY_TIMEOUT, exceeded.to_string()),
    }
}

/// Service C's quick route: answers at once with the time left it saw, in
/// nanoseconds.
async fn c_quick(State(state): State<CState>, headers: HeaderMap) -> (StatusCode, String) {
    match incoming_deadline(&state.header, &headers) {
        Some(d) => {
            let left = d.remaining(TokioClock.now());
            let _ = state.events.send(Event::Received(left));
            (StatusCode::OK, left.as_nanos().to_string())
        }
        None => (StatusCode::BAD_REQUEST, "no deadline".into()),
    }
}

#[derive(Clone)]
struct BState {
    c: SocketAddr,
    http: reqwest::Client,
    header: DeadlineHeader,
}

/// Service B: its own limit per request is 30 s; it works 200 ms, then calls
/// C with the time left (read from the ambient deadline, as library code
/// deep in a stack would) and relays C's answer.
async fn b_handler(
    State(state): State<Arc<BState>>,
    axum::extract::Path(route): axum::extract::Path<String>,
    headers: HeaderMap,
) -> (StatusCode, String) {
    let clock = TokioClock;
    let link = incoming_deadline(&state.header, &headers);
    let budget = TimeBudget::start(clock.now(), link, Some(Duration::from_secs(30)));
    let Some(request_deadline) = budget.deadline() else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "unbounded".into());
    };
    let work = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        call_downstream(&state, &route).await
    };
    match deadline::timeout_at(clock, request_deadline, work).await {
        Ok(Ok((status, body))) => (status, body),
        Ok(Err(e)) => (StatusCode::BAD_GATEWAY, e.to_string()),
        Err(exceeded) => (StatusCode::GATEWAY_TIMEOUT, exceeded.to_string()),
    }
}

/// An outgoing call that knows nothing of B's request: it reads the ambient
/// deadline and propagates the time left.
async fn call_downstream(
    state: &BState,
    route: &str,
) -> Result<(StatusCode, String), reqwest::Error> {
    let clock = TokioClock;
    let call_timeout = Some(Duration::from_secs(20));
    let budget = TimeBudget::from_ambient(clock.now(), None);
    let mut request = state.http.get(format!("http://{}/{route}", state.c));
    if let Some(left) = budget.call_timeout(clock.now(), call_timeout) {
        request = request
            .header(state.header.name(), state.header.encode(left).as_str())
            .timeout(left);
    }
    let response = request.send().await?;
    let status = StatusCode::from_u16(response.status().as_u16())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Ok((status, response.text().await?))
}

struct Services {
    b: SocketAddr,
    c: SocketAddr,
    events: mpsc::UnboundedReceiver<Event>,
    header: DeadlineHeader,
}

async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free port on 127.0.0.1");
    let addr = listener.local_addr().expect("a bound address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

async fn start() -> Services {
    let header = DeadlineHeader::default();
    let (tx, events) = mpsc::unbounded_channel();
    let c = serve(
        Router::new()
            .route("/slow", get(c_handler))
            .route("/quick", get(c_quick))
            .with_state(CState {
                events: tx,
                header: header.clone(),
            }),
    )
    .await;
    let b = serve(
        Router::new()
            .route("/{route}", get(b_handler))
            .with_state(Arc::new(BState {
                c,
                http: reqwest::Client::new(),
                header: header.clone(),
            })),
    )
    .await;
    Services {
        b,
        c,
        events,
        header,
    }
}

async fn next_event(events: &mut mpsc::UnboundedReceiver<Event>) -> Event {
    tokio::time::timeout(GENEROUS, events.recv())
        .await
        .expect("an event within the generous bound")
        .expect("the services are still running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downstream_sees_the_shrunken_budget() {
    let mut s = start().await;
    let sent = Duration::from_secs(5);
    let response = reqwest::Client::new()
        .get(format!("http://{}/quick", s.b))
        .header(s.header.name(), s.header.encode(sent).as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let seen_nanos: u64 = response.text().await.unwrap().parse().unwrap();
    let seen = Duration::from_nanos(seen_nanos);
    // B spent at least 200 ms before calling C, so C saw at most 4.8 s:
    // less than the client sent, never more.
    assert!(seen <= sent - Duration::from_millis(200), "C saw {seen:?}");
    assert!(seen > Duration::ZERO, "C saw {seen:?}");
    match next_event(&mut s.events).await {
        Event::Received(left) => assert_eq!(left, seen),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_giving_up_stops_the_downstream_work() {
    let mut s = start().await;
    // The client allows a minute by header but gives up after 1 s: it drops
    // the request. B's handler is dropped, so is its call to C, so is C's
    // handler with its guard: C's background work must see the cancellation.
    let result = reqwest::Client::new()
        .get(format!("http://{}/slow", s.b))
        .header(
            s.header.name(),
            s.header.encode(Duration::from_secs(60)).as_str(),
        )
        .timeout(Duration::from_secs(1))
        .send()
        .await;
    assert!(result.is_err(), "the client gave up: {result:?}");
    match next_event(&mut s.events).await {
        Event::Received(left) => {
            // B's own call timeout (20 s) is the smallest of the three.
            assert!(left <= Duration::from_secs(20), "C saw {left:?}");
        }
        other => panic!("unexpected {other:?}"),
    }
    match next_event(&mut s.events).await {
        // Stopped by the drop, long before C's deadline (~60 s) could pass.
        Event::Stopped(cause) => assert_eq!(cause, CancelCause::Cancelled),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downstream_deadline_fires_and_reports_deadline_exceeded() {
    let mut s = start().await;
    // Straight to C with 300 ms: C's work runs out of time, its handler
    // answers 504, and the background work stops with DeadlineExceeded.
    let response = reqwest::Client::new()
        .get(format!("http://{}/slow", s.c))
        .header(
            s.header.name(),
            s.header.encode(Duration::from_millis(300)).as_str(),
        )
        .timeout(GENEROUS)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 504);
    assert_eq!(response.text().await.unwrap(), "deadline exceeded");
    assert!(matches!(
        next_event(&mut s.events).await,
        Event::Received(_)
    ));
    match next_event(&mut s.events).await {
        Event::Stopped(cause) => assert_eq!(cause, CancelCause::DeadlineExceeded),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_budget_is_not_passed_on_as_a_longer_one() {
    let mut s = start().await;
    // The client sends 100 ms; B spends 200 ms before its call, so B's own
    // deadline passes first and B answers 504 without C ever seeing more.
    let response = reqwest::Client::new()
        .get(format!("http://{}/quick", s.b))
        .header(
            s.header.name(),
            s.header.encode(Duration::from_millis(100)).as_str(),
        )
        .timeout(GENEROUS)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 504);
    // C received nothing.
    assert!(s.events.try_recv().is_err());
}
