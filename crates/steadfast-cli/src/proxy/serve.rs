//! The proxy's accept loop: listen, take a connection slot, draw the
//! connection's faults, hand it to TCP or HTTP forwarding; stop on a
//! signal or `--duration`, close every connection, print the summary.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use steadfast::chaos::Chaos;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::faults::FaultPlan;
use super::stats::{Stats, bump};
use super::{ProxyArgs, http, tcp};
use crate::exit::FAILURE;
use crate::interrupt::Interrupt;

/// The longest a connection to the target may take to open.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What every connection of the proxy shares.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) plan: FaultPlan,
    pub(super) stats: Stats,
    /// The target's addresses, resolved once: the only ones ever dialled.
    pub(super) targets: Vec<SocketAddr>,
    /// HTTP mode's per-request faults (off when none is asked).
    pub(super) chaos: Chaos,
    pub(super) verbose: bool,
}

impl Shared {
    /// Opens a connection to the target: its addresses in turn, each
    /// within [`CONNECT_TIMEOUT`].
    pub(super) async fn connect(&self) -> std::io::Result<TcpStream> {
        let mut last = None;
        for addr in &self.targets {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    last = Some(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no answer from {addr} within {CONNECT_TIMEOUT:?}"),
                    ));
                }
            }
        }
        bump(&self.stats.upstream_failed);
        Err(last.unwrap_or_else(|| std::io::Error::other("the target has no address")))
    }

    /// Says on stderr, with `-v`, what happened to connection `id`.
    pub(super) fn log(&self, id: u64, what: std::fmt::Arguments<'_>) {
        if self.verbose {
            eprintln!("steadfast proxy: connection {id}: {what}");
        }
    }
}

/// Runs the proxy until `interrupt` or `--duration`; its exit status.
pub(super) async fn serve(args: &ProxyArgs, plan: FaultPlan, interrupt: &Interrupt) -> i32 {
    let targets: Vec<SocketAddr> = match tokio::net::lookup_host(args.to.as_str()).await {
        Ok(addrs) => addrs.collect(),
        Err(e) => {
            eprintln!("steadfast proxy: cannot resolve --to {}: {e}", args.to);
            return FAILURE;
        }
    };
    if targets.is_empty() {
        eprintln!("steadfast proxy: --to {} has no address", args.to);
        return FAILURE;
    }
    let listener = match TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("steadfast proxy: cannot listen on {}: {e}", args.listen);
            return FAILURE;
        }
    };
    let local = listener
        .local_addr()
        .map_or_else(|_| args.listen.to_string(), |a| a.to_string());
    let chaos = match plan.request_chaos() {
        Ok(chaos) => chaos,
        Err(e) => {
            eprintln!("steadfast proxy: {e}");
            return crate::exit::USAGE;
        }
    };
    let http = plan.http;
    let seed = plan.seed;
    let shared = Arc::new(Shared {
        plan,
        stats: Stats::default(),
        targets,
        chaos,
        verbose: args.verbose,
    });
    eprintln!(
        "steadfast proxy: listening on {local}, forwarding {} to {}",
        if http { "HTTP/1.1" } else { "TCP" },
        args.to
    );

    let started = Instant::now();
    let slots = Arc::new(Semaphore::new(
        usize::try_from(args.max_connections).unwrap_or(usize::MAX),
    ));
    let mut tasks = JoinSet::new();
    let stop = stopped(interrupt, args.duration);
    tokio::pin!(stop);
    let mut n: u64 = 0;
    let why = loop {
        // Finished connections leave the set as they end.
        while tasks.try_join_next().is_some() {}
        let slot = tokio::select! {
            biased;
            why = &mut stop => break why,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break "closed".to_owned(),
            },
        };
        let (stream, _) = tokio::select! {
            biased;
            why = &mut stop => break why,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, say: wait a little rather
                    // than spin; the connection stays in the backlog.
                    eprintln!("steadfast proxy: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        bump(&shared.stats.accepted);
        let faults = shared.plan.connection(n);
        let id = n;
        n += 1;
        let shared = Arc::clone(&shared);
        tasks.spawn(async move {
            let _slot = slot;
            if http {
                tcp::handle(&shared, stream, faults, id, http::forward).await;
            } else {
                tcp::handle(&shared, stream, faults, id, tcp::forward).await;
            }
        });
    };
    let stats = &shared.stats;
    if http {
        let chaos = shared.chaos.stats();
        stats.statuses.store(chaos.outcomes, Ordering::Relaxed);
        stats.delayed.store(chaos.latencies, Ordering::Relaxed);
    }
    let ran = started.elapsed();
    let summary = stats.summary(ran, &why, seed, http);
    let json = stats.summary_json(ran, &why, seed, http);
    // Every connection still open is closed (its task dropped, and with it
    // both sockets and any connection to the target) before the summary.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    eprintln!("{summary}");
    if let Some(path) = &args.summary_json {
        let text = format!("{json:#}\n");
        if let Err(e) = std::fs::write(path, text) {
            eprintln!(
                "steadfast proxy: cannot write the JSON summary to {}: {e}",
                path.display()
            );
            return 1;
        }
    }
    0
}

/// Resolves when the proxy should stop, with the reason for the summary.
async fn stopped(interrupt: &Interrupt, duration: Option<Duration>) -> String {
    let limit = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = interrupt.token().cancelled() => match interrupt.signal() {
            Some(crate::interrupt::SIGINT) | None => "Ctrl-C".to_owned(),
            Some(15) => "SIGTERM".to_owned(),
            Some(s) => format!("signal {s}"),
        },
        () = limit => "--duration".to_owned(),
    }
}
