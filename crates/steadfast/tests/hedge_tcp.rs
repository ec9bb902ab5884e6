//! Hedged calls over real sockets: a loopback TCP server whose first reply
//! to every tenth request id is very slow. The hedge answers; the slow copy's
//! connection is closed by the client (the server sees EOF); nothing leaks.
//!
//! No timing is asserted: the slow replies take a minute unless the client
//! hangs up, so the test can only finish in time if the losers are closed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use steadfast::call::HedgeStats;
use steadfast::{Attempt, HedgePolicy, Hedgeable};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const CALLS: u64 = 1000;
const SLOW_EVERY: u64 = 10;

#[derive(Default)]
struct ServerStats {
    open: AtomicUsize,
    accepted: AtomicUsize,
    slow_started: AtomicUsize,
    slow_closed_by_client: AtomicUsize,
    seen: Mutex<HashMap<u64, u32>>,
}

struct Open(Arc<ServerStats>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve(listener: TcpListener, stats: Arc<ServerStats>) {
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        stats.open.fetch_add(1, Ordering::SeqCst);
        stats.accepted.fetch_add(1, Ordering::SeqCst);
        let guard = Open(Arc::clone(&stats));
        tokio::spawn(handle(socket, guard));
    }
}

async fn handle(socket: TcpStream, guard: Open) {
    let stats = &guard.0;
    let mut reader = BufReader::new(socket);
    let mut line = String::new();
    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
        return;
    }
    let Ok(id) = line.trim().parse::<u64>() else {
        return;
    };
    let sighting = {
        let mut seen = stats
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = seen.entry(id).or_insert(0);
        *n += 1;
        *n
    };
    if id % SLOW_EVERY == 0 && sighting == 1 {
        stats.slow_started.fetch_add(1, Ordering::SeqCst);
        let mut buf = [0u8; 16];
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(60)) => {}
            r = reader.read(&mut buf) => {
                // EOF or reset: the client cancelled this copy.
                if matches!(r, Ok(0) | Err(_)) {
                    stats.slow_closed_by_client.fetch_add(1, Ordering::SeqCst);
                }
                return;
            }
        }
    }
    let reply = format!("ok {id} {sighting}\n");
    let _ = reader.get_mut().write_all(reply.as_bytes()).await;
}

async fn request(addr: std::net::SocketAddr, id: u64) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(format!("{id}\n").as_bytes()).await?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    if line.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "no reply",
        ));
    }
    Ok(line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedged_calls_cut_the_slow_copies_and_leak_nothing() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stats = Arc::new(ServerStats::default());
    let server = tokio::spawn(serve(listener, Arc::clone(&stats)));

    let policy = Arc::new(
        HedgePolicy::builder(Duration::from_millis(20))
            .max_attempts(3)
            .build()
            .unwrap(),
    );
    let hedges_sent = Arc::new(AtomicU32::new(0));
    let cancelled = Arc::new(AtomicU32::new(0));

    let results: Vec<(u64, Result<String, _>, Option<u32>)> = futures::stream::iter(0..CALLS)
        .map(|id| {
            let policy = Arc::clone(&policy);
            let hedges_sent = Arc::clone(&hedges_sent);
            let cancelled = Arc::clone(&cancelled);
            async move {
                let mut winner = None;
                let r = (|_: Attempt| request(addr, id))
                    .hedge(&*policy)
                    .name("tcp echo")
                    .on_finish(|s: &HedgeStats| {
                        winner = s.winner;
                        hedges_sent.fetch_add(s.hedges(), Ordering::SeqCst);
                        cancelled.fetch_add(s.cancelled, Ordering::SeqCst);
                    })
                    .await;
                (id, r, winner)
            }
        })
        .buffer_unordered(20)
        .collect()
        .await;

    assert_eq!(results.len() as u64, CALLS);
    let slow_ids = CALLS / SLOW_EVERY;
    for (id, r, winner) in &results {
        let reply = r
            .as_ref()
            .unwrap_or_else(|e| panic!("call {id} failed: {e}"));
        assert!(reply.starts_with(&format!("ok {id} ")), "{reply:?}");
        if id % SLOW_EVERY == 0 {
            // The first copy of a slow id answers only after a minute.
            assert_ne!(*winner, Some(1), "call {id}: the slow copy cannot win");
        }
    }
    assert_eq!(stats.slow_started.load(Ordering::SeqCst) as u64, slow_ids);
    assert!(hedges_sent.load(Ordering::SeqCst) as u64 >= slow_ids);
    assert!(cancelled.load(Ordering::SeqCst) as u64 >= slow_ids);

    // Every client future is gone: the server must see every connection
    // closed. Generous bound; the slow handlers would otherwise hold theirs
    // for a minute.
    drop(results);
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let mut waited = 0;
    while (stats.open.load(Ordering::SeqCst) > 0 || alive() > 1) && waited < 300 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert_eq!(
        stats.open.load(Ordering::SeqCst),
        0,
        "connections left open"
    );
    assert_eq!(
        stats.slow_closed_by_client.load(Ordering::SeqCst) as u64,
        slow_ids,
        "every slow copy was seen closed by the client"
    );
    // No task outlives its call: only the accept loop (and this test) remain.
    assert_eq!(alive(), 1, "tasks alive besides the accept loop");
    server.abort();
}
