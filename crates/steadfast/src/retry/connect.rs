//! Connect with a deadline: keep trying to connect, with gRPC connection
//! backoff, until a connection is ready or the deadline passes (gRPC's
//! blocking dial: `DialContext` with `WithBlock`).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use super::Retryable;
use crate::backoff::GrpcConnectionBackoff;
use crate::call::{Attempt, RetryError, Verdict};
use crate::clock::AsyncClock;
use crate::config_error::ConfigError;
use crate::deadline::{Deadline, current, timeout_at};
use crate::policy::RetryPolicy;
use crate::rng::Rng;

/// Why one connection attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectFailure<E> {
    /// The connect function returned this error.
    Error(E),
    /// The attempt ran out of time: its connect deadline,
    /// `max(current_deadline, now + MIN_CONNECT_TIMEOUT)` capped by the
    /// overall deadline, passed first.
    TimedOut,
}

impl<E: fmt::Display> fmt::Display for ConnectFailure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Error(e) => write!(f, "connect failed: {e}"),
            Self::TimedOut => f.write_str("connect attempt timed out"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ConnectFailure<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Error(e) => Some(e),
            Self::TimedOut => None,
        }
    }
}

/// Connects with a deadline, on the retry engine driven by the gRPC
/// connection backoff.
///
/// Each attempt starts with [`ConnectionBackoff::next_attempt`] and gets the
/// deadline `min(overall, max(current_deadline, now + MIN_CONNECT_TIMEOUT))`
/// (given to the connect function in [`Attempt::deadline`], and enforced). If
/// it fails, the next attempt starts at `current_deadline` (the spec's
/// `SleepUntil`), measured from the start of the failed attempt, not its end.
/// The wait is handed to the retry engine as a server-style hint
/// ([`Verdict::RetryAfter`]), so the engine's rules hold: a wait that would
/// end at or past the deadline is not started, and the call stops with
/// [`StopReason::Deadline`](crate::call::StopReason::Deadline) ("deadline
/// exceeded"). The overall deadline is the earliest of the one given and the
/// ambient [`current`](crate::deadline::current) one. Dropping the future stops
/// everything.
///
/// ```
/// use std::time::Duration;
/// use steadfast::backoff::GrpcConnectionBackoff;
/// use steadfast::{Deadline, StopReason};
/// use steadfast::clock::{Clock, VirtualClock};
/// use steadfast::retry::{ConnectFailure, Connector};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), steadfast::ConfigError> {
/// let clock = VirtualClock::new();
/// let connector = Connector::builder(clock.clone()).seed(7).build()?;
///
/// // The server accepts the third attempt.
/// let deadline = Deadline::after(clock.now(), Duration::from_secs(30));
/// let conn = connector
///     .connect(deadline, |attempt| async move {
///         if attempt.number < 3 { Err("connection refused") } else { Ok("connected") }
///     })
///     .await;
/// assert_eq!(conn, Ok("connected"));
///
/// // A server that never answers: give up at the deadline.
/// let deadline = Deadline::after(clock.now(), Duration::from_secs(5));
/// let err = connector
///     .connect(deadline, |_| async { Err::<(), _>("connection refused") })
///     .await
///     .unwrap_err();
/// assert_eq!(err.reason(), StopReason::Deadline);
/// assert_eq!(err.last_error(), Some(&ConnectFailure::Error("connection refused")));
/// assert!(clock.now() <= deadline.instant()); // no wait past the deadline
/// # Ok(())
/// # }
/// ```
///
/// [`ConnectionBackoff::next_attempt`]: crate::backoff::ConnectionBackoff::next_attempt
#[derive(Debug, Clone)]
pub struct Connector<C> {
    clock: C,
    backoff: GrpcConnectionBackoff,
    policy: RetryPolicy<GrpcConnectionBackoff>,
    seed: Option<u64>,
    name: &'static str,
}

/// Builds a [`Connector`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build()`"]
pub struct ConnectorBuilder<C> {
    clock: C,
    backoff: GrpcConnectionBackoff,
    max_attempts: u32,
    seed: Option<u64>,
    name: &'static str,
}

impl<C: AsyncClock> Connector<C> {
    /// A builder: the spec's connection backoff, attempts unlimited (until
    /// the deadline), jitter from entropy.
    ///
    /// ```
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::retry::Connector;
    /// let connector = Connector::builder(VirtualClock::new()).build()?;
    /// # let _ = connector;
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn builder(clock: C) -> ConnectorBuilder<C> {
        ConnectorBuilder {
            clock,
            backoff: GrpcConnectionBackoff::default(),
            max_attempts: u32::MAX,
            seed: None,
            name: "connect",
        }
    }

    /// Tries `connect` until it returns `Ok` or `deadline` passes.
    ///
    /// # Errors
    ///
    /// A [`RetryError`] whose reason is
    /// [`StopReason::Deadline`](crate::call::StopReason::Deadline) when the
    /// deadline passed (or no further attempt could start before it), or
    /// [`StopReason::Exhausted`](crate::call::StopReason::Exhausted) when a
    /// configured attempt limit ran out; its last error is the last
    /// attempt's [`ConnectFailure`].
    pub async fn connect<F, Fut, T, E>(
        &self,
        deadline: Deadline,
        mut connect: F,
    ) -> Result<T, RetryError<ConnectFailure<E>>>
    where
        F: FnMut(Attempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let overall = deadline.min(current().unwrap_or(deadline));
        let mut conn = self.backoff.connection(Rng::seeded_or_entropy(self.seed));
        let clock = &self.clock;
        let op = |attempt: Attempt| {
            let plan = conn.next_attempt(clock.now());
            let attempt_deadline = overall.min(Deadline::at(plan.connect_deadline));
            let fut = connect(Attempt {
                number: attempt.number,
                deadline: Some(attempt_deadline),
                ..attempt
            });
            let clock = clock.clone();
            async move {
                let failure = match timeout_at(clock.clone(), attempt_deadline, fut).await {
                    Ok(Ok(connection)) => return Ok(connection),
                    Ok(Err(e)) => ConnectFailure::Error(e),
                    Err(_) => ConnectFailure::TimedOut,
                };
                // SleepUntil(current_deadline): from now, what is left of it.
                let wait = Deadline::at(plan.retry_at).remaining(clock.now());
                Err(Failed { failure, wait })
            }
        };
        let result = op
            .retry(&self.policy)
            .clock(self.clock.clone())
            .deadline(overall)
            .name(self.name)
            .classify(|outcome: &Result<T, Failed<E>>| match outcome {
                Ok(_) => Verdict::Success,
                Err(failed) => Verdict::RetryAfter(failed.wait),
            })
            .await;
        result.map_err(|err| {
            let (reason, attempts, elapsed) = (err.reason(), err.attempts(), err.elapsed());
            let (refused, timed_out) = (err.refusal(), err.timed_out());
            let last = err.into_last_error().map(|f| f.failure);
            let err = RetryError::new(reason, last, attempts, elapsed)
                .with_name(self.name)
                .with_timed_out(timed_out);
            match refused {
                Some(refused) => err.with_refusal(refused),
                None => err,
            }
        })
    }
}

/// A failed attempt and how long to wait before the next one.
struct Failed<E> {
    failure: ConnectFailure<E>,
    wait: Duration,
}

impl<C: AsyncClock> ConnectorBuilder<C> {
    /// The connection backoff (default: the spec's values).
    ///
    /// ```
    /// use std::time::Duration;
    /// use steadfast::backoff::GrpcConnectionBackoff;
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::retry::Connector;
    ///
    /// let backoff = GrpcConnectionBackoff::builder().min_connect_timeout(Duration::from_secs(5)).build()?;
    /// let connector = Connector::builder(VirtualClock::new()).backoff(backoff).build()?;
    /// # let _ = connector;
    /// # Ok::<(), steadfast::ConfigError>(())
    /// ```
    pub fn backoff(mut self, backoff: GrpcConnectionBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The most attempts per `connect` call, counting the first (default:
    /// unlimited, only the deadline stops it).
    ///
    /// ```
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::retry::Connector;
    /// let err = Connector::builder(VirtualClock::new()).max_attempts(0).build().unwrap_err();
    /// assert_eq!(err.field(), "max_attempts");
    /// ```
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Seeds the jitter (default: entropy).
    ///
    /// ```
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::retry::Connector;
    /// assert!(Connector::builder(VirtualClock::new()).seed(1).build().is_ok());
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Names the operation in errors and telemetry (default `"connect"`).
    ///
    /// ```
    /// use steadfast::clock::VirtualClock;
    /// use steadfast::retry::Connector;
    /// assert!(Connector::builder(VirtualClock::new()).name("dial db").build().is_ok());
    /// ```
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// Checks the settings.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when `max_attempts` is 0.
    pub fn build(self) -> Result<Connector<C>, ConfigError> {
        if self.max_attempts == 0 {
            return Err(ConfigError::new(
                "connector",
                "max_attempts",
                "must be at least 1 (it counts the first attempt)",
                self.max_attempts,
            ));
        }
        // The waits come from the connection backoff itself (as hints), so
        // the policy neither caps them nor draws its own.
        let policy = RetryPolicy::with_schedule(self.backoff)
            .max_attempts(self.max_attempts)
            .max_delay(Duration::MAX)
            .build()?;
        Ok(Connector {
            clock: self.clock,
            backoff: self.backoff,
            policy,
            seed: self.seed,
            name: self.name,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::time::Instant;

    use super::*;
    use crate::call::StopReason;
    use crate::clock::{Clock, VirtualClock};

    const S: fn(u64) -> Duration = Duration::from_secs;

    /// Records (start offset, attempt deadline offset) of every attempt.
    type Log = RefCell<Vec<(Duration, Duration)>>;

    fn record(log: &Log, clock: &VirtualClock, attempt: Attempt) {
        let start = clock.now() - clock.start();
        let deadline = attempt.deadline.expect("every attempt has a deadline");
        log.borrow_mut()
            .push((start, deadline.instant() - clock.start()));
    }

    #[tokio::test]
    async fn attempts_follow_the_connection_backoff_until_one_succeeds() {
        let clock = VirtualClock::new();
        let seed = 11;
        let connector = Connector::builder(clock.clone())
            .seed(seed)
            .build()
            .unwrap();
        let log = Log::default();
        let deadline = Deadline::after(clock.now(), S(600));
        let result = connector
            .connect(deadline, |attempt| {
                record(&log, &clock, attempt);
                async move {
                    if attempt.number < 6 {
                        Err("refused")
                    } else {
                        Ok(attempt.number)
                    }
                }
            })
            .await;
        assert_eq!(result, Ok(6));

        // The same backoff, replayed by hand: each attempt starts when the
        // previous one's current_deadline says, with its connect deadline.
        let mut expected = GrpcConnectionBackoff::default().connection(Rng::with_seed(seed));
        let t0: Instant = clock.start();
        let mut now = t0;
        for &(start, attempt_deadline) in log.borrow().iter() {
            assert_eq!(start, now - t0);
            let plan = expected.next_attempt(now);
            assert_eq!(attempt_deadline, plan.connect_deadline - t0);
            assert!(attempt_deadline >= start + GrpcConnectionBackoff::MIN_CONNECT_TIMEOUT);
            now = plan.retry_at;
        }
        assert_eq!(log.borrow().len(), 6);
        assert_eq!(
            log.borrow()[1].0,
            S(1),
            "INITIAL_BACKOFF after the first failure"
        );
    }

    #[tokio::test]
    async fn a_hanging_attempt_is_cut_at_its_connect_deadline() {
        let clock = VirtualClock::new();
        let connector = Connector::builder(clock.clone()).seed(1).build().unwrap();
        let log = Log::default();
        let deadline = Deadline::after(clock.now(), S(50));
        let result = connector
            .connect(deadline, |attempt| {
                record(&log, &clock, attempt);
                async move {
                    if attempt.number == 1 {
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, &str>(attempt.number)
                }
            })
            .await;
        assert_eq!(result, Ok(2));
        let log = log.borrow();
        // Attempt 1: deadline max(1 s, 20 s) = 20 s; it hangs and is cut at
        // 20 s; its current_deadline (1 s) has long passed: no wait.
        assert_eq!(log[0], (Duration::ZERO, S(20)));
        assert_eq!(log[1].0, S(20));
    }

    #[tokio::test]
    async fn gives_up_at_the_deadline_without_starting_a_late_attempt() {
        let clock = VirtualClock::new();
        let connector = Connector::builder(clock.clone()).seed(3).build().unwrap();
        let log = Log::default();
        let deadline = Deadline::after(clock.now(), S(10));
        let err = connector
            .connect(deadline, |attempt| {
                record(&log, &clock, attempt);
                async { Err::<(), _>("refused") }
            })
            .await
            .unwrap_err();
        assert_eq!(err.reason(), StopReason::Deadline);
        assert_eq!(err.last_error(), Some(&ConnectFailure::Error("refused")));
        assert_eq!(err.name(), Some("connect"));
        assert!(clock.elapsed() < S(10), "no wait past the deadline");
        for &(start, attempt_deadline) in log.borrow().iter() {
            assert!(start < S(10));
            assert!(attempt_deadline <= S(10), "capped by the overall deadline");
        }
        // 0, 1, ~2.6, ~5.2, ~9.3 (± jitter): four or five attempts fit.
        assert!((4..=5).contains(&log.borrow().len()), "{:?}", log.borrow());
    }

    #[tokio::test]
    async fn a_hanging_server_times_out_at_the_overall_deadline() {
        let clock = VirtualClock::new();
        let connector = Connector::builder(clock.clone()).build().unwrap();
        let deadline = Deadline::after(clock.now(), S(7));
        let err = connector
            .connect(deadline, |_| std::future::pending::<Result<(), &str>>())
            .await
            .unwrap_err();
        assert_eq!(err.reason(), StopReason::Deadline);
        assert_eq!(err.attempts(), 1);
        assert_eq!(clock.elapsed(), S(7));
    }

    #[tokio::test]
    async fn the_ambient_deadline_bounds_the_connect() {
        let clock = VirtualClock::new();
        let connector = Connector::builder(clock.clone()).build().unwrap();
        let ambient = Deadline::after(clock.now(), S(3));
        let given = Deadline::after(clock.now(), S(100));
        let err = crate::deadline::scope_async(
            ambient,
            connector.connect(given, |_| std::future::pending::<Result<(), &str>>()),
        )
        .await
        .unwrap_err();
        assert_eq!(err.reason(), StopReason::Deadline);
        assert_eq!(clock.elapsed(), S(3));
    }

    #[test]
    fn the_connect_future_is_send() {
        fn assert_send<T: Send>(_: &T) {}
        let clock = VirtualClock::new();
        let connector = Connector::builder(clock.clone()).build().unwrap();
        let fut = connector.connect(Deadline::after(clock.now(), S(1)), |_| async {
            Err::<(), _>(std::io::Error::other("refused"))
        });
        assert_send(&fut);
    }

    #[tokio::test]
    async fn attempt_limit() {
        let clock = VirtualClock::new();
        let connector = Connector::builder(clock.clone())
            .max_attempts(2)
            .build()
            .unwrap();
        let err = connector
            .connect(Deadline::after(clock.now(), S(600)), |_| async {
                Err::<(), _>("refused")
            })
            .await
            .unwrap_err();
        assert_eq!((err.reason(), err.attempts()), (StopReason::Exhausted, 2));
    }
}
