//! Retry a TCP connect until a listener appears on the port.
//!
//! A server is starting up: its port is taken (bound) but it does not listen
//! yet, so every connect is refused, until it starts listening 300 ms later.
//! The client retries `connect` with exponential backoff (from 20 ms, full
//! jitter) within an overall limit of 5 s, then reads the server's greeting.
//! Each attempt is printed with its wait and the time it has left.
//!
//! ```sh
//! cargo run -p steadfast --example tcp_connect
//! ```
//!
//! Everything runs on 127.0.0.1 with a port the OS picks. `cargo test -p
//! steadfast --example tcp_connect` runs the same code as a test.
#![allow(clippy::print_stdout)]

use std::cell::Cell;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use steadfast::clock::{Clock, TokioClock};
use steadfast::{Attempt, Backoff, RetryPolicy, Retryable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

type Error = Box<dyn std::error::Error>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let log = Log::printing();
    run(&log, Duration::from_millis(300)).await?;
    Ok(())
}

/// Starts a server that listens `listen_after` from now, and connects to it.
/// Returns the greeting the server sent.
async fn run(log: &Log, listen_after: Duration) -> Result<String, Error> {
    let addr = start_server_later(log, listen_after)?;

    let policy = RetryPolicy::builder()
        .max_attempts(20)
        .backoff(
            Backoff::exponential()
                .initial(Duration::from_millis(20))
                .max_delay(Duration::from_secs(1))
                .build()?,
        )
        .max_elapsed(Duration::from_secs(5))
        .build()?;

    // When the last attempt failed, to print the wait before the next one.
    let failed_at: Cell<Option<Instant>> = Cell::new(None);
    let connect = |attempt: Attempt| {
        let now = TokioClock.now();
        let waited = failed_at
            .get()
            .map(|t| format!(" after a wait of {}", show(now - t)));
        let left = attempt.time_left(now).map(show).unwrap_or_default();
        log.say(format!(
            "client: attempt {} to connect to {addr}{} ({left} left)",
            attempt.number,
            waited.unwrap_or_default()
        ));
        let failed_at = &failed_at;
        async move {
            let result = TcpStream::connect(addr).await;
            if let Err(e) = &result {
                log.say(format!("client: attempt {} failed: {e}", attempt.number));
                failed_at.set(Some(TokioClock.now()));
            }
            result
        }
    };
    let mut stream = connect
        .retry(&policy)
        // A refused or reset connection is worth another try; anything else
        // (no route, permission denied) is not.
        .when(|e: &std::io::Error| {
            matches!(
                e.kind(),
                ErrorKind::ConnectionRefused | ErrorKind::ConnectionReset
            )
        })
        .name("connect")
        .await?;

    let mut greeting = String::new();
    stream.read_to_string(&mut greeting).await?;
    log.say(format!("client: connected; the server says {greeting:?}"));
    Ok(greeting)
}

/// Binds a port now and starts listening on it `after` from now, as a server
/// that is still starting up: until then the kernel refuses connections.
fn start_server_later(log: &Log, after: Duration) -> Result<SocketAddr, Error> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let addr = socket.local_addr()?;
    log.say(format!(
        "server: port {} taken, listening in {}",
        addr.port(),
        show(after)
    ));
    let log = log.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let listener = socket.listen(16)?;
        log.say("server: listening".to_owned());
        let (mut conn, peer) = listener.accept().await?;
        conn.write_all(format!("hello, {peer}").as_bytes()).await?;
        conn.shutdown().await
    });
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

    #[cfg(test)]
    fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// `15.2ms` below a second, `4.985s` from there.
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

    #[tokio::test(flavor = "current_thread")]
    async fn connects_once_the_listener_appears() {
        let log = Log {
            print: false,
            ..Log::printing()
        };
        let greeting = run(&log, Duration::from_millis(100))
            .await
            .expect("connected within 5 s");
        assert!(greeting.starts_with("hello, 127.0.0.1:"), "{greeting}");
        let lines = log.lines();
        // The first attempt starts before the server task first runs (one
        // thread), so it is refused; the last one connects.
        let failures: Vec<_> = lines.iter().filter(|l| l.contains("failed")).collect();
        assert!(!failures.is_empty(), "{lines:#?}");
        assert!(failures.iter().all(|l| l.contains("refused")), "{lines:#?}");
        let attempts = lines.iter().filter(|l| l.contains("attempt ")).count();
        assert_eq!(attempts, 2 * failures.len() + 1, "{lines:#?}");
        assert!(lines[lines.len() - 1].contains("connected"), "{lines:#?}");
        let second = lines.iter().find(|l| l.contains("attempt 2 to connect"));
        assert!(
            second.is_some_and(|l| l.contains("after a wait of")),
            "{lines:#?}"
        );
        assert!(lines.iter().any(|l| l == "server: listening"), "{lines:#?}");
    }
}
