//! #28 item 5: an attempt the deadline cuts off while its connection is
//! being made sent nothing, and the error does not count it. A listener on
//! 127.0.0.1 whose accept queue is full never completes a handshake (the
//! kernel drops the SYN), so a connect to it hangs until the deadline.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use steadfast::{Backoff, StopReason};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A listener with the shortest accept queue the kernel allows.
fn short_queue() -> (TcpListener, SocketAddr) {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind 127.0.0.1");
    let listener = socket.listen(0).expect("listen");
    let addr = listener.local_addr().expect("address");
    (listener, addr)
}

/// Fills `addr`'s accept queue with connections nobody accepts, until a
/// connect hangs; keeps them open.
async fn fill(addr: SocketAddr) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..16 {
        match tokio::time::timeout(Duration::from_millis(100), TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => held.push(stream),
            Ok(Err(e)) => panic!("connect failed instead of hanging: {e}"),
            // It hangs: the queue is full.
            Err(_) => return held,
        }
    }
    panic!("the accept queue never filled");
}

#[tokio::test]
async fn a_first_attempt_cut_off_while_connecting_is_not_counted() {
    let (_listener, addr) = short_queue();
    let _held = fill(addr).await;
    let client = steadfast_http::Client::builder()
        .deadline(Duration::from_millis(300))
        .build()
        .expect("valid");
    let err = client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .expect_err("nothing answers");
    assert_eq!(err.reason(), StopReason::Deadline);
    assert_eq!(err.attempts(), 0, "{err}");
    assert!(err.timed_out());
    assert_eq!(
        (err.status(), err.transport_error().is_none()),
        (None, true)
    );
    let text = err.to_string();
    assert!(
        text.starts_with("GET failed after 0 attempts in "),
        "{text}"
    );
    assert!(
        text.ends_with(
            "ms (deadline exceeded): the deadline passed while the next attempt was connecting (it was never sent)"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_retry_cut_off_while_connecting_is_not_counted() {
    let (listener, addr) = short_queue();
    let served = Arc::new(AtomicUsize::new(0));
    let server = tokio::spawn({
        let served = Arc::clone(&served);
        async move {
            // One request, answered 503 on a connection that then closes;
            // after it, the queue fills and nothing is accepted again.
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut buf = [0_u8; 4096];
            let _ = stream.read(&mut buf).await;
            served.fetch_add(1, Ordering::SeqCst);
            stream
                .write_all(
                    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await
                .expect("write");
            drop(stream);
            let held = fill(addr).await;
            (listener, held)
        }
    });
    let client = steadfast_http::Client::builder()
        .attempts(3)
        .backoff(
            Backoff::constant(Duration::from_millis(800))
                .build()
                .expect("valid"),
        )
        .deadline(Duration::from_millis(2500))
        .build()
        .expect("valid");
    let err = client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .expect_err("nothing answers the retry");
    let _kept = server.await.expect("server");
    assert_eq!(served.load(Ordering::SeqCst), 1);
    assert_eq!(
        (err.reason(), err.attempts()),
        (StopReason::Deadline, 1),
        "{err}"
    );
    assert_eq!(err.ending().attempts, 1);
    // The 503 was not the last attempt: the error does not name it.
    assert_eq!(err.status(), None, "{err}");
    assert!(err.to_string().contains("(it was never sent)"), "{err}");
}
