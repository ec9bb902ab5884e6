//! The constructors of the built-in schedules: [`Backoff::constant`],
//! [`Backoff::exponential`] and their siblings, [`Backoff::named`] for text
//! configuration, and [`Backoff::default_builder`]; each gives a
//! [`BackoffBuilder`] preset to its schedule.

use std::time::Duration;

use super::builder::BackoffBuilder;
use super::kind::Kind;
use super::value::Backoff;
use crate::config_error::ConfigError;

impl Backoff {
    /// A constant schedule: `interval` before every retry (1 s when built
    /// with [`Backoff::named`]`("constant")`); no jitter by default.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::constant(Duration::from_millis(250)).max_attempts(4).build()?;
    /// assert_eq!(b.delays().collect::<Vec<_>>(), [Duration::from_millis(250); 3]);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn constant(interval: Duration) -> BackoffBuilder {
        BackoffBuilder::new(Kind::Constant).initial(interval)
    }

    /// A linear schedule: delay `n` (0-based) is `initial + step * n`, capped
    /// at `max_delay`. Defaults: initial 1 s, step 1 s (1 s, 2 s, 3 s, … as
    /// pester's `LinearBackoff`), no cap, no jitter.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::linear().max_delay(Duration::from_secs(3)).build()?;
    /// let secs: Vec<u64> = b.delays().take(5).map(|d| d.as_secs()).collect();
    /// assert_eq!(secs, [1, 2, 3, 3, 3]);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn linear() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Linear)
    }

    /// An exponential schedule: delay `n` (0-based) is
    /// `min(initial * multiplier^n, max_delay)`, then jittered and capped
    /// again. Defaults: initial 100 ms, multiplier 2 (any finite real
    /// `>= 1`), max 10 s, full jitter — the same as [`Backoff::default`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{Backoff, Jitter};
    /// let b = Backoff::exponential().jitter(Jitter::None).build()?;
    /// let ms: Vec<u128> = b.delays().take(9).map(|d| d.as_millis()).collect();
    /// assert_eq!(ms, [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn exponential() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Exponential)
    }

    /// A power-of-two exponential schedule computed by shifting integer
    /// nanoseconds: delay `n` (0-based) is `initial << (shift * n)`,
    /// saturating at `u64::MAX` ns and then capped at `max_delay`; it never
    /// overflows or wraps, for any `n` up to `u32::MAX`. Defaults: initial
    /// 100 ms, shift 1 (doubling), max 10 s, no jitter.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::shift_exponential().max_delay(Duration::MAX).build()?;
    /// let ms: Vec<u128> = b.delays().take(4).map(|d| d.as_millis()).collect();
    /// assert_eq!(ms, [100, 200, 400, 800]);
    /// assert_eq!(b.delay_at(u32::MAX, &mut steadfast::backoff::Rng::with_seed(0)), Duration::from_nanos(u64::MAX));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn shift_exponential() -> BackoffBuilder {
        BackoffBuilder::new(Kind::ShiftExponential)
    }

    /// A Fibonacci schedule: delays `initial × (1, 1, 2, 3, 5, 8, …)`, capped
    /// at `max_delay`. Grows more gently than doubling (by the golden ratio,
    /// about 1.618). Defaults: initial 100 ms, max 10 s, no jitter.
    ///
    /// ```
    /// let b = steadfast::Backoff::fibonacci().build()?;
    /// let ms: Vec<u128> = b.delays().take(12).map(|d| d.as_millis()).collect();
    /// assert_eq!(ms, [100, 100, 200, 300, 500, 800, 1300, 2100, 3400, 5500, 8900, 10_000]);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn fibonacci() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Fibonacci)
    }

    /// AWS "decorrelated jitter": `sleep = min(max, U(initial, 3 * prev))`,
    /// where `prev` is the previous sleep and is `initial` before the first.
    /// Each delay depends on the one before, so the curve is a random walk
    /// whose envelope still grows about threefold per step until the cap.
    ///
    /// Source: Marc Brooker, "Exponential Backoff And Jitter", AWS
    /// Architecture Blog, 2015 (`sleep = min(cap, random_between(base, sleep * 3))`).
    /// Defaults: initial (base) 100 ms, max 10 s. The randomness is the
    /// formula itself: setting a [`Jitter`](super::jitter::Jitter) is an
    /// error. The cap holds; `min_delay` is a floor.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::decorrelated().seed(1).build()?;
    /// let d: Vec<Duration> = b.delays().take(50).collect();
    /// assert!(d.iter().all(|x| *x >= Duration::from_millis(100) && *x <= Duration::from_secs(10)));
    /// assert!(d[0] <= Duration::from_millis(300));
    /// assert!(d.windows(2).all(|w| w[1] <= w[0] * 3));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn decorrelated() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Decorrelated)
    }

    /// Polly's "decorrelated jitter backoff V2": smooth, exponentially
    /// growing, with no spikes, and a median first delay of `initial`.
    ///
    /// The formula, for step `n` (0-based) and a median first delay `m`:
    ///
    /// ```text
    /// t      = n + U(0, 1)
    /// next   = 2^t * tanh(sqrt(P * t))          P = 4.0 (smooths the first delay)
    /// delay  = (next - prev) * S * m            S = 1 / 1.4 (medians near m, 2m, 4m, …)
    /// prev   = next                             (prev = 0 before the first)
    /// ```
    ///
    /// capped at `max_delay` (Polly applies its `MaxDelay` the same way).
    /// Source: `DecorrelatedJitterBackoffV2` in App-vNext/Polly
    /// (`src/Polly.Core/Retry/RetryHelper.cs`, originally
    /// Polly.Contrib.WaitAndRetry `Backoff.DecorrelatedJitterV2.cs`; formula
    /// by George Polevoy, scaling by Dylan Reisenberger, Polly issue 530).
    /// Because `2^t * tanh(sqrt(4t))` increases with `t`, every delay is
    /// non-negative; where it overflows `f64` (step ≥ 1024), the delay is
    /// the cap. Defaults: median first delay 100 ms, max 10 s; no extra jitter.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::decorrelated_v2().initial(Duration::from_secs(1)).max_delay(Duration::from_secs(60)).seed(3).build()?;
    /// let d: Vec<Duration> = b.delays().take(8).collect();
    /// assert!(d.iter().all(|x| *x <= Duration::from_secs(60)));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn decorrelated_v2() -> BackoffBuilder {
        BackoffBuilder::new(Kind::DecorrelatedV2)
    }

    /// grpc-go's stateless `Backoff(retries)` as a schedule: delay 0 is
    /// `initial` exactly (no jitter, and not capped, as in grpc-go and in
    /// the connection-backoff algorithm); delay `n > 0` is
    /// `min(initial * multiplier^n, max) * (1 + f * U(-1, 1))`, never below
    /// zero. Defaults (grpc-go's `DefaultConfig`, the values of gRPC's
    /// connection-backoff document): initial 1 s, multiplier 1.6,
    /// jitter `Proportional(0.2)`, max 120 s.
    ///
    /// As in grpc-go, the jitter is applied *after* the cap, so a delay may
    /// exceed `max_delay` by the jitter factor (up to 144 s with the
    /// defaults); `min_delay` still applies. The jitter must be
    /// `Proportional` or `None`. For the stateless form, use
    /// [`Backoff::delay_at`]`(retries, rng)`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::{Backoff, Jitter};
    /// let b = Backoff::grpc_go().jitter(Jitter::None).build()?;
    /// let ms: Vec<u128> = b.delays().take(4).map(|d| d.as_millis()).collect();
    /// assert_eq!(ms, [1000, 1600, 2560, 4096]);
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn grpc_go() -> BackoffBuilder {
        BackoffBuilder::new(Kind::GrpcGo)
    }

    /// gRFC A6 ("gRPC Retry Design") retry backoff, as the specification
    /// stands since 2024: retry `n` (1-based) waits
    /// `min(initialBackoff * backoffMultiplier^(n-1), maxBackoff) * U(0.8, 1.2)`.
    ///
    /// The ±20 % is part of the specification, so the delay may exceed
    /// `maxBackoff` by up to 20 % (the cap does not hold after jitter here)
    /// and setting a [`Jitter`](super::jitter::Jitter) is an error. The
    /// multiplier need only be `> 0` (A6's rule). Defaults are the gRFC's
    /// example (initial 0.1 s, max 1 s, multiplier 2); a service config sets
    /// its own.
    /// `maxAttempts` (counting the original call) is `max_attempts`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = steadfast::Backoff::grpc_a6().seed(8).build()?;
    /// for (n, d) in b.delays().take(6).enumerate() {
    ///     let env = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0][n];
    ///     assert!(d.as_secs_f64() >= env * 0.8 - 1e-9 && d.as_secs_f64() <= env * 1.2 + 1e-9);
    /// }
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn grpc_a6() -> BackoffBuilder {
        BackoffBuilder::new(Kind::GrpcA6)
    }

    /// gRFC A6 retry backoff as specified before 2024 ("full jitter"): retry
    /// `n` waits `U(0, min(initialBackoff * backoffMultiplier^(n-1), maxBackoff))`.
    /// Never above `maxBackoff`. Same defaults as [`grpc_a6`](Self::grpc_a6).
    ///
    /// ```
    /// let b = steadfast::Backoff::grpc_a6_legacy().seed(8).build()?;
    /// assert!(b.delays().take(100).all(|d| d <= std::time::Duration::from_secs(1)));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn grpc_a6_legacy() -> BackoffBuilder {
        BackoffBuilder::new(Kind::GrpcA6Legacy)
    }

    /// A builder for the schedule named `name`, for text configuration (the
    /// CLI's `exponential:initial=100ms`): one of `constant`, `linear`,
    /// `exponential`, `shift-exponential`, `fibonacci`, `decorrelated`,
    /// `decorrelated-v2`, `grpc-go`, `grpc-a6`, `grpc-a6-legacy`.
    ///
    /// ```
    /// let b = steadfast::Backoff::named("fibonacci")?.build()?;
    /// assert_eq!(b.name(), "fibonacci");
    /// assert!(steadfast::Backoff::named("zigzag").is_err());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn named(name: &str) -> Result<BackoffBuilder, ConfigError> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .map(BackoffBuilder::new)
            .ok_or_else(|| {
                ConfigError::new(
                    "backoff",
                    "name",
                    "must be one of constant, linear, exponential, shift-exponential, fibonacci, \
                     decorrelated, decorrelated-v2, grpc-go, grpc-a6, grpc-a6-legacy",
                    name,
                )
            })
    }

    /// A builder preset to [`Backoff::default`] (exponential, 100 ms, ×2,
    /// max 10 s, full jitter), to change only some settings.
    ///
    /// ```
    /// let b = steadfast::Backoff::default_builder().max_attempts(3).build()?;
    /// assert_eq!(b.name(), "exponential");
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn default_builder() -> BackoffBuilder {
        BackoffBuilder::new(Kind::Exponential)
    }
}
