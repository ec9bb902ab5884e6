//! Concurrency limits over real sockets: a real axum server on 127.0.0.1
//! (an OS-picked port) behind the server's `ShedLayer`, driven by real
//! reqwest clients through steadfast's `Client` with a limit of its own.
//!
//! The server has a pool of workers (a semaphore of W permits, resizable
//! through a shared knob); each request waits at most one unit of work for
//! a worker (a server whose queue wait ran out answers 503) and then works
//! for a short real sleep. Its shed layer's limit is adaptive (AIMD): the
//! handler's 503s are drops that shrink it, and once it is full the layer
//! sheds with 503 + `Retry-After` itself. The client's AIMD limit shrinks on
//! every 503 (the default classifier calls it overload) and grows while it
//! is busy and nothing is dropped.
//!
//! Real time (integration tests), but no timing threshold is asserted: the
//! limits are polled once per sample window (100 ms, the windows' shortest)
//! and must reach their mark within a bounded number of such ticks; the
//! bounds are liveness bounds, far above what a run takes.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use steadfast::StopReason;
use steadfast::limit::{Aimd, ConcurrencyLimit};
use steadfast_http::Client;
use steadfast_http::server::ShedLayer;
use tokio::sync::Semaphore;

/// One unit of a worker's work.
const WORK: Duration = Duration::from_millis(10);
/// The shortest sample window of every adaptive limit here, and the tick
/// the tests poll them on.
const WINDOW: Duration = Duration::from_millis(100);

/// The server's worker pool and the knob that resizes it.
struct Workers {
    pool: Semaphore,
    size: AtomicUsize,
    /// Requests answered 503 by the handler (no worker in time).
    busy: AtomicU64,
    /// Requests served.
    served: AtomicU64,
}

impl Workers {
    fn new(size: usize) -> Arc<Self> {
        Arc::new(Self {
            pool: Semaphore::new(size),
            size: AtomicUsize::new(size),
            busy: AtomicU64::new(0),
            served: AtomicU64::new(0),
        })
    }

    /// Resizes the pool: more workers at once; fewer as soon as the ones to
    /// retire are free (taken from the pool and forgotten).
    fn resize(self: &Arc<Self>, size: usize) {
        let old = self.size.swap(size, Ordering::SeqCst);
        if size > old {
            self.pool.add_permits(size - old);
        } else if size < old {
            let this = Arc::clone(self);
            tokio::spawn(async move {
                let n = u32::try_from(old - size).expect("small");
                if let Ok(retired) = this.pool.acquire_many(n).await {
                    retired.forget();
                }
            });
        }
    }
}

/// The handler: a worker within one unit of work, or 503; then the work.
async fn work(State(workers): State<Arc<Workers>>) -> (StatusCode, &'static str) {
    let Ok(Ok(worker)) = tokio::time::timeout(WORK, workers.pool.acquire()).await else {
        workers.busy.fetch_add(1, Ordering::Relaxed);
        return (StatusCode::SERVICE_UNAVAILABLE, "no worker in time");
    };
    // Between half and one and a half units: not every call alike.
    let jitter = Duration::from_micros(fastrand::u64(0..10_000));
    tokio::time::sleep(WORK / 2 + jitter).await;
    drop(worker);
    workers.served.fetch_add(1, Ordering::Relaxed);
    (StatusCode::OK, "done")
}

/// Serves `router` on 127.0.0.1 (a port the OS picks).
async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

fn aimd(initial: u32, max: u32) -> Aimd {
    Aimd::builder()
        .initial_limit(initial)
        .min_limit(1)
        .max_limit(max)
        .build()
        .expect("valid aimd")
}

/// An adaptive limit with a short window, so the test is quick.
fn adaptive(
    name: &'static str,
    initial: u32,
    max: u32,
) -> steadfast::limit::ConcurrencyLimitBuilder {
    ConcurrencyLimit::adaptive(aimd(initial, max))
        .name(name)
        .window(WINDOW, 10)
}

/// A steadfast client under `limit`: two attempts, the server's
/// `Retry-After` clamped to a few milliseconds (the test is about slots, not
/// about waiting a second).
fn client(limit: &ConcurrencyLimit) -> Client {
    Client::builder()
        .attempts(2)
        .max_delay(Duration::from_millis(5))
        .concurrency_limit(limit.clone())
        .build()
        .expect("valid client")
}

/// What the drivers saw.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    unavailable: AtomicU64,
    limited: AtomicU64,
    cancelled: AtomicU64,
    other: AtomicU64,
}

impl Tally {
    fn count(&self, result: Result<Result<steadfast_http::Response, steadfast_http::Error>, ()>) {
        let counter = match result {
            Err(()) => &self.cancelled,
            Ok(Ok(r)) if r.status() == StatusCode::OK => &self.ok,
            Ok(Ok(r)) if r.status() == StatusCode::SERVICE_UNAVAILABLE => &self.unavailable,
            Ok(Ok(_)) => &self.other,
            Ok(Err(e)) if e.reason() == StopReason::LimitReached => {
                assert!(
                    e.limit_refused().is_some(),
                    "a refusal names its limit: {e}"
                );
                &self.limited
            }
            Ok(Err(e)) if e.status() == Some(StatusCode::SERVICE_UNAVAILABLE) => &self.unavailable,
            Ok(Err(_)) => &self.other,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Polls `f` once per window until it holds: the ticks it took, or `None`
/// after `max` ticks.
async fn ticks_until(max: u32, mut f: impl FnMut() -> bool) -> Option<u32> {
    for tick in 0..=max {
        if f() {
            return Some(tick);
        }
        tokio::time::sleep(WINDOW).await;
    }
    None
}

/// Waits (a bounded number of ticks) for every slot of `limit` to be back.
async fn drained(limit: &ConcurrencyLimit) -> u32 {
    ticks_until(50, || limit.in_flight() == 0).await;
    limit.in_flight()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_limit_follows_the_server_capacity_down_and_back_up() {
    const HIGH: usize = 16;
    const LOW: usize = 4;
    let workers = Workers::new(HIGH);
    let server_limit = adaptive("server", 32, 256).build().expect("valid limit");
    let app = Router::new()
        .route("/work", get(work))
        .with_state(Arc::clone(&workers))
        .layer(ShedLayer::new(server_limit.clone()));
    let addr = serve(app).await;

    // The client: far more callers than the server has workers, waiting in
    // the client limit's queue for a slot.
    let client_limit = adaptive("client", 8, 256)
        .queue(256, Duration::from_secs(2))
        .build()
        .expect("valid limit");
    let client = client(&client_limit);
    let url = format!("http://{addr}/work");
    let tally = Arc::new(Tally::default());
    let mut drivers = Vec::new();
    for _ in 0..96 {
        let (client, url, tally) = (client.clone(), url.clone(), Arc::clone(&tally));
        drivers.push(tokio::spawn(async move {
            loop {
                tally.count(Ok(client.get(&url).send().await));
            }
        }));
    }
    let show = |what: &str| {
        format!(
            "{what}: client {:?}, server {:?}, workers {}, {} served, {} handler 503s, calls: {} ok, {} 503, {} limited",
            client_limit.snapshot(),
            server_limit.snapshot(),
            workers.size.load(Ordering::SeqCst),
            workers.served.load(Ordering::Relaxed),
            workers.busy.load(Ordering::Relaxed),
            tally.ok.load(Ordering::Relaxed),
            tally.unavailable.load(Ordering::Relaxed),
            tally.limited.load(Ordering::Relaxed),
        )
    };

    // Up: from 8 to half again the workers (the handler's 503s start near
    // twice as many callers as workers), one step per busy window.
    let up = ticks_until(60, || client_limit.limit() as usize >= HIGH + HIGH / 2).await;
    eprintln!("{}", show(&format!("up after {up:?} ticks")));
    assert!(up.is_some(), "{}", show("never grew"));

    // The server loses three quarters of its workers: 503s (the handler's,
    // then the shed layer's) shrink both limits.
    let server_high = server_limit.limit();
    workers.resize(LOW);
    let down = ticks_until(60, || client_limit.limit() as usize <= 3 * LOW).await;
    eprintln!("{}", show(&format!("down after {down:?} ticks")));
    assert!(down.is_some(), "{}", show("never followed down"));
    let low = client_limit.limit();
    // The server's limit learned too, from its handler's 503s.
    let server_low = server_limit.limit();
    assert!(
        server_low < server_high,
        "{}",
        show("the server did not learn")
    );

    // Back to full strength: both grow again.
    workers.resize(HIGH);
    let back = ticks_until(60, || client_limit.limit() as usize >= HIGH + HIGH / 2).await;
    eprintln!("{}", show(&format!("back up after {back:?} ticks")));
    assert!(back.is_some(), "{}", show("never came back up"));
    assert!(client_limit.limit() > low);

    // The callers stop wherever they are (a cancellation each).
    for driver in &drivers {
        driver.abort();
    }
    for driver in drivers {
        let end = driver.await.expect_err("aborted");
        assert!(end.is_cancelled(), "a driver panicked: {end}");
    }
    // Overload was seen and shed: the handler's 503s, and the layer's.
    assert!(
        workers.busy.load(Ordering::Relaxed) > 0,
        "{}",
        show("no overload")
    );
    assert!(
        tally.unavailable.load(Ordering::Relaxed) > 0,
        "{}",
        show("no 503")
    );
    assert!(
        tally.ok.load(Ordering::Relaxed) > 0,
        "{}",
        show("nothing served")
    );
    assert_eq!(
        drained(&client_limit).await,
        0,
        "{}",
        show("client slots left")
    );
    assert_eq!(
        drained(&server_limit).await,
        0,
        "{}",
        show("server slots left")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_calls_with_drops_and_cancellations_leave_no_slot_taken() {
    const CALLS: u64 = 10_000;
    let workers = Workers::new(64);
    // A small fixed server limit: the shed layer drops a good share.
    let server_limit = ConcurrencyLimit::fixed(8)
        .name("server")
        .build()
        .expect("valid limit");
    let app = Router::new()
        .route(
            "/work",
            get(|| async {
                tokio::time::sleep(Duration::from_micros(fastrand::u64(0..1_500))).await;
                "done"
            }),
        )
        .route("/pool", get(work))
        .with_state(Arc::clone(&workers))
        .layer(ShedLayer::new(server_limit.clone()));
    let addr = serve(app).await;

    // One client limit shared by a retrying client and a hedging one.
    let client_limit = adaptive("client", 16, 64)
        .queue(64, Duration::from_millis(20))
        .build()
        .expect("valid limit");
    let retrying = client(&client_limit);
    let hedging = Client::builder()
        .hedge(2, Duration::from_millis(1))
        .concurrency_limit(client_limit.clone())
        .build()
        .expect("valid client");
    let tally = Arc::new(Tally::default());
    let next = Arc::new(AtomicU64::new(0));
    let mut drivers = Vec::new();
    for _ in 0..32 {
        let (retrying, hedging, tally, next) = (
            retrying.clone(),
            hedging.clone(),
            Arc::clone(&tally),
            Arc::clone(&next),
        );
        drivers.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < CALLS {
                let client = if fastrand::u8(0..4) == 0 {
                    &hedging
                } else {
                    &retrying
                };
                let path = if fastrand::bool() { "work" } else { "pool" };
                let call = async {
                    let response = client.get(format!("http://{addr}/{path}")).send().await?;
                    assert!(response.ending().attempts >= 1);
                    // Read the body too (a cancellation can land here).
                    let _ = response.bytes().await;
                    Ok::<_, steadfast_http::Error>(())
                };
                let result = match fastrand::u8(0..10) {
                    // Three in ten are given a tiny random time: dropped at
                    // any point (queued, connecting, in flight, reading).
                    0..=2 => {
                        let within = Duration::from_micros(fastrand::u64(0..3_000));
                        match tokio::time::timeout(within, call).await {
                            Ok(result) => Ok(result),
                            Err(_) => Err(()),
                        }
                    }
                    _ => Ok(call.await),
                };
                match result {
                    Err(()) => tally.cancelled.fetch_add(1, Ordering::Relaxed),
                    Ok(Ok(())) => tally.ok.fetch_add(1, Ordering::Relaxed),
                    Ok(Err(e)) if e.reason() == StopReason::LimitReached => {
                        assert!(e.limit_refused().is_some_and(|r| r.by == "client"), "{e}");
                        tally.limited.fetch_add(1, Ordering::Relaxed)
                    }
                    Ok(Err(e)) if e.status() == Some(StatusCode::SERVICE_UNAVAILABLE) => {
                        tally.unavailable.fetch_add(1, Ordering::Relaxed)
                    }
                    Ok(Err(_)) => tally.other.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for driver in drivers {
        driver.await.expect("a driver panicked");
    }
    let show = || {
        format!(
            "client {:?}, server {:?}, calls: {} ok (any status), {} gave up on 503, {} limited, {} cancelled, {} other",
            client_limit.snapshot(),
            server_limit.snapshot(),
            tally.ok.load(Ordering::Relaxed),
            tally.unavailable.load(Ordering::Relaxed),
            tally.limited.load(Ordering::Relaxed),
            tally.cancelled.load(Ordering::Relaxed),
            tally.other.load(Ordering::Relaxed),
        )
    };
    let total = tally.ok.load(Ordering::Relaxed)
        + tally.unavailable.load(Ordering::Relaxed)
        + tally.limited.load(Ordering::Relaxed)
        + tally.cancelled.load(Ordering::Relaxed)
        + tally.other.load(Ordering::Relaxed);
    eprintln!("{}", show());
    assert_eq!(total, CALLS, "{}", show());
    // Drops and cancellations both happened.
    assert!(server_limit.snapshot().refused > 0, "{}", show());
    assert!(tally.cancelled.load(Ordering::Relaxed) > 0, "{}", show());
    // The client's slots are back as its calls end; the server's once
    // hyper has dropped what the cancelled calls left behind.
    assert_eq!(client_limit.in_flight(), 0, "{}", show());
    assert_eq!(drained(&server_limit).await, 0, "{}", show());
    assert_eq!(client_limit.snapshot().queued, 0, "{}", show());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_limit_holds_across_many_connections() {
    let limit = ConcurrencyLimit::fixed(4)
        .name("server")
        .build()
        .expect("valid limit");
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let entered = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route(
            "/",
            get({
                let (release, entered) = (Arc::clone(&release), Arc::clone(&entered));
                move || async move {
                    entered.fetch_add(1, Ordering::SeqCst);
                    let _go = release.acquire().await.expect("open");
                    Ok::<_, Infallible>("done")
                }
            }),
        )
        .layer(ShedLayer::new(limit.clone()));
    let addr = serve(app).await;

    // Twelve clients, each with a pool of its own: twelve connections, so
    // twelve per-connection service clones on the server.
    let mut calls = Vec::new();
    for _ in 0..12 {
        let reqwest = reqwest::Client::builder()
            .retry(reqwest::retry::never())
            .build()
            .expect("client");
        calls.push(tokio::spawn(async move {
            reqwest
                .get(format!("http://{addr}/"))
                .send()
                .await
                .map(|r| (r.status(), r.headers().get("retry-after").cloned()))
        }));
    }
    // Eight are shed at once; four are in the handler.
    let settled = ticks_until(50, || {
        entered.load(Ordering::SeqCst) == 4 && calls.iter().filter(|c| c.is_finished()).count() == 8
    })
    .await;
    assert!(settled.is_some(), "{:?}", limit.snapshot());
    let mut shed = 0;
    let mut rest = Vec::new();
    for call in calls {
        if call.is_finished() {
            let (status, retry_after) = call.await.expect("joined").expect("answered");
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(
                retry_after.as_ref().map(|v| v.to_str().expect("ascii")),
                Some("1")
            );
            shed += 1;
        } else {
            rest.push(call);
        }
    }
    assert_eq!((shed, rest.len(), limit.in_flight()), (8, 4, 4));
    assert_eq!(entered.load(Ordering::SeqCst), 4);
    release.add_permits(4);
    for call in rest {
        let (status, _) = call.await.expect("joined").expect("answered");
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(drained(&limit).await, 0);
    assert_eq!(limit.snapshot().refused, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_goes_away_gives_its_server_slot_back() {
    let limit = ConcurrencyLimit::fixed(2)
        .name("server")
        .build()
        .expect("valid limit");
    let entered = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route(
            "/",
            get({
                let entered = Arc::clone(&entered);
                move || async move {
                    entered.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<&'static str>().await
                }
            }),
        )
        .layer(ShedLayer::new(limit.clone()));
    let addr = serve(app).await;
    let client = Client::builder().attempts(1).build().expect("client");
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.get(format!("http://{addr}/")).send().await }
    });
    assert!(ticks_until(50, || limit.in_flight() == 1).await.is_some());
    // The caller gives up: its connection closes, hyper drops the handler.
    call.abort();
    assert_eq!(drained(&limit).await, 0, "{:?}", limit.snapshot());
    assert_eq!(entered.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_full_client_limit_refuses_before_sending_and_says_which() {
    let limit = ConcurrencyLimit::fixed(1)
        .name("inventory")
        .build()
        .expect("valid limit");
    let served = Arc::new(AtomicUsize::new(0));
    let app = Router::new().route(
        "/",
        get({
            let served = Arc::clone(&served);
            move || async move {
                served.fetch_add(1, Ordering::SeqCst);
                "done"
            }
        }),
    );
    let addr = serve(app).await;
    let client = client(&limit);
    let held = limit.try_acquire().expect("free");
    for method in ["GET", "POST"] {
        let method = method.parse().expect("method");
        let err = client
            .request(method, format!("http://{addr}/"))
            .send()
            .await
            .expect_err("refused");
        assert_eq!(
            (err.reason(), err.attempts()),
            (StopReason::LimitReached, 0)
        );
        let refused = err.limit_refused().expect("the limit refused");
        assert_eq!(
            (refused.by, refused.in_flight, refused.limit),
            ("inventory", 1, 1)
        );
        assert!(
            err.to_string().contains("concurrency limit inventory full"),
            "{err}"
        );
    }
    assert_eq!(served.load(Ordering::SeqCst), 0);
    drop(held);
    let response = client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!((served.load(Ordering::SeqCst), limit.in_flight()), (1, 0));
}
