//! One connection through the proxy: its connection fault (refuse, stall,
//! reset), then forwarding — TCP mode's byte pump here, with the latency
//! and bandwidth limit on what the server sends, or HTTP mode's
//! ([`super::http::forward`]).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::faults::{ConnectionFault, ConnectionFaults};
use super::serve::Shared;
use super::stats::{OpenGuard, add, bump};

/// The buffer of each direction of a forwarded connection.
const BUFFER: usize = 16 * 1024;
/// Chunks read ahead of a delayed write (bounded memory: this many
/// buffers at most per delayed connection).
const QUEUE: usize = 8;
/// How long a refused connection waits for the client to close its side
/// (so the client reads a clean end-of-file, not a reset).
const REFUSE_LINGER: Duration = Duration::from_secs(2);

/// Runs connection `id`'s fault, and `forward` unless the fault is one
/// that forwards nothing.
pub(super) async fn handle<F, Fut>(
    shared: &Arc<Shared>,
    mut client: TcpStream,
    faults: ConnectionFaults,
    id: u64,
    forward: F,
) where
    F: FnOnce(Arc<Shared>, TcpStream, ConnectionFaults, u64) -> Fut,
    Fut: Future<Output = ()>,
{
    let stats = &shared.stats;
    let _open = OpenGuard::new(stats);
    match faults.kind {
        Some(ConnectionFault::Refuse) => {
            bump(&stats.refused);
            shared.log(id, format_args!("refused"));
            // Our end-of-file first; then what the client sent is read and
            // dropped until it closes, so that closing never turns into a
            // reset for unread bytes.
            let _ = client.shutdown().await;
            drain(&mut client, Some(REFUSE_LINGER)).await;
        }
        Some(ConnectionFault::Stall(hold)) => {
            bump(&stats.stalled);
            shared.log(id, format_args!("stalled"));
            drain(&mut client, hold).await;
        }
        Some(ConnectionFault::Reset(after)) => {
            bump(&stats.reset);
            // A linger of zero: closing the socket sends RST, not FIN.
            reset_on_close(&client);
            // The first bytes, waited for without taking them (a peek, not
            // `readable`, which may wake before any byte is there).
            let mut first = [0u8; 1];
            if client.peek(&mut first).await.is_ok() {
                shared.log(
                    id,
                    format_args!("reset {after:?} after the client's first bytes"),
                );
                if !after.is_zero() {
                    let forwarding = forward(Arc::clone(shared), client, faults, id);
                    let _ = tokio::time::timeout(after, forwarding).await;
                }
            }
            // Dropped here (or with the forwarding future): reset.
        }
        None => forward(Arc::clone(shared), client, faults, id).await,
    }
    shared.log(id, format_args!("closed"));
}

/// Makes closing `stream` reset the connection (SO_LINGER of zero).
pub(super) fn reset_on_close(stream: &TcpStream) {
    let _ = socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO));
}

/// Reads and drops what the client sends until it closes its side, an
/// error, or `limit`.
async fn drain(client: &mut TcpStream, limit: Option<Duration>) {
    let read = async {
        let mut buf = [0u8; 4096];
        while let Ok(n) = client.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    match limit {
        Some(limit) => {
            let _ = tokio::time::timeout(limit, read).await;
        }
        None => read.await,
    }
}

/// TCP mode: connects to the target and pumps bytes both ways until both
/// sides have closed (or either fails), what the server sends delayed and
/// throttled as the connection's faults say.
pub(super) async fn forward(
    shared: Arc<Shared>,
    mut client: TcpStream,
    mut faults: ConnectionFaults,
    id: u64,
) {
    let Ok(mut upstream) = shared.connect().await else {
        shared.log(id, format_args!("the target cannot be reached; closed"));
        return;
    };
    let stats = &shared.stats;
    if matches!(faults.kind, Some(ConnectionFault::Reset(_))) {
        reset_on_close(&upstream);
    }
    if let Some((delay, jitter)) = faults.latency {
        bump(&stats.slowed);
        shared.log(
            id,
            format_args!("each chunk held {delay:?} + up to {jitter:?}"),
        );
    }
    if let Some(rate) = faults.bandwidth {
        bump(&stats.throttled);
        shared.log(id, format_args!("throttled to {rate} bytes a second"));
    }
    let (client_read, client_write) = client.split();
    let (upstream_read, upstream_write) = upstream.split();
    let up = pump(client_read, upstream_write, &stats.bytes_up);
    let result = if faults.shapes_data() {
        let down = shaped(upstream_read, client_write, &mut faults, &stats.bytes_down);
        tokio::try_join!(up, down).map(|_| ())
    } else {
        let down = pump(upstream_read, client_write, &stats.bytes_down);
        tokio::try_join!(up, down).map(|_| ())
    };
    if let Err(e) = result {
        shared.log(id, format_args!("ended: {e}"));
    }
}

/// Copies `from` to `to` until end-of-file, then closes `to`'s side.
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    counter: &AtomicU64,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; BUFFER];
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        to.write_all(&buf[..n]).await?;
        add(counter, n);
    }
}

/// [`pump`], each chunk held for the connection's latency (counted from
/// when it arrived: reading goes on meanwhile, up to [`QUEUE`] chunks) and
/// paced to its bandwidth.
async fn shaped(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    faults: &mut ConnectionFaults,
    counter: &AtomicU64,
) -> std::io::Result<()> {
    let bandwidth = faults.bandwidth;
    // Small chunks under a bandwidth limit (a twentieth of a second's
    // worth), so the pace is smooth rather than a burst a second.
    let chunk = bandwidth.map_or(BUFFER, |b| {
        usize::try_from(b / 20).unwrap_or(BUFFER).clamp(1, BUFFER)
    });
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE);
    let read = async move {
        loop {
            let mut buf = vec![0u8; chunk];
            let n = from.read(&mut buf).await?;
            if n == 0 {
                return Ok::<(), std::io::Error>(());
            }
            buf.truncate(n);
            if tx.send((Instant::now(), buf)).await.is_err() {
                return Ok(());
            }
        }
    };
    let write = async {
        let mut next = Instant::now();
        while let Some((arrived, buf)) = rx.recv().await {
            tokio::time::sleep_until(arrived + faults.next_delay()).await;
            if let Some(rate) = bandwidth {
                tokio::time::sleep_until(next).await;
                next = next.max(Instant::now()) + transfer_time(buf.len(), rate);
            }
            to.write_all(&buf).await?;
            add(counter, buf.len());
        }
        to.shutdown().await
    };
    tokio::try_join!(read, write).map(|_| ())
}

/// How long `len` bytes take at `rate` bytes a second.
fn transfer_time(len: usize, rate: u64) -> Duration {
    let len = u64::try_from(len).unwrap_or(u64::MAX);
    let nanos = u128::from(len) * 1_000_000_000 / u128::from(rate.max(1));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_times_follow_the_rate() {
        assert_eq!(transfer_time(1024, 1024), Duration::from_secs(1));
        assert_eq!(transfer_time(512, 1024), Duration::from_millis(500));
        assert_eq!(transfer_time(0, 1), Duration::ZERO);
        assert_eq!(transfer_time(1, 0), Duration::from_secs(1));
    }
}
