//! [`RetryLayer`]: the core's retry engine as tower middleware.
//!
//! The layer is one more executor of
//! [`RetryPolicy::decide`](steadfast::RetryPolicy::decide): each call runs
//! the core's async retry future over an operation whose attempts are calls
//! of the inner service. So everything the core does holds here too:
//! attempts count the first, one overall deadline (the policy's
//! `max_elapsed`, the ambient deadline) bounds the call, each attempt runs
//! with the time it has left as the ambient deadline, a server's hint
//! ([`Verdict::RetryAfter`](steadfast::Verdict::RetryAfter)) is clamped by
//! `max_delay` and the deadline, and a shared retry control can refuse.
//!
//! What the layer adds is what tower needs:
//! - **readiness**: the first attempt goes to the service this layer's
//!   `poll_ready` readied; every retry to a fresh clone of it, on which the
//!   attempt calls `poll_ready` before `call` (a readiness error is that
//!   attempt's outcome, classified like any other);
//! - **replay**: a request is retried only if its [`Replay`](crate::replay::Replay)
//!   can make it again; one that cannot is sent once, and if that attempt
//!   fails in a way that would have been retried, the error's reason is
//!   [`StopReason::NotReplayable`](steadfast::StopReason::NotReplayable);
//! - **classification of responses**: the classifier sees `Ok` responses as
//!   well as errors, so an HTTP 503 or a gRPC status can be retried.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::{RetryPolicy, Verdict};
//! use steadfast_tower::RetryLayer;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
//! let counter = calls.clone();
//! // A backend that answers 503 twice, then 200.
//! let backend = service_fn(move |_path: &'static str| {
//!     let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//!     async move { Ok::<u16, std::io::Error>(if n < 2 { 503 } else { 200 }) }
//! });
//! let policy = RetryPolicy::builder().max_attempts(3).build()?;
//! let service = ServiceBuilder::new()
//!     .layer(RetryLayer::new(policy).classify(|r: &Result<u16, std::io::Error>| match r {
//!         Ok(503) | Err(_) => Verdict::Retry,
//!         Ok(_) => Verdict::Success,
//!     }))
//!     .service(backend);
//! assert_eq!(service.oneshot("/users/7").await?, 200);
//! assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 3);
//! # Ok(())
//! # }
//! ```

mod future;

use steadfast::classify::AnyError;
use steadfast::clock::DefaultClock;

pub use future::ResponseFuture;

use crate::layer::{PolicyLayer, PolicyService};
use crate::replay::CloneReplay;

/// A [`PolicyLayer`] that retries: its policy `P` lends a
/// [`RetryPolicy`](steadfast::RetryPolicy) (the policy, an `Arc` of it, a
/// `&'static` reference). `RetryLayer::new(policy)` keeps the policy in an
/// `Arc`; [`lend`](PolicyLayer::lend) takes it as it is.
pub type RetryLayer<P, K = AnyError, R = CloneReplay, C = DefaultClock> = PolicyLayer<P, K, R, C>;

/// The service a [`RetryLayer`] makes.
pub type RetryService<S, P, K = AnyError, R = CloneReplay, C = DefaultClock> =
    PolicyService<S, P, K, R, C>;
