//! gRPC retry throttling (gRFC A6), exactly.

use std::fmt;

use super::{Outcome, Refusal, RefusingFlag, RetryControl, report_transition};
use crate::config_error::ConfigError;
use crate::sync::{AtomicU64, CachePadded, Ordering};

const NAME: &str = "token bucket";

/// One token, in the fixed-point unit the bucket counts in.
const MILLI: u64 = 1000;

/// gRPC's retry throttling, exactly as gRFC A6 ("Throttling Retry Attempts
/// and Hedged RPCs") specifies it.
///
/// - `token_count` starts at `maxTokens` and always stays in `[0, maxTokens]`;
/// - every failed attempt takes 1 token (never below 0); only failures that
///   would have been retried count, which is what
///   [`Outcome::RetryableFailure`] means;
/// - every successful attempt adds `tokenRatio` (never above `maxTokens`);
/// - retries and hedges are refused while `token_count <= maxTokens / 2`.
///   First attempts are always sent.
///
/// The spec's bounds: `0 < maxTokens <= 1000` (the service config proto) and
/// `tokenRatio > 0` with up to 3 decimal places: `0.5466` acts as `0.546`.
/// The bucket therefore counts in milli-tokens, in one atomic integer updated
/// by compare-and-swap, never in floats; with `maxTokens` 10 and
/// `tokenRatio` 0.1 (the spec's example) retries stop once failures exceed
/// about 10 % of successes.
///
/// ```
/// use steadfast::control::{Outcome, RetryControl, TokenBucket};
///
/// # fn main() -> Result<(), steadfast::ConfigError> {
/// let bucket = TokenBucket::builder().max_tokens(10).token_ratio(0.1).build()?;
/// for _ in 0..4 {
///     bucket.record(Outcome::RetryableFailure); // 10 -> 6 tokens
/// }
/// assert!(bucket.allow_retry().is_ok());
/// bucket.record(Outcome::RetryableFailure); // 5 tokens: 5 <= 10 / 2
/// assert_eq!(bucket.allow_retry().unwrap_err().by, "token bucket");
/// bucket.record(Outcome::Success); // 5.1 tokens
/// assert!(bucket.allow_retry().is_ok());
/// assert_eq!(bucket.milli_tokens(), 5100);
/// # Ok(()) }
/// ```
pub struct TokenBucket {
    /// On its own cache line: every report on a bucket below the cap writes
    /// it, and the settings beside it are read on every call.
    milli_tokens: CachePadded<AtomicU64>,
    max_milli: u64,
    ratio_milli: u64,
    refusals: AtomicU64,
    flag: RefusingFlag,
}

/// Builds a [`TokenBucket`]; see [`TokenBucket::builder`].
///
/// ```
/// use steadfast::control::TokenBucket;
/// let err = TokenBucket::builder().token_ratio(f64::NAN).build().unwrap_err();
/// assert_eq!(err.field(), "tokenRatio");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucketBuilder {
    max_tokens: u32,
    ratio: Ratio,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ratio {
    Decimal(f64),
    Milli(u32),
}

/// The state of a [`TokenBucket`] at one moment, for telemetry.
///
/// ```
/// use steadfast::control::TokenBucket;
/// let snap = TokenBucket::builder().build().unwrap().snapshot();
/// assert_eq!(snap.milli_tokens, 10_000);
/// assert_eq!(snap.tokens(), 10.0);
/// assert!(!snap.throttled);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucketSnapshot {
    /// Tokens now, in thousandths of a token.
    pub milli_tokens: u64,
    /// `maxTokens`, in thousandths of a token.
    pub max_milli_tokens: u64,
    /// `tokenRatio`, in thousandths of a token (after truncation).
    pub ratio_milli_tokens: u64,
    /// Whether retries and hedges are refused now (`tokens <= maxTokens / 2`).
    pub throttled: bool,
    /// Retries and hedges refused so far.
    pub refusals: u64,
}

impl TokenBucketSnapshot {
    /// Tokens now, as a decimal number (for display; the bucket itself never
    /// counts in floats).
    #[must_use]
    pub fn tokens(&self) -> f64 {
        self.milli_tokens as f64 / MILLI as f64
    }
}

impl TokenBucket {
    /// A builder with the spec's example settings: `maxTokens` 10,
    /// `tokenRatio` 0.1.
    ///
    /// ```
    /// use steadfast::control::TokenBucket;
    /// let bucket = TokenBucket::builder().max_tokens(100).token_ratio(0.5466).build().unwrap();
    /// assert_eq!(bucket.snapshot().ratio_milli_tokens, 546);
    /// ```
    #[must_use]
    pub const fn builder() -> TokenBucketBuilder {
        TokenBucketBuilder {
            max_tokens: 10,
            ratio: Ratio::Milli(100),
        }
    }

    /// Tokens now, in thousandths of a token.
    ///
    /// ```
    /// use steadfast::control::{Outcome, RetryControl, TokenBucket};
    /// let bucket = TokenBucket::builder().build().unwrap();
    /// bucket.record(Outcome::RetryableFailure);
    /// assert_eq!(bucket.milli_tokens(), 9000);
    /// ```
    #[must_use]
    pub fn milli_tokens(&self) -> u64 {
        self.milli_tokens.0.load(Ordering::Acquire)
    }

    /// The current state, for telemetry.
    ///
    /// ```
    /// use steadfast::control::{Outcome, RetryControl, TokenBucket};
    /// let bucket = TokenBucket::builder().max_tokens(2).build().unwrap();
    /// bucket.record(Outcome::RetryableFailure);
    /// assert!(bucket.snapshot().throttled); // 1 <= 2 / 2
    /// ```
    #[must_use]
    pub fn snapshot(&self) -> TokenBucketSnapshot {
        let milli_tokens = self.milli_tokens();
        TokenBucketSnapshot {
            milli_tokens,
            max_milli_tokens: self.max_milli,
            ratio_milli_tokens: self.ratio_milli,
            throttled: self.throttled_at(milli_tokens),
            refusals: self.refusals.load(Ordering::Relaxed),
        }
    }

    /// `token_count <= maxTokens / 2`, exactly: `max_milli` is a multiple of
    /// 1000, so halving it is exact.
    #[inline]
    fn throttled_at(&self, milli_tokens: u64) -> bool {
        milli_tokens <= self.max_milli / 2
    }

    /// Moves the count by one CAS; returns the new count, or `None` when the
    /// count is already at the bound (no write at all).
    #[inline]
    fn update(&self, outcome: Outcome) -> Option<u64> {
        let mut old = self.milli_tokens.0.load(Ordering::Relaxed);
        loop {
            let new = match outcome {
                Outcome::RetryableFailure => old.saturating_sub(MILLI),
                Outcome::Success => old.saturating_add(self.ratio_milli).min(self.max_milli),
            };
            if new == old {
                return None;
            }
            match self.milli_tokens.0.compare_exchange_weak(
                old,
                new,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(new),
                Err(current) => old = current,
            }
        }
    }
}

impl TokenBucketBuilder {
    /// `maxTokens`: the bucket's size and starting count; `0 < maxTokens <= 1000`.
    #[must_use]
    pub const fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// `tokenRatio`: tokens added per success; must be finite and `> 0`, and
    /// only its first 3 decimal places count (`0.5466` acts as `0.546`, as
    /// gRPC does). The digits are taken from the shortest decimal that
    /// round-trips to this `f64` (what a JSON service config wrote), so
    /// `0.29` is 290 milli-tokens, not 289.
    #[must_use]
    pub const fn token_ratio(mut self, ratio: f64) -> Self {
        self.ratio = Ratio::Decimal(ratio);
        self
    }

    /// `tokenRatio` given exactly, in thousandths of a token (`100` = 0.1).
    #[must_use]
    pub const fn token_ratio_milli(mut self, milli: u32) -> Self {
        self.ratio = Ratio::Milli(milli);
        self
    }

    /// Checks the settings and builds a full bucket.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when `maxTokens` is 0 or above 1000, or `tokenRatio`
    /// is NaN, infinite, negative, zero, or zero after truncation to 3
    /// decimal places.
    pub fn build(self) -> Result<TokenBucket, ConfigError> {
        if self.max_tokens == 0 || self.max_tokens > 1000 {
            return Err(ConfigError::new(
                NAME,
                "maxTokens",
                "must be in 1..=1000",
                self.max_tokens,
            ));
        }
        let ratio_milli = match self.ratio {
            Ratio::Milli(milli) => u64::from(milli),
            Ratio::Decimal(ratio) => {
                if !ratio.is_finite() || ratio <= 0.0 {
                    return Err(ConfigError::new(
                        NAME,
                        "tokenRatio",
                        "must be a finite number > 0",
                        ratio,
                    ));
                }
                truncated_milli(ratio)
            }
        };
        if ratio_milli == 0 {
            return Err(ConfigError::new(
                NAME,
                "tokenRatio",
                "must be at least 0.001 (only 3 decimal places count)",
                self.ratio,
            ));
        }
        let max_milli = u64::from(self.max_tokens) * MILLI;
        Ok(TokenBucket {
            milli_tokens: CachePadded(AtomicU64::new(max_milli)),
            max_milli,
            ratio_milli,
            refusals: AtomicU64::new(0),
            flag: RefusingFlag::new(),
        })
    }
}

/// `value` (finite, positive) in thousandths, the digits after the third
/// decimal place dropped, read from the shortest round-trip decimal form so
/// binary representation error cannot lose a unit. Saturates at `u64::MAX`.
fn truncated_milli(value: f64) -> u64 {
    // `Display` for f64 writes the shortest round-trip decimal, never with an
    // exponent.
    let text = value.to_string();
    let (int, frac) = text.split_once('.').unwrap_or((text.as_str(), ""));
    let mut milli: u64 = 0;
    for digit in int
        .bytes()
        .chain(frac.bytes().chain(std::iter::repeat(b'0')).take(3))
    {
        let d = u64::from(digit.wrapping_sub(b'0'));
        milli = match milli.checked_mul(10).and_then(|m| m.checked_add(d)) {
            Some(m) => m,
            None => return u64::MAX,
        };
    }
    milli
}

impl RetryControl for TokenBucket {
    fn name(&self) -> &'static str {
        NAME
    }

    #[inline]
    fn record(&self, outcome: Outcome) {
        if let Some(new) = self.update(outcome) {
            // Refusing at the threshold; recovered at 3/4 of maxTokens.
            let recovered = 4 * new >= 3 * self.max_milli;
            if let Some(now_refusing) = self.flag.note(self.throttled_at(new), recovered) {
                report_transition(NAME, now_refusing, &self.snapshot());
            }
        }
    }

    #[inline]
    fn allow_retry(&self) -> Result<(), Refusal> {
        if self.throttled_at(self.milli_tokens.0.load(Ordering::Acquire)) {
            self.refusals.fetch_add(1, Ordering::Relaxed);
            Err(Refusal { by: NAME })
        } else {
            Ok(())
        }
    }
}

impl fmt::Debug for TokenBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBucket")
            .field("state", &self.snapshot())
            .finish()
    }
}

/// The sequential rule, for the model-based tests.
#[cfg(test)]
fn model_step(tokens: u64, max: u64, ratio: u64, outcome: Outcome) -> u64 {
    match outcome {
        Outcome::RetryableFailure => tokens.saturating_sub(MILLI),
        Outcome::Success => (tokens + ratio).min(max),
    }
}

#[cfg(all(test, not(loom)))]
#[allow(clippy::float_cmp)] // the compared values are exact by construction
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bucket(max: u32, ratio: f64) -> TokenBucket {
        TokenBucket::builder()
            .max_tokens(max)
            .token_ratio(ratio)
            .build()
            .expect("valid settings")
    }

    #[test]
    fn three_decimal_places_count_exactly() {
        let cases = [
            (0.5466, 546),
            (0.1, 100),
            (0.29, 290),
            (0.001, 1),
            (0.0019, 1),
            (1.0, 1000),
            (2.5, 2500),
            (0.999_9, 999),
            (1000.0, 1_000_000),
            (1e300, u64::MAX),
        ];
        for (ratio, milli) in cases {
            assert_eq!(truncated_milli(ratio), milli, "{ratio}");
        }
        assert_eq!(bucket(10, 0.5466).snapshot().ratio_milli_tokens, 546);
    }

    #[test]
    fn validation() {
        for max in [0, 1001] {
            let err = TokenBucket::builder().max_tokens(max).build().unwrap_err();
            assert_eq!(err.field(), "maxTokens");
        }
        for ratio in [f64::NAN, f64::INFINITY, -0.1, 0.0, 0.0009] {
            let err = TokenBucket::builder()
                .token_ratio(ratio)
                .build()
                .unwrap_err();
            assert_eq!(err.field(), "tokenRatio", "{ratio}");
        }
        let err = TokenBucket::builder()
            .token_ratio_milli(0)
            .build()
            .unwrap_err();
        assert_eq!(err.field(), "tokenRatio");
        assert!(TokenBucket::builder().max_tokens(1000).build().is_ok());
        assert!(TokenBucket::builder().max_tokens(1).build().is_ok());
    }

    #[test]
    fn threshold_is_less_or_equal_to_half() {
        // Odd maxTokens: the threshold is 2.5 tokens.
        let b = bucket(5, 0.5);
        b.record(Outcome::RetryableFailure);
        b.record(Outcome::RetryableFailure); // 3 tokens > 2.5
        assert!(b.allow_retry().is_ok());
        b.record(Outcome::RetryableFailure); // 2 tokens
        assert!(b.allow_retry().is_err());
        b.record(Outcome::Success); // 2.5 tokens: still <= 2.5
        assert_eq!(b.milli_tokens(), 2500);
        assert!(b.allow_retry().is_err());
        b.record(Outcome::Success); // 3.0
        assert!(b.allow_retry().is_ok());
    }

    #[test]
    fn floor_and_cap() {
        let b = bucket(3, 0.7);
        for _ in 0..10 {
            b.record(Outcome::RetryableFailure);
        }
        assert_eq!(b.milli_tokens(), 0);
        b.record(Outcome::Success);
        assert_eq!(b.milli_tokens(), 700);
        for _ in 0..10 {
            b.record(Outcome::Success);
        }
        assert_eq!(b.milli_tokens(), 3000);
        assert_eq!(b.snapshot().refusals, 0);
    }

    /// The spec's example: maxTokens 10, tokenRatio 0.1 throttles when
    /// failures exceed about 10 % of successes. Starting full, in a steady
    /// stream of 1 failure per `n` successes the bucket drains only when a
    /// failure costs more than `n` successes earn: n * 0.1 < 1.
    #[test]
    fn spec_example_ten_percent() {
        // 1 failure per 9 successes (11 % of successes): drains, throttles.
        let b = bucket(10, 0.1);
        for _ in 0..200 {
            b.record(Outcome::RetryableFailure);
            for _ in 0..9 {
                b.record(Outcome::Success);
            }
        }
        assert!(b.allow_retry().is_err());
        // 1 failure per 11 successes (9 % of successes): stays near full.
        let b = bucket(10, 0.1);
        for _ in 0..200 {
            b.record(Outcome::RetryableFailure);
            for _ in 0..11 {
                b.record(Outcome::Success);
            }
        }
        assert!(b.allow_retry().is_ok());
        assert_eq!(b.milli_tokens(), 10_000);
    }

    proptest! {
        #[test]
        fn follows_the_sequential_model(
            max in 1u32..=1000,
            ratio in 1u32..5000,
            outcomes in proptest::collection::vec(any::<bool>(), 0..300),
        ) {
            let b = TokenBucket::builder().max_tokens(max).token_ratio_milli(ratio).build().unwrap();
            let max_milli = u64::from(max) * 1000;
            let mut model = max_milli;
            for failed in outcomes {
                let outcome = if failed { Outcome::RetryableFailure } else { Outcome::Success };
                b.record(outcome);
                model = model_step(model, max_milli, u64::from(ratio), outcome);
                let now = b.milli_tokens();
                prop_assert_eq!(now, model);
                prop_assert!(now <= max_milli);
                prop_assert_eq!(b.allow_retry().is_err(), 2 * now <= max_milli);
            }
        }

        /// Any decimal with up to 3 places round-trips exactly; extra places
        /// are dropped, never rounded.
        #[test]
        fn decimals_truncate(int in 0u64..1000, frac in 0u64..1000, extra in 0u64..10) {
            let text = format!("{int}.{frac:03}{extra}");
            let value: f64 = text.parse().unwrap();
            prop_assert_eq!(truncated_milli(value), int * 1000 + frac);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// The sequential results of `ops` applied in every order.
    fn every_order(start: u64, ops: &[Outcome]) -> Vec<u64> {
        if ops.is_empty() {
            return vec![start];
        }
        let mut out = Vec::new();
        for i in 0..ops.len() {
            let mut rest = ops.to_vec();
            let op = rest.remove(i);
            out.extend(every_order(model_step(start, 2000, 500, op), &rest));
        }
        out
    }

    fn racing(ops: &'static [Outcome]) {
        let b = Arc::new(
            TokenBucket::builder()
                .max_tokens(2)
                .token_ratio_milli(500)
                .build()
                .unwrap(),
        );
        let handles: Vec<_> = ops
            .iter()
            .map(|&op| {
                let b = Arc::clone(&b);
                thread::spawn(move || b.record(op))
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let allowed = every_order(2000, ops);
        let now = b.milli_tokens();
        assert!(allowed.contains(&now), "{now} not in {allowed:?}");
        assert_eq!(b.allow_retry().is_err(), now <= 1000);
    }

    /// Two threads update the count at once (every interleaving): the result
    /// is one that some sequential order gives (no lost update), and the
    /// crossing into the throttled state is reported consistently.
    #[test]
    fn two_concurrent_updates_are_linearizable() {
        loom::model(|| racing(&[Outcome::RetryableFailure, Outcome::Success]));
        loom::model(|| racing(&[Outcome::RetryableFailure, Outcome::RetryableFailure]));
    }

    /// Three threads, with at most 3 preemptions per execution (loom's
    /// recommended bound; the unbounded run takes many minutes).
    #[test]
    fn three_concurrent_updates_are_linearizable() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            racing(&[
                Outcome::RetryableFailure,
                Outcome::RetryableFailure,
                Outcome::Success,
            ]);
        });
    }
}
