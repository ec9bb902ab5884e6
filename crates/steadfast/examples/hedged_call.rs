//! A hedged call to two replicas of a service, over TCP on 127.0.0.1 (one
//! line per request: `GET user 7`, answered `user 7 from replica b`).
//!
//! Replica `a` stalls on its first request (a GC pause, a lost packet);
//! replica `b` answers in 5 ms. The client hedges: copy 1 goes to `a`, and
//! when no answer has come 50 ms later, copy 2 goes to `b`. The first answer
//! wins and the other copy is dropped at once: its connection closes, and
//! replica `a` sees the client hang up. A second call, with `a` healthy
//! again, is answered by copy 1 before a hedge is due, so no copy is sent.
//!
//! Only hedge what is safe to run twice: both replicas may do the work.
//!
//! ```sh
//! cargo run -p steadfast --example hedged_call
//! ```
//!
//! `cargo test -p steadfast --example hedged_call` runs the same code as a
//! test.
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use steadfast::call::HedgeStats;
use steadfast::{Attempt, HedgePolicy, Hedgeable};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// How long a copy waits for an answer before the next copy goes out.
const HEDGE_DELAY: Duration = Duration::from_millis(50);

#[tokio::main]
async fn main() -> Result<(), Error> {
    let log = Log::printing();
    let replicas = [
        replica("a", true, log.clone()).await?,
        replica("b", false, log.clone()).await?,
    ];
    for user in [7, 8] {
        log.say(String::new());
        get_user(&log, &replicas, user).await?;
    }
    Ok(())
}

/// One hedged call: copy `n` goes to replica `n - 1` (of two).
async fn get_user(
    log: &Log,
    replicas: &[(&'static str, SocketAddr); 2],
    user: u32,
) -> Result<(String, HedgeStats), Error> {
    let policy = HedgePolicy::builder(HEDGE_DELAY).max_attempts(2).build()?;
    let start = Instant::now();
    let mut stats = HedgeStats::default();
    let reply = (|copy: Attempt| {
        let (name, addr) = replicas[(copy.number - 1) as usize % replicas.len()];
        log.say(format!(
            "client: copy {} of GET user {user} to replica {name} (copies in flight: {:?})",
            copy.number, copy.in_flight
        ));
        async move {
            let mut conn = TcpStream::connect(addr).await?;
            conn.write_all(format!("GET user {user}\n").as_bytes())
                .await?;
            let mut reply = String::new();
            BufReader::new(conn).read_line(&mut reply).await?;
            Ok::<_, std::io::Error>(reply.trim_end().to_owned())
        }
    })
    .hedge(&policy)
    .name("get_user")
    .on_finish(|s: &HedgeStats| stats = *s)
    .await?;
    log.say(format!(
        "client: {reply:?} after {}: copy {} won; {} sent, {} cancelled",
        show(start.elapsed()),
        stats.winner.unwrap_or_default(),
        stats.sent,
        stats.cancelled
    ));
    Ok((reply, stats))
}

/// A replica on a port the OS picks. It answers each line `GET x` with
/// `x from replica <name>` after 5 ms; with `stall_first`, its first request gets
/// no answer at all, and it waits for the client to hang up.
async fn replica(
    name: &'static str,
    stall_first: bool,
    log: Log,
) -> std::io::Result<(&'static str, SocketAddr)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let mut stall = stall_first;
        while let Ok((conn, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(serve(name, conn, std::mem::take(&mut stall), log));
        }
    });
    Ok((name, addr))
}

async fn serve(name: &'static str, conn: TcpStream, stall: bool, log: Log) -> std::io::Result<()> {
    let (read, mut write) = conn.into_split();
    let mut lines = BufReader::new(read).lines();
    let Some(request) = lines.next_line().await? else {
        return Ok(());
    };
    if stall {
        log.say(format!("replica {name}: {request:?} in; stalled"));
        // Nothing more comes from the client; the read ends when it hangs up.
        while lines.next_line().await?.is_some() {}
        log.say(format!(
            "replica {name}: the client hung up (its copy was dropped)"
        ));
        return Ok(());
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
    log.say(format!("replica {name}: {request:?} in; answering"));
    write
        .write_all(
            format!(
                "{} from replica {name}\n",
                request.trim_start_matches("GET ")
            )
            .as_bytes(),
        )
        .await
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
        if self.print && line.is_empty() {
            println!();
        } else if self.print {
            println!("{:>9}  {line}", show(self.start.elapsed()));
        }
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line);
    }

    #[cfg(test)]
    fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
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

    #[tokio::test]
    async fn the_copy_to_the_healthy_replica_wins_and_the_other_is_dropped() -> Result<(), Error> {
        let log = Log {
            print: false,
            ..Log::printing()
        };
        let replicas = [
            replica("a", true, log.clone()).await?,
            replica("b", false, log.clone()).await?,
        ];
        // Replica a never answers the first request: only the hedge can.
        let (reply, stats) = get_user(&log, &replicas, 7).await?;
        assert_eq!(reply, "user 7 from replica b");
        assert_eq!((stats.sent, stats.winner, stats.cancelled), (2, Some(2), 1));
        // The dropped copy closed its connection; the replica sees it (the
        // bound only stops a broken run from hanging).
        tokio::time::timeout(Duration::from_secs(10), async {
            while !log.lines().iter().any(|l| l.contains("hung up")) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await?;

        // Replica a is healthy again: some replica answers.
        let (reply, _) = get_user(&log, &replicas, 8).await?;
        assert!(reply.starts_with("user 8 from replica "), "{reply}");
        Ok(())
    }
}
