//! [`HedgeLayer`]: the core's hedger as tower middleware.
//!
//! Each call sends its first copy at once and, while no copy has succeeded,
//! one more every hedging delay (fixed, or an
//! [`AdaptiveDelay`](steadfast::policy::AdaptiveDelay) that follows a latency
//! quantile and uses its fallback delay until it has data), up to the
//! policy's `max_attempts` copies. **The first success wins** and every
//! other copy is dropped at once (for hyper, its connection or stream is
//! closed); a non-fatal failure
//! ([`Verdict::Retry`](steadfast::Verdict::Retry)) sends the next copy at
//! once; a fatal one ([`Verdict::Stop`](steadfast::Verdict::Stop)) ends the
//! call. Every copy after the first asks the policy's retry control, so one
//! budget can bound retries and hedges together.
//!
//! Every copy is a call of its own clone of the inner service, readied with
//! `poll_ready` first (the first copy uses the service this layer's
//! `poll_ready` readied). Copies run as futures polled together in the
//! caller's task: nothing is spawned and nothing outlives the call.
//!
//! **Hedge only idempotent requests**: every copy may be executed. A request
//! that cannot be replayed is sent once, unhedged.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::HedgePolicy;
//! use steadfast_tower::HedgeLayer;
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let copies = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
//! let counter = copies.clone();
//! // The first copy is stuck behind a GC pause; the second answers in 1 ms.
//! let replica = service_fn(move |key: u32| {
//!     let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//!     async move {
//!         let ms = if n == 0 { 5_000 } else { 1 };
//!         tokio::time::sleep(Duration::from_millis(ms)).await;
//!         Ok::<_, std::io::Error>(format!("value {key} from copy {}", n + 1))
//!     }
//! });
//! let policy = HedgePolicy::builder(Duration::from_millis(10)).max_attempts(3).build()?;
//! let service = ServiceBuilder::new().layer(HedgeLayer::new(policy)).service(replica);
//! let start = tokio::time::Instant::now();
//! assert_eq!(service.oneshot(7).await?, "value 7 from copy 2");
//! assert_eq!(start.elapsed(), Duration::from_millis(11)); // not 5 s
//! # Ok(())
//! # }
//! ```

mod future;

use steadfast::classify::AnyError;
use steadfast::clock::DefaultClock;

pub use future::ResponseFuture;

use crate::layer::{PolicyLayer, PolicyService};
use crate::replay::CloneReplay;

/// A [`PolicyLayer`] that hedges: its policy `P` lends a
/// [`HedgePolicy`](steadfast::HedgePolicy). `HedgeLayer::new(policy)` keeps
/// the policy in an `Arc`; [`lend`](PolicyLayer::lend) takes it as it is.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use steadfast::HedgePolicy;
/// use steadfast::policy::AdaptiveDelay;
/// use steadfast_tower::{HedgeLayer, PreciseClock};
///
/// // Hedge once a call is slower than 99 % of recent ones (5 ms until that is known).
/// let delay = Arc::new(AdaptiveDelay::builder(Duration::from_millis(5)).quantile(0.99).build()?);
/// let layer = HedgeLayer::new(HedgePolicy::builder(delay).max_attempts(2).build()?)
///     .clock(PreciseClock::new().expect("the timer thread starts"));
/// # Ok::<(), steadfast::ConfigError>(())
/// ```
pub type HedgeLayer<P, K = AnyError, R = CloneReplay, C = DefaultClock> = PolicyLayer<P, K, R, C>;

/// The service a [`HedgeLayer`] makes.
pub type HedgeService<S, P, K = AnyError, R = CloneReplay, C = DefaultClock> =
    PolicyService<S, P, K, R, C>;
