//! gRFC A6 retry backoff: `min(initialBackoff * multiplier^(n-1), maxBackoff)`, jittered.

use super::Backoff;
use super::builder::{BackoffBuilder, Kind};

impl Backoff {
    /// gRFC A6 ("gRPC Retry Design") retry backoff, as the specification
    /// stands since 2024: retry `n` (1-based) waits
    /// `min(initialBackoff * backoffMultiplier^(n-1), maxBackoff) * U(0.8, 1.2)`.
    ///
    /// The ±20 % is part of the specification, so the delay may exceed
    /// `maxBackoff` by up to 20 % (the cap does not hold after jitter here)
    /// and setting a [`Jitter`](crate::Jitter) is an error. The multiplier
    /// need only be `> 0` (A6's rule). Defaults are the gRFC's example
    /// (initial 0.1 s, max 1 s, multiplier 2); a service config sets its own.
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
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::{Backoff, Jitter, Rng, Schedule, ScheduleState};

    const ENVELOPES: [f64; 8] = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0];

    #[test]
    fn known_answer_envelopes_within_jitter() {
        for seed in 0..200 {
            let b = Backoff::grpc_a6().seed(seed).build().unwrap();
            let legacy = Backoff::grpc_a6_legacy().seed(seed).build().unwrap();
            for ((d, l), env) in b.delays().zip(legacy.delays()).zip(ENVELOPES) {
                let (d, l) = (d.as_secs_f64(), l.as_secs_f64());
                assert!(
                    d >= env * 0.8 - 1e-9 && d <= env * 1.2 + 1e-9,
                    "{d} vs {env}"
                );
                assert!((0.0..=env + 1e-9).contains(&l), "{l} vs {env}");
            }
        }
    }

    #[test]
    fn means_are_envelope_and_half_envelope() {
        let (mut sum, mut sum_legacy) = (0.0, 0.0);
        let n = 20_000;
        for seed in 0..n {
            let mut rng = Rng::with_seed(seed);
            let b = Backoff::grpc_a6().build().unwrap();
            let l = Backoff::grpc_a6_legacy().build().unwrap();
            sum += b.delay_at(4, &mut rng).as_secs_f64();
            sum_legacy += l.delay_at(4, &mut rng).as_secs_f64();
        }
        let (m, ml) = (sum / n as f64, sum_legacy / n as f64);
        assert!((m - 1.0).abs() < 0.005, "{m}");
        assert!((ml - 0.5).abs() < 0.01, "{ml}");
    }

    #[test]
    fn multiplier_below_one_is_allowed_but_not_zero() {
        let b = Backoff::grpc_a6()
            .multiplier(0.5)
            .initial(Duration::from_secs(1))
            .max_delay(Duration::from_secs(10))
            .build()
            .unwrap();
        let mut s = ScheduleState::new();
        let mut rng = Rng::with_seed(0);
        let first = b.next_delay(&mut s, &mut rng).unwrap();
        assert!(first >= Duration::from_millis(800));
        let err = Backoff::grpc_a6().multiplier(0.0).build().unwrap_err();
        assert_eq!(err.rule(), "must be a finite number > 0");
        assert_eq!(
            Backoff::grpc_a6()
                .jitter(Jitter::Full)
                .build()
                .unwrap_err()
                .field(),
            "jitter"
        );
    }

    #[test]
    fn max_attempts_counts_the_original_call() {
        let b = Backoff::grpc_a6().max_attempts(5).build().unwrap();
        assert_eq!(b.delays().count(), 4);
    }
}
