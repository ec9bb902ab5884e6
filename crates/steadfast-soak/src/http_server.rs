//! A hostile HTTP/1.1 server on 127.0.0.1, written on raw TCP so that it can
//! do what a well-behaved server library never would: reset a connection in
//! the middle of a response head, close before the head, trickle a body,
//! send a `Retry-After` of a year. Each request names its call in
//! `x-soak-call`; the server asks its [`Ledger`] what to do with it.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Handle;

use crate::ledger::Ledger;
use crate::listener::Listening;
use crate::plan::{HttpFault, RETRY_AFTERS};

/// The header that names a request's call.
pub const CALL_HEADER: &str = "x-soak-call";

/// How the server picks the fault of attempt `n` of a call.
pub type Decide = Arc<dyn Fn(u64, u32) -> HttpFault + Send + Sync>;

/// Longest request head the server reads; a longer one closes the connection.
const MAX_HEAD: usize = 16 * 1024;
/// Longest a stalled response waits for its client to go away.
const MAX_STALL: Duration = Duration::from_secs(30);
/// A trickling body: this many bytes, one per `TRICKLE_EVERY`.
const TRICKLE_BYTES: usize = 64;
const TRICKLE_EVERY: Duration = Duration::from_millis(25);

/// What the server shares between its connections.
struct State {
    ledger: Arc<Ledger<HttpFault>>,
    decide: Decide,
}

/// A running server.
#[derive(Debug)]
pub struct HttpServer {
    pub ledger: Arc<Ledger<HttpFault>>,
    pub listening: Listening,
}

impl HttpServer {
    /// Binds 127.0.0.1 on a port the OS picks and serves on `runtime`.
    ///
    /// # Errors
    /// When the socket cannot be bound.
    pub fn start(runtime: &Handle, decide: Decide) -> std::io::Result<Self> {
        let ledger = Arc::new(Ledger::default());
        let state = Arc::new(State {
            ledger: Arc::clone(&ledger),
            decide,
        });
        let listening = Listening::start(runtime, move |stream| {
            let state = Arc::clone(&state);
            async move { serve(stream, &state).await }
        })?;
        Ok(Self { ledger, listening })
    }

    /// The URL of the server's one resource.
    pub fn url(&self) -> String {
        format!("http://{}/soak", self.listening.addr)
    }
}

/// A request head, as far as the server needs it.
struct Head {
    post: bool,
    call: Option<u64>,
    body: usize,
}

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let method = lines.next()?.split(' ').next()?;
    let mut parsed = Head {
        post: method == "POST",
        call: None,
        body: 0,
    };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            parsed.body = value.parse().ok()?;
        } else if name.eq_ignore_ascii_case(CALL_HEADER) {
            parsed.call = value.parse().ok();
        }
    }
    Some(parsed)
}

/// Serves the requests of one connection until a fault ends it or the
/// client closes it.
async fn serve(mut stream: TcpStream, state: &State) {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0_u8; 4096];
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > MAX_HEAD {
                return;
            }
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let Some(head) = parse_head(&buf[..end]) else {
            return;
        };
        while buf.len() < end + head.body {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..end + head.body);
        let Some(call) = head.call else {
            let _ = stream
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
            return;
        };
        let fault = state
            .ledger
            .receive(call, head.post, None, |n| (state.decide)(call, n));
        if !answer(&mut stream, fault).await {
            return;
        }
    }
}

/// Does what `fault` says; whether the connection can serve another request.
async fn answer(stream: &mut TcpStream, fault: HttpFault) -> bool {
    match fault {
        HttpFault::None => stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await
            .is_ok(),
        HttpFault::Status { code, hint } => {
            let reason = match code {
                429 => "Too Many Requests",
                500 => "Internal Server Error",
                503 => "Service Unavailable",
                _ => "Bad Request",
            };
            let hint = hint
                .map(|i| format!("retry-after: {}\r\n", RETRY_AFTERS[i]))
                .unwrap_or_default();
            let response =
                format!("HTTP/1.1 {code} {reason}\r\ncontent-length: 4\r\n{hint}\r\nfail");
            stream.write_all(response.as_bytes()).await.is_ok()
        }
        HttpFault::Stall => {
            // Waits for the client to give up (it closes the connection).
            let mut sink = [0_u8; 512];
            let _ = tokio::time::timeout(MAX_STALL, async {
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
            })
            .await;
            false
        }
        HttpFault::Trickle => {
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {TRICKLE_BYTES}\r\n\r\n");
            if stream.write_all(head.as_bytes()).await.is_err() {
                return false;
            }
            for _ in 0..TRICKLE_BYTES {
                tokio::time::sleep(TRICKLE_EVERY).await;
                if stream.write_all(b".").await.is_err() {
                    return false;
                }
            }
            true
        }
        HttpFault::ResetInHead => {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Le").await;
            reset(stream).await;
            false
        }
        HttpFault::ResetInBody => {
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {TRICKLE_BYTES}\r\n\r\npart");
            let _ = stream.write_all(head.as_bytes()).await;
            // Gives the client time to read the head before the reset, which
            // may discard what it has not read yet.
            tokio::time::sleep(Duration::from_millis(20)).await;
            reset(stream).await;
            false
        }
        HttpFault::CloseBeforeHead => {
            let _ = stream.shutdown().await;
            false
        }
    }
}

/// Ends the connection with a reset (RST): a zero linger makes the close
/// abortive.
async fn reset(stream: &mut TcpStream) {
    let _ = stream.flush().await;
    let _ = stream.set_zero_linger();
}
