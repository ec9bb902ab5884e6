//! The clock an async executor uses unless told otherwise.

/// The clock an async retry uses unless told otherwise: [`TokioClock`]
/// with the `tokio` feature (the default); without it, [`FuturesTimerClock`]
/// with `futures-timer`, else [`AsyncIoClock`] with `async-io`. Any clock
/// can be passed with `.clock(..)` ([`Retry::clock`](crate::retry::Retry::clock), [`Hedge::clock`](crate::hedge::Hedge::clock)) whatever the features.
///
/// [`TokioClock`]: super::TokioClock
/// [`FuturesTimerClock`]: https://docs.rs/steadfast/latest/steadfast/clock/struct.FuturesTimerClock.html
/// [`AsyncIoClock`]: https://docs.rs/steadfast/latest/steadfast/clock/struct.AsyncIoClock.html
#[cfg(feature = "tokio")]
pub type DefaultClock = super::TokioClock;

/// The clock an async retry uses unless told otherwise (see the `tokio` build).
#[cfg(all(not(feature = "tokio"), feature = "futures-timer"))]
pub type DefaultClock = super::FuturesTimerClock;

/// The clock an async retry uses unless told otherwise (see the `tokio` build).
#[cfg(all(
    not(feature = "tokio"),
    not(feature = "futures-timer"),
    feature = "async-io"
))]
pub type DefaultClock = super::AsyncIoClock;

/// Without any timer feature there is no default async clock: give one
/// with `.clock(..)` (the blocking executor uses [`SystemClock`](super::SystemClock)).
#[cfg(not(any(feature = "tokio", feature = "futures-timer", feature = "async-io")))]
pub type DefaultClock = NoClock;

/// The placeholder clock of a retry built without a timer feature: it is
/// not an [`AsyncClock`](super::AsyncClock), so awaiting such a retry does
/// not compile (rustc says the `Retry` "is not a future") until it is given
/// a clock with `.clock(..)`, or steadfast is built with its `tokio`,
/// `futures-timer` or `async-io` feature. Where an `AsyncClock` is required
/// directly, the compiler's note names those features.
#[cfg(not(any(feature = "tokio", feature = "futures-timer", feature = "async-io")))]
#[derive(Debug, Clone, Copy, Default)]
pub struct NoClock;
