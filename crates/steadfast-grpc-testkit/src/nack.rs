//! An HTTP/2 server on 127.0.0.1 that never processes a request: it
//! speaks just enough of the protocol (RFC 9113: the preface, SETTINGS
//! and their acknowledgement) to take a request's HEADERS, then answers it
//! the way a server that is full or shutting down does, written frame by
//! frame so the test controls exactly what the client receives.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the server turns a request away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nack {
    /// `RST_STREAM` with `REFUSED_STREAM` on the request's stream; the
    /// connection stays open.
    RefuseStream,
    /// `GOAWAY` with a last stream id of 0 (no stream processed) and
    /// `NO_ERROR`, then the connection is closed once the client closes it.
    GoAway,
}

/// A running server; stopped when dropped.
#[derive(Debug)]
pub struct NackServer {
    pub addr: SocketAddr,
    /// How many requests (HEADERS frames) it received.
    pub requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl NackServer {
    pub async fn start(nack: Nack) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("an address");
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, nack, Arc::clone(&counted)));
            }
        });
        Self {
            addr,
            requests,
            task,
        }
    }

    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    #[must_use]
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for NackServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const ACK: u8 = 0x1;
const REFUSED_STREAM: u32 = 0x7;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a small frame");
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// One connection: the preface, then each frame in turn until the client
/// goes away (any read error ends it).
async fn serve(mut stream: TcpStream, nack: Nack, requests: Arc<AtomicUsize>) {
    let mut preface = [0_u8; PREFACE.len()];
    if stream.read_exact(&mut preface).await.is_err() || preface != PREFACE {
        return;
    }
    if stream.write_all(&frame(SETTINGS, 0, 0, &[])).await.is_err() {
        return;
    }
    loop {
        let mut head = [0_u8; 9];
        if stream.read_exact(&mut head).await.is_err() {
            return;
        }
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let (kind, flags) = (head[3], head[4]);
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0_u8; len];
        if stream.read_exact(&mut payload).await.is_err() {
            return;
        }
        let reply = match kind {
            SETTINGS if flags & ACK == 0 => frame(SETTINGS, ACK, 0, &[]),
            PING if flags & ACK == 0 => frame(PING, ACK, 0, &payload),
            HEADERS => {
                requests.fetch_add(1, Ordering::SeqCst);
                match nack {
                    Nack::RefuseStream => frame(RST_STREAM, 0, id, &REFUSED_STREAM.to_be_bytes()),
                    // Last stream id 0, NO_ERROR: nothing was processed.
                    Nack::GoAway => frame(GOAWAY, 0, 0, &[0; 8]),
                }
            }
            _ => continue,
        };
        if stream.write_all(&reply).await.is_err() {
            return;
        }
    }
}
