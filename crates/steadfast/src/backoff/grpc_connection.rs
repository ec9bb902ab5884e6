//! gRPC connection backoff (grpc/grpc `doc/connection-backoff.md`).
//!
//! ```text
//! ConnectWithBackoff()
//!   current_backoff = INITIAL_BACKOFF
//!   current_deadline = now() + INITIAL_BACKOFF
//!   while (TryConnect(Max(current_deadline, now() + MIN_CONNECT_TIMEOUT)) != SUCCESS)
//!     SleepUntil(current_deadline)
//!     current_backoff = Min(current_backoff * MULTIPLIER, MAX_BACKOFF)
//!     current_deadline = now() + current_backoff +
//!       UniformRandom(-JITTER * current_backoff, JITTER * current_backoff)
//! ```
//!
//! with INITIAL_BACKOFF 1 s, MULTIPLIER 1.6, JITTER 0.2, MAX_BACKOFF 120 s,
//! MIN_CONNECT_TIMEOUT 20 s; the backoff is reset once a connection is
//! accepted (the server's SETTINGS frame arrives).

use std::time::{Duration, Instant};

use super::jitter::Jitter;
use super::nanos::{duration_from_nanos, nanos};
use super::schedule::{Schedule, ScheduleState};
use super::value::Backoff;
use crate::clock::saturating_add;
use crate::config_error::ConfigError;
use crate::rng::Rng;

/// The configuration of gRPC connection backoff: the spec's five parameters.
/// Build it once; give each connection (subchannel) its own
/// [`ConnectionBackoff`] with [`connection`](Self::connection).
///
/// It is also a plain [`Schedule`] of the delays between the starts of
/// connection attempts (the first `INITIAL_BACKOFF` exactly, then
/// `min(b * MULTIPLIER, MAX_BACKOFF) ± JITTER`), which is grpc-go's schedule
/// ([`Backoff::grpc_go`]) with these parameters. As the spec says, the jitter
/// is applied after the cap, so a delay may exceed MAX_BACKOFF by up to JITTER.
///
/// ```
/// use std::time::{Duration, Instant};
/// use steadfast::backoff::{GrpcConnectionBackoff, Rng};
/// let config = GrpcConnectionBackoff::default();
/// let mut conn = config.connection(Rng::with_seed(1));
/// let now = Instant::now();
/// let first = conn.next_attempt(now);
/// assert_eq!(first.retry_at, now + Duration::from_secs(1));
/// assert_eq!(first.connect_deadline, now + Duration::from_secs(20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrpcConnectionBackoff {
    initial: Duration,
    multiplier: f64,
    jitter: f64,
    max: Duration,
    min_connect_timeout: Duration,
    schedule: Backoff,
}

impl Default for GrpcConnectionBackoff {
    fn default() -> Self {
        Self {
            initial: Self::INITIAL_BACKOFF,
            multiplier: Self::MULTIPLIER,
            jitter: Self::JITTER,
            max: Self::MAX_BACKOFF,
            min_connect_timeout: Self::MIN_CONNECT_TIMEOUT,
            schedule: Backoff::DEFAULT_GRPC_GO,
        }
    }
}

impl GrpcConnectionBackoff {
    /// The spec's INITIAL_BACKOFF: 1 s.
    pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
    /// The spec's MULTIPLIER: 1.6.
    pub const MULTIPLIER: f64 = 1.6;
    /// The spec's JITTER: 0.2.
    pub const JITTER: f64 = 0.2;
    /// The spec's MAX_BACKOFF: 120 s.
    pub const MAX_BACKOFF: Duration = Duration::from_secs(120);
    /// The spec's MIN_CONNECT_TIMEOUT: 20 s.
    pub const MIN_CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

    /// A builder starting from the spec's values.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = steadfast::backoff::GrpcConnectionBackoff::builder().min_connect_timeout(Duration::from_secs(5)).build()?;
    /// assert_eq!(c.min_connect_timeout(), Duration::from_secs(5));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn builder() -> GrpcConnectionBackoffBuilder {
        GrpcConnectionBackoffBuilder {
            initial: Self::INITIAL_BACKOFF,
            multiplier: Self::MULTIPLIER,
            jitter: Self::JITTER,
            max: Self::MAX_BACKOFF,
            min_connect_timeout: Self::MIN_CONNECT_TIMEOUT,
            seed: None,
        }
    }

    /// The per-connection state, drawing its jitter from `rng`.
    ///
    /// ```
    /// let conn = steadfast::backoff::GrpcConnectionBackoff::default().connection(steadfast::backoff::Rng::with_seed(0));
    /// assert_eq!(conn.attempts(), 0);
    /// ```
    #[must_use]
    pub fn connection(&self, rng: Rng) -> ConnectionBackoff {
        ConnectionBackoff {
            config: *self,
            rng,
            current_backoff: 0.0,
            attempts: 0,
        }
    }

    /// The delays-only schedule (grpc-go's, with these parameters).
    ///
    /// ```
    /// let b = steadfast::backoff::GrpcConnectionBackoff::default().schedule();
    /// assert_eq!(b.name(), "grpc-go");
    /// ```
    #[must_use]
    pub const fn schedule(&self) -> Backoff {
        self.schedule
    }

    /// INITIAL_BACKOFF as configured.
    ///
    /// ```
    /// assert_eq!(steadfast::backoff::GrpcConnectionBackoff::default().initial(), std::time::Duration::from_secs(1));
    /// ```
    #[must_use]
    pub const fn initial(&self) -> Duration {
        self.initial
    }

    /// MULTIPLIER as configured.
    ///
    /// ```
    /// assert_eq!(steadfast::backoff::GrpcConnectionBackoff::default().multiplier(), 1.6);
    /// ```
    #[must_use]
    pub const fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// JITTER as configured.
    ///
    /// ```
    /// assert_eq!(steadfast::backoff::GrpcConnectionBackoff::default().jitter(), 0.2);
    /// ```
    #[must_use]
    pub const fn jitter(&self) -> f64 {
        self.jitter
    }

    /// MAX_BACKOFF as configured.
    ///
    /// ```
    /// assert_eq!(steadfast::backoff::GrpcConnectionBackoff::default().max_backoff(), std::time::Duration::from_secs(120));
    /// ```
    #[must_use]
    pub const fn max_backoff(&self) -> Duration {
        self.max
    }

    /// MIN_CONNECT_TIMEOUT as configured.
    ///
    /// ```
    /// assert_eq!(steadfast::backoff::GrpcConnectionBackoff::default().min_connect_timeout(), std::time::Duration::from_secs(20));
    /// ```
    #[must_use]
    pub const fn min_connect_timeout(&self) -> Duration {
        self.min_connect_timeout
    }
}

impl Schedule for GrpcConnectionBackoff {
    #[inline]
    fn next_delay(&self, state: &mut ScheduleState, rng: &mut Rng) -> Option<Duration> {
        self.schedule.next_delay(state, rng)
    }

    fn seed(&self) -> Option<u64> {
        self.schedule.seed
    }
}

/// Builds a [`GrpcConnectionBackoff`]; every setting starts at the spec's value.
///
/// ```
/// let err = steadfast::backoff::GrpcConnectionBackoff::builder().jitter(1.5).build().unwrap_err();
/// assert_eq!(err.field(), "jitter");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[must_use = "a builder does nothing until `build()`"]
pub struct GrpcConnectionBackoffBuilder {
    initial: Duration,
    multiplier: f64,
    jitter: f64,
    max: Duration,
    min_connect_timeout: Duration,
    seed: Option<u64>,
}

impl GrpcConnectionBackoffBuilder {
    /// INITIAL_BACKOFF: the wait after the first failure; greater than
    /// zero (a zero backoff would be a reconnect loop with no delay).
    ///
    /// ```
    /// let c = steadfast::backoff::GrpcConnectionBackoff::builder().initial(std::time::Duration::from_millis(100)).build()?;
    /// assert_eq!(c.initial(), std::time::Duration::from_millis(100));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn initial(mut self, initial: Duration) -> Self {
        self.initial = initial;
        self
    }

    /// MULTIPLIER: finite, `>= 1`.
    ///
    /// ```
    /// assert!(steadfast::backoff::GrpcConnectionBackoff::builder().multiplier(f64::NAN).build().is_err());
    /// ```
    pub const fn multiplier(mut self, multiplier: f64) -> Self {
        self.multiplier = multiplier;
        self
    }

    /// JITTER: within `[0, 1]`.
    ///
    /// ```
    /// assert!(steadfast::backoff::GrpcConnectionBackoff::builder().jitter(0.0).build().is_ok());
    /// ```
    pub const fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// MAX_BACKOFF: the cap on the backoff before jitter; greater than zero.
    ///
    /// ```
    /// let c = steadfast::backoff::GrpcConnectionBackoff::builder().max_backoff(std::time::Duration::from_secs(30)).build()?;
    /// assert_eq!(c.max_backoff(), std::time::Duration::from_secs(30));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn max_backoff(mut self, max: Duration) -> Self {
        self.max = max;
        self
    }

    /// MIN_CONNECT_TIMEOUT: the least time given to one connection attempt.
    ///
    /// ```
    /// let c = steadfast::backoff::GrpcConnectionBackoff::builder().min_connect_timeout(std::time::Duration::ZERO).build()?;
    /// assert!(c.min_connect_timeout().is_zero());
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn min_connect_timeout(mut self, timeout: Duration) -> Self {
        self.min_connect_timeout = timeout;
        self
    }

    /// A seed for the delays-only [`Schedule`] (a [`ConnectionBackoff`]
    /// takes its [`Rng`] from the caller).
    ///
    /// ```
    /// use steadfast::backoff::Schedule;
    /// let c = steadfast::backoff::GrpcConnectionBackoff::builder().seed(4).build()?;
    /// assert_eq!(c.seed(), Some(4));
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub const fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for a zero `initial` or `max_backoff` (either
    /// would let a client reconnect in a loop with no delay), a multiplier
    /// that is not a finite number `>= 1`, or a jitter outside `[0, 1]`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::backoff::GrpcConnectionBackoff;
    /// assert_eq!(GrpcConnectionBackoff::builder().multiplier(0.0).build().unwrap_err().field(), "multiplier");
    /// assert_eq!(GrpcConnectionBackoff::builder().initial(Duration::ZERO).build().unwrap_err().field(), "initial");
    /// ```
    pub fn build(self) -> Result<GrpcConnectionBackoff, ConfigError> {
        let component = "grpc connection backoff";
        for (field, value) in [("initial", self.initial), ("max_backoff", self.max)] {
            if value.is_zero() {
                return Err(ConfigError::new(
                    component,
                    field,
                    "must be greater than zero (a zero backoff reconnects in a loop with no delay)",
                    value,
                ));
            }
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return Err(ConfigError::new(
                component,
                "multiplier",
                "must be a finite number >= 1",
                self.multiplier,
            ));
        }
        Jitter::Proportional(self.jitter).validate(component)?;
        let mut schedule = Backoff::grpc_go()
            .initial(self.initial)
            .multiplier(self.multiplier)
            .jitter(Jitter::Proportional(self.jitter))
            .max_delay(self.max)
            .build()?;
        schedule.seed = self.seed;
        Ok(GrpcConnectionBackoff {
            initial: self.initial,
            multiplier: self.multiplier,
            jitter: self.jitter,
            max: self.max,
            min_connect_timeout: self.min_connect_timeout,
            schedule,
        })
    }
}

/// One connection attempt's two instants.
///
/// ```
/// use std::time::Instant;
/// let now = Instant::now();
/// let a = steadfast::backoff::GrpcConnectionBackoff::default().connection(steadfast::backoff::Rng::with_seed(0)).next_attempt(now);
/// assert!(a.connect_deadline >= a.retry_at);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectAttempt {
    /// The deadline of this attempt: `max(current_deadline, now + MIN_CONNECT_TIMEOUT)`.
    pub connect_deadline: Instant,
    /// If this attempt fails, sleep until this instant (`current_deadline`)
    /// before the next one.
    pub retry_at: Instant,
}

/// The backoff state of one connection: call [`next_attempt`](Self::next_attempt)
/// with the current time before each attempt, and [`reset`](Self::reset)
/// once a connection is accepted. Holds no clock: the caller passes `now`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use steadfast::backoff::{GrpcConnectionBackoff, Rng};
/// let mut conn = GrpcConnectionBackoff::default().connection(Rng::with_seed(7));
/// let mut now = Instant::now();
/// let first = conn.next_attempt(now);   // attempt 1: deadline now + 20 s
/// // ... the attempt fails at once; sleep until first.retry_at (now + 1 s) ...
/// now = first.retry_at;
/// let second = conn.next_attempt(now); // backoff 1.6 s ± 20 %
/// let wait = second.retry_at - now;
/// assert!(wait >= Duration::from_millis(1280) && wait <= Duration::from_millis(1920));
/// assert_eq!(second.connect_deadline, now + Duration::from_secs(20));
/// conn.reset(); // connected
/// assert_eq!(conn.next_attempt(now).retry_at, now + Duration::from_secs(1));
/// ```
#[derive(Debug, Clone)]
pub struct ConnectionBackoff {
    config: GrpcConnectionBackoff,
    rng: Rng,
    /// current_backoff in nanoseconds (unjittered, capped).
    current_backoff: f64,
    /// Attempts since the last reset.
    attempts: u32,
}

impl ConnectionBackoff {
    /// Starts an attempt at `now`: the first since a reset gets
    /// `current_deadline = now + INITIAL_BACKOFF` (no jitter); each later one
    /// `current_backoff = min(current_backoff * MULTIPLIER, MAX_BACKOFF)` and
    /// `current_deadline = now + current_backoff ± JITTER * current_backoff`.
    /// Returns the attempt's connect deadline and the instant to retry at.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use steadfast::backoff::{GrpcConnectionBackoff, Rng};
    /// let mut conn = GrpcConnectionBackoff::default().connection(Rng::with_seed(3));
    /// let start = Instant::now();
    /// let mut now = start;
    /// for _ in 0..12 {
    ///     let attempt = conn.next_attempt(now);
    ///     // A failed attempt that took its whole connect timeout:
    ///     now = attempt.connect_deadline.max(attempt.retry_at);
    /// }
    /// assert_eq!(conn.current_backoff(), Duration::from_secs(120));
    /// ```
    pub fn next_attempt(&mut self, now: Instant) -> ConnectAttempt {
        let config = &self.config;
        let wait = if self.attempts == 0 {
            self.current_backoff = nanos(config.initial);
            self.current_backoff
        } else {
            self.current_backoff =
                (self.current_backoff * config.multiplier).min(nanos(config.max));
            Jitter::Proportional(config.jitter).apply(self.current_backoff, &mut self.rng)
        };
        self.attempts = self.attempts.saturating_add(1);
        let retry_at = saturating_add(now, duration_from_nanos(wait));
        let min_deadline = saturating_add(now, config.min_connect_timeout);
        ConnectAttempt {
            connect_deadline: retry_at.max(min_deadline),
            retry_at,
        }
    }

    /// A connection was accepted: the next attempt starts the curve over.
    ///
    /// ```
    /// let mut conn = steadfast::backoff::GrpcConnectionBackoff::default().connection(steadfast::backoff::Rng::with_seed(0));
    /// conn.next_attempt(std::time::Instant::now());
    /// conn.reset();
    /// assert_eq!(conn.attempts(), 0);
    /// ```
    pub fn reset(&mut self) {
        self.attempts = 0;
        self.current_backoff = 0.0;
    }

    /// Attempts started since the last reset.
    ///
    /// ```
    /// let mut conn = steadfast::backoff::GrpcConnectionBackoff::default().connection(steadfast::backoff::Rng::with_seed(0));
    /// conn.next_attempt(std::time::Instant::now());
    /// assert_eq!(conn.attempts(), 1);
    /// ```
    #[must_use]
    pub const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The current (unjittered, capped) backoff: `current_backoff` of the spec.
    ///
    /// ```
    /// let mut conn = steadfast::backoff::GrpcConnectionBackoff::default().connection(steadfast::backoff::Rng::with_seed(0));
    /// let now = std::time::Instant::now();
    /// conn.next_attempt(now);
    /// conn.next_attempt(now);
    /// assert_eq!(conn.current_backoff(), std::time::Duration::from_millis(1600));
    /// ```
    #[must_use]
    pub fn current_backoff(&self) -> Duration {
        duration_from_nanos(self.current_backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_backoff_is_refused() {
        let e = GrpcConnectionBackoff::builder()
            .initial(Duration::ZERO)
            .build()
            .unwrap_err();
        assert_eq!(e.field(), "initial");
        assert!(e.to_string().contains("greater than zero"), "{e}");
        let e = GrpcConnectionBackoff::builder()
            .max_backoff(Duration::ZERO)
            .build()
            .unwrap_err();
        assert_eq!(e.field(), "max_backoff");
        // The smallest non-zero values are fine.
        let c = GrpcConnectionBackoff::builder()
            .initial(Duration::from_nanos(1))
            .max_backoff(Duration::from_nanos(1))
            .build()
            .unwrap();
        let mut conn = c.connection(Rng::with_seed(3));
        let now = Instant::now();
        assert!(conn.next_attempt(now).retry_at > now);
    }

    #[test]
    fn known_answer_unjittered_backoffs() {
        let mut conn = GrpcConnectionBackoff::default().connection(Rng::with_seed(0));
        let now = Instant::now();
        let expected_ms = [
            1000.0,
            1600.0,
            2560.0,
            4096.0,
            6553.6,
            10485.76,
            16777.216,
            26843.5456,
            42949.67296,
            68719.476736,
            109951.1627776,
            120000.0,
            120000.0,
        ];
        for want in expected_ms {
            let a = conn.next_attempt(now);
            let got = conn.current_backoff().as_secs_f64() * 1000.0;
            assert!((got - want).abs() < 1e-3, "{got} vs {want}");
            let wait = (a.retry_at - now).as_secs_f64() * 1000.0;
            assert!(wait >= want * 0.8 - 1e-3 && wait <= want * 1.2 + 1e-3);
            let timeout = a.connect_deadline - now;
            assert_eq!(
                timeout,
                (a.retry_at - now).max(Duration::from_secs(20)),
                "connect deadline is max(current_deadline, now + 20 s)"
            );
        }
    }

    #[test]
    fn reset_starts_over_and_schedule_matches_grpc_go() {
        let config = GrpcConnectionBackoff::builder().seed(3).build().unwrap();
        let mut conn = config.connection(Rng::with_seed(3));
        let now = Instant::now();
        let mut state = ScheduleState::new();
        let mut rng = Rng::with_seed(3);
        for _ in 0..20 {
            let a = conn.next_attempt(now);
            let d = config.next_delay(&mut state, &mut rng).unwrap();
            assert_eq!(a.retry_at - now, d);
        }
        conn.reset();
        assert_eq!(
            conn.next_attempt(now).retry_at - now,
            Duration::from_secs(1)
        );
    }

    #[test]
    fn huge_values_never_panic() {
        let config = GrpcConnectionBackoff::builder()
            .initial(Duration::MAX)
            .max_backoff(Duration::MAX)
            .min_connect_timeout(Duration::MAX)
            .multiplier(1e300)
            .jitter(1.0)
            .build()
            .unwrap();
        let mut conn = config.connection(Rng::with_seed(1));
        let now = Instant::now();
        for _ in 0..5 {
            let a = conn.next_attempt(now);
            assert!(a.connect_deadline >= a.retry_at && a.retry_at >= now);
        }
    }

    #[test]
    fn default_matches_builder() {
        assert_eq!(
            GrpcConnectionBackoff::default(),
            GrpcConnectionBackoff::builder().build().unwrap()
        );
        assert_eq!(
            Backoff::DEFAULT_GRPC_GO,
            Backoff::grpc_go().build().unwrap()
        );
    }

    #[test]
    fn invalid_settings() {
        for m in [f64::NAN, f64::INFINITY, 0.0, -1.0, 0.9] {
            let e = GrpcConnectionBackoff::builder()
                .multiplier(m)
                .build()
                .unwrap_err();
            assert_eq!(e.field(), "multiplier");
        }
        for j in [f64::NAN, -0.1, 1.1] {
            let e = GrpcConnectionBackoff::builder()
                .jitter(j)
                .build()
                .unwrap_err();
            assert_eq!(e.field(), "jitter");
        }
    }
}
