//! The retry executors against real parts: a TCP listener on 127.0.0.1 that
//! appears after a few refused connects, and a real child process that fails
//! a number of times before it succeeds.

use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use steadfast::backoff::Backoff;
use steadfast::retry::{BlockingRetryable, Notice, Retryable};
use steadfast::{Attempt, RetryPolicy, StopReason};

fn quick_policy(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(
            Backoff::constant(Duration::from_millis(5))
                .build()
                .expect("valid"),
        )
        .build()
        .expect("valid")
}

/// A port on 127.0.0.1 that nobody listens on and nobody else can take:
/// a socket bound to it but not listening (a connect to it is refused),
/// which `listen` later turns into the listener that appears. Binding and
/// dropping a listener instead would leave the port free for another test
/// to take in between.
struct Reserved {
    socket: socket2::Socket,
    addr: SocketAddr,
}

impl Reserved {
    fn new() -> Self {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
        socket.bind(&any.into()).expect("bind");
        let addr = socket
            .local_addr()
            .expect("addr")
            .as_socket()
            .expect("an IP address");
        Self { socket, addr }
    }

    /// The server comes up: the reserved port starts listening.
    fn listen(self) -> TcpListener {
        self.socket.listen(16).expect("listen");
        self.socket.into()
    }
}

#[tokio::test]
async fn async_connect_succeeds_once_the_listener_appears() {
    let reserved = Reserved::new();
    let addr = reserved.addr;
    let mut port = Some(reserved);
    let listener: Arc<Mutex<Option<TcpListener>>> = Arc::default();
    let l = listener.clone();
    let stream = (|_: Attempt| tokio::net::TcpStream::connect(addr))
        .retry(quick_policy(10))
        .notify(move |n: &Notice<std::io::Error>| {
            let attempt = n.attempt;
            assert_eq!(
                n.error.map(std::io::Error::kind),
                Some(std::io::ErrorKind::ConnectionRefused)
            );
            // The server comes up after the third refused connect.
            if attempt == 3 {
                *l.lock().unwrap() = port.take().map(Reserved::listen);
            }
        })
        .name("connect")
        .await
        .expect("connected on the fourth attempt");
    assert_eq!(stream.peer_addr().unwrap(), addr);
    let accepted = listener.lock().unwrap().take().unwrap().accept().unwrap();
    assert_eq!(accepted.1, stream.local_addr().unwrap());
}

#[tokio::test]
async fn async_connect_gives_up_with_the_last_io_error() {
    let reserved = Reserved::new();
    let addr = reserved.addr;
    let err = (|_: Attempt| tokio::net::TcpStream::connect(addr))
        .retry(quick_policy(3))
        .name("connect")
        .await
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.attempts(), 3);
    assert_eq!(
        err.last_error().map(std::io::Error::kind),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
    assert!(
        err.to_string()
            .starts_with("connect failed after 3 attempts in ")
    );
}

#[test]
fn blocking_connect_succeeds_once_the_listener_appears() {
    let reserved = Reserved::new();
    let addr = reserved.addr;
    let mut port = Some(reserved);
    let mut listener = None;
    let stream = (|a: Attempt| {
        if a.number == 3 {
            listener = port.take().map(Reserved::listen);
        }
        std::net::TcpStream::connect(addr)
    })
    .retry_blocking(quick_policy(5))
    .call()
    .expect("connected on the third attempt");
    assert_eq!(stream.peer_addr().unwrap(), addr);
    assert!(listener.is_some());
}

/// A real child process that fails until it has run `n` times, counting in
/// a state file.
fn flaky_command(state: &std::path::Path, n: u32) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"c=$(cat "$1" 2>/dev/null || echo 0); c=$((c+1)); echo "$c" > "$1"; [ "$c" -ge "$2" ]"#)
        .arg("flaky")
        .arg(state)
        .arg(n.to_string());
    cmd
}

#[derive(Debug)]
struct ExitFailure(Option<i32>);

impl std::fmt::Display for ExitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {:?}", self.0)
    }
}

fn run(cmd: &mut Command) -> Result<(), ExitFailure> {
    let status = cmd.status().map_err(|_| ExitFailure(None))?;
    if status.success() {
        Ok(())
    } else {
        Err(ExitFailure(status.code()))
    }
}

#[test]
fn blocking_child_process_that_fails_twice_then_succeeds() {
    let dir = std::env::temp_dir().join(format!("steadfast-retry-real-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("count-ok");
    let _ = std::fs::remove_file(&state);
    let mut attempts = Vec::new();
    let result = (|a: Attempt| {
        attempts.push(a.number);
        run(&mut flaky_command(&state, 3))
    })
    .retry_blocking(quick_policy(5))
    .call();
    assert!(result.is_ok());
    assert_eq!(attempts, [1, 2, 3]);
    assert_eq!(std::fs::read_to_string(&state).unwrap().trim(), "3");
}

#[test]
fn blocking_child_process_that_never_succeeds_in_time() {
    let dir = std::env::temp_dir().join(format!("steadfast-retry-real-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("count-fail");
    let _ = std::fs::remove_file(&state);
    let err = (|_: Attempt| run(&mut flaky_command(&state, 10)))
        .retry_blocking(quick_policy(4))
        .name("flaky")
        .call()
        .unwrap_err();
    assert_eq!(err.reason(), StopReason::Exhausted);
    assert_eq!(err.attempts(), 4);
    assert_eq!(std::fs::read_to_string(&state).unwrap().trim(), "4");
    assert!(
        err.to_string()
            .ends_with("(attempts exhausted): exit status Some(1)"),
        "{err}"
    );
}
