//! **Fallback**: what a call hands back once every attempt has failed.
//!
//! A fallback is the outermost step of a call. It sees the call's final
//! outcome — an error, or a response the classifier judged a failure (an
//! `Ok(503)` retried until the attempts ran out) — with the reason the
//! executor stopped ([`Failure`]), and returns the call's result instead: a
//! value computed from them ([`from_fn`]), a static value ([`value`]), or
//! the result of a backup service ([`backup`]). It may also decline and
//! hand the failure on ([`Failure::into_result`]).
//!
//! The one rule of when it runs is [`fires`]: a call that stopped for any
//! reason but a cancellation. A cancelled call is never turned into a
//! fallback value: whoever cancelled it is not waiting for one. Each time a
//! fallback runs it records an event (a `tracing` event at `info` with the
//! call's name, reason and attempts, and the counter `steadfast.fallback`
//! under the `metrics` feature), and a [`Report`](crate::Report) says it
//! ran ([`fell_back`](crate::Report::fell_back)).
//!
//! Both executors take one with `.fallback(f)`, after everything else, so
//! it composes with the rest: a fallback after retries after a breaker.
//!
//! ```
//! use std::time::Duration;
//! use steadfast::clock::VirtualClock;
//! use steadfast::fallback::{self, Failure};
//! use steadfast::{Attempt, Backoff, BlockingRetryable, RetryPolicy, StopReason, Verdict};
//!
//! let policy = RetryPolicy::builder()
//!     .backoff(Backoff::constant(Duration::from_millis(10)).build()?)
//!     .max_attempts(3)
//!     .build()?;
//! // The server answers 503 every time: after 3 attempts, the cached page.
//! let page = (|_: Attempt| Ok::<_, std::io::Error>((503, "")))
//!     .retry_blocking(&policy)
//!     .classify(|r: &Result<(u16, &str), std::io::Error>| match r {
//!         Ok((503, _)) | Err(_) => Verdict::Retry,
//!         Ok(_) => Verdict::Success,
//!     })
//!     .clock(VirtualClock::new())
//!     .fallback(fallback::from_fn(|failure: Failure<(u16, &str), std::io::Error>| {
//!         assert_eq!(failure.reason(), StopReason::Exhausted);
//!         assert_eq!(failure.response(), Some(&(503, ""))); // the last response
//!         Ok((200, "cached page"))
//!     }))
//!     .call();
//! assert_eq!(page.unwrap(), (200, "cached page"));
//! # Ok::<(), steadfast::ConfigError>(())
//! ```

mod failure;
pub(crate) mod future;
mod kinds;

pub use failure::Failure;
pub use future::{FallbackFuture, WithFallback};
pub use kinds::{AsyncFallback, Backup, Fallback, FromFn, Value, backup, from_fn, value};

use crate::call::{Ending, StopReason};

/// Whether a call that ended with `stop` goes to its fallback: it stopped
/// (`stop` is `Some`: a success never does) for any reason but
/// [`StopReason::Cancelled`]. The one rule every executor and integration
/// follows.
///
/// ```
/// use steadfast::StopReason;
/// use steadfast::fallback::fires;
/// assert!(!fires(None)); // a success
/// assert!(fires(Some(StopReason::Exhausted)));
/// assert!(fires(Some(StopReason::Throttled))); // an open breaker, say
/// assert!(!fires(Some(StopReason::Cancelled)));
/// ```
#[must_use]
pub const fn fires(stop: Option<StopReason>) -> bool {
    matches!(stop, Some(reason) if !matches!(reason, StopReason::Cancelled))
}

/// Records that the fallback of the call named `name` ran for a call that
/// ended as `ending` says. For integrations that run a fallback of their
/// own type through [`fires`]; the executors' `.fallback` calls it.
pub fn record_fired(name: Option<&'static str>, ending: &Ending) {
    let reason = ending.stop.map_or("none", StopReason::as_str);
    tracing::info!(
        target: "steadfast::fallback",
        call = name.unwrap_or(""),
        reason,
        attempts = ending.attempts,
        "the call failed; its fallback answers"
    );
    crate::telemetry::fallback_fired(name.unwrap_or(""), reason);
}

#[cfg(all(test, not(loom)))]
mod tests;
