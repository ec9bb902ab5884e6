use steadfast::ConfigError;
use steadfast::control::TokenBucket;

/// `retryThrottling`: the A6 token bucket, one per server name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryThrottling {
    pub(crate) max_tokens: u32,
    pub(crate) ratio_milli: u32,
}

impl RetryThrottling {
    /// `maxTokens` (1 to 1000).
    #[must_use]
    pub fn max_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// `tokenRatio` in thousandths of a token (A6 uses three decimals).
    #[must_use]
    pub fn token_ratio_milli(&self) -> u32 {
        self.ratio_milli
    }

    /// A fresh token bucket with these settings. Share one per server name
    /// (A6): every channel to that server should use the same bucket.
    ///
    /// # Errors
    /// A core [`ConfigError`] if the core refuses a setting (a validated
    /// config never has one).
    pub fn token_bucket(&self) -> Result<TokenBucket, ConfigError> {
        TokenBucket::builder()
            .max_tokens(self.max_tokens)
            .token_ratio_milli(self.ratio_milli)
            .build()
    }
}
