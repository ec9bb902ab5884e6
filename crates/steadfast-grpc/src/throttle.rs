//! One A6 token bucket per server name, shared by every channel to it.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use steadfast::ConfigError;
use steadfast::control::TokenBucket;

use crate::config::RetryThrottling;

/// The buckets alive now, by server name and settings: few (one per
/// server), so a short list scanned under a lock taken once per layer.
static BUCKETS: Mutex<Vec<(String, RetryThrottling, Weak<TokenBucket>)>> = Mutex::new(Vec::new());

/// The token bucket for `target` with `settings`: the one every channel to
/// that server shares while any holds it (gRFC A6 keeps throttling per
/// server name, not per channel), or a new one.
///
/// # Errors
/// A core [`ConfigError`] if the settings are refused (a validated service
/// config never has such settings).
pub fn bucket_for(
    target: &str,
    settings: RetryThrottling,
) -> Result<Arc<TokenBucket>, ConfigError> {
    let mut all = BUCKETS.lock().unwrap_or_else(PoisonError::into_inner);
    all.retain(|(_, _, bucket)| bucket.strong_count() > 0);
    if let Some(bucket) = all
        .iter()
        .find(|(name, s, _)| name == target && *s == settings)
        .and_then(|(_, _, bucket)| bucket.upgrade())
    {
        return Ok(bucket);
    }
    let bucket = Arc::new(settings.token_bucket()?);
    all.push((target.to_owned(), settings, Arc::downgrade(&bucket)));
    Ok(bucket)
}
