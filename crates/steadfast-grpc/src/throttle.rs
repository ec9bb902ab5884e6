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
/// Targets are compared by their [`target_key`]: `127.0.0.1:50051`,
/// `http://127.0.0.1:50051` and `dns:///127.0.0.1:50051` share one bucket.
/// A target with no key (not a server address) is compared as written.
///
/// # Errors
/// A core [`ConfigError`] if the settings are refused (a validated service
/// config never has such settings).
pub fn bucket_for(
    target: &str,
    settings: RetryThrottling,
) -> Result<Arc<TokenBucket>, ConfigError> {
    let key = target_key(target);
    let target = key.as_deref().unwrap_or(target);
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

/// The server a target names, as the throttling key: `host:port`, the host
/// in lower case, with the scheme, any path and a trailing `/` dropped.
///
/// - `host:port` is taken as it is; `host` alone gets port 443 (grpc-go's
///   default port).
/// - `http://host[:port][/path]` and `https://…`: the URI's authority, port
///   80 or 443 when it has none (as tonic's channel connects).
/// - `dns:[//authority/]host[:port]` (grpc-go's form): the host and port.
///
/// `None` for anything else: an empty target, another scheme, user info
/// (`user@host`), or an authority that does not parse.
///
/// ```
/// use steadfast_grpc::target_key;
/// assert_eq!(target_key("http://Echo.local:50051/").as_deref(), Some("echo.local:50051"));
/// assert_eq!(target_key("echo.local:50051").as_deref(), Some("echo.local:50051"));
/// assert_eq!(target_key("dns:///echo.local:50051").as_deref(), Some("echo.local:50051"));
/// assert_eq!(target_key("https://echo.local").as_deref(), Some("echo.local:443"));
/// assert_eq!(target_key("ftp://echo.local"), None);
/// ```
#[must_use]
pub fn target_key(target: &str) -> Option<String> {
    let target = target.trim();
    let (authority, default_port) = if let Some(rest) = strip_scheme(target, "http://") {
        (until_path(rest), 80)
    } else if let Some(rest) = strip_scheme(target, "https://") {
        (until_path(rest), 443)
    } else if let Some(rest) = strip_scheme(target, "dns:") {
        // dns:///host:port, or dns://resolver/host:port, or dns:host:port.
        let name = match rest.strip_prefix("//") {
            Some(after) => after.split_once('/')?.1,
            None => rest,
        };
        (name.trim_end_matches('/'), 443)
    } else if target.contains("://") {
        return None;
    } else {
        (target.trim_end_matches('/'), 443)
    };
    if authority.is_empty() || authority.contains('@') || authority.contains('/') {
        return None;
    }
    let parsed: http::uri::Authority = authority.parse().ok()?;
    let host = parsed.host();
    if host.is_empty() {
        return None;
    }
    // A port that is written must be one (`h:99999` names no server).
    let after_host = authority
        .rsplit_once(']')
        .map_or(authority, |(_, rest)| rest);
    let port = match parsed.port_u16() {
        Some(port) => port,
        None if after_host.contains(':') => return None,
        None => default_port,
    };
    Some(format!("{}:{port}", host.to_ascii_lowercase()))
}

/// `target` after `scheme`, which is matched ignoring case.
fn strip_scheme<'a>(target: &'a str, scheme: &str) -> Option<&'a str> {
    let head = target.get(..scheme.len())?;
    head.eq_ignore_ascii_case(scheme)
        .then(|| &target[scheme.len()..])
}

/// The authority of the rest of a URI: up to its path, query or fragment.
fn until_path(rest: &str) -> &str {
    rest.split(['/', '?', '#']).next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::target_key;

    #[test]
    fn one_server_one_key() {
        let key = Some("127.0.0.1:50051".to_owned());
        for target in [
            "127.0.0.1:50051",
            "http://127.0.0.1:50051",
            "HTTP://127.0.0.1:50051/",
            "http://127.0.0.1:50051/some/path?q",
            " 127.0.0.1:50051 ",
            "dns:///127.0.0.1:50051",
            "dns://8.8.8.8/127.0.0.1:50051",
            "dns:127.0.0.1:50051",
        ] {
            assert_eq!(target_key(target), key, "{target}");
        }
        assert_eq!(target_key("[::1]:7").as_deref(), Some("[::1]:7"));
        assert_eq!(target_key("http://[::1]").as_deref(), Some("[::1]:80"));
        assert_eq!(
            target_key("Example.COM").as_deref(),
            Some("example.com:443")
        );
    }

    #[test]
    fn what_is_not_a_server_has_no_key() {
        for target in [
            "",
            "   ",
            "http://",
            "unix:///tmp/s",
            "ftp://h:1",
            "u@h:1",
            "h:99999",
            "h:x",
            "a/b",
        ] {
            assert_eq!(target_key(target), None, "{target:?}");
        }
    }
}
