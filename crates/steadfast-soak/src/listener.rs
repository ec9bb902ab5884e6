//! What both hostile servers share: a listener on 127.0.0.1 (a port the OS
//! picks) whose connections are counted while they are open.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;

/// A listener accepting on its runtime.
#[derive(Debug)]
pub struct Listening {
    pub addr: SocketAddr,
    /// Connections open now.
    pub open: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Listening {
    /// Binds 127.0.0.1 and serves each connection with `serve` on `runtime`.
    ///
    /// # Errors
    /// When the socket cannot be bound.
    pub fn start<F, Fut>(runtime: &Handle, serve: F) -> std::io::Result<Self>
    where
        F: Fn(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let open = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&open);
        let task = runtime.spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                counted.fetch_add(1, Ordering::SeqCst);
                let guard = Open(Arc::clone(&counted));
                let served = serve(stream);
                tokio::spawn(async move {
                    let _guard = guard;
                    served.await;
                });
            }
        });
        Ok(Self { addr, open, task })
    }

    /// Stops accepting and waits until the listener is closed.
    pub async fn stop(&mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts a connection open until it is dropped.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
