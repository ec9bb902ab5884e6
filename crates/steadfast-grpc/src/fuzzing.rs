//! The bodies of the gRPC crate's fuzz targets (in `fuzz/`), here so that
//! the corpus replay (`tests/fuzz_corpus.rs`) runs the same checks on
//! stable (cargo-fuzz needs nightly).
//!
//! Each takes the raw bytes libFuzzer made, reads them as text when they are
//! UTF-8, and panics only when a property is broken: a parser panicked, or
//! what it accepted breaks a rule it promised.
//!
//! ```
//! steadfast_grpc::fuzzing::service_configs(br#"{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}}"#);
//! steadfast_grpc::fuzzing::durations(b"1.5s");
//! ```

use std::time::Duration;

use crate::config::{MethodConfig, MethodPolicy, ServiceConfig, parse_duration};

/// The service-config parser: what parses keeps A6's limits (attempts in
/// `2..=5`, a non-empty retryable set, positive backoffs, tokens in
/// `1..=1000`), turns into core policies without error, and routes any path
/// without panicking.
pub fn service_configs(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = ServiceConfig::from_json(text) else {
        return;
    };
    for method in config.method_configs() {
        assert!(!method.names().is_empty());
        match method.policy() {
            Some(MethodPolicy::Retry(r)) => {
                assert!((2..=5).contains(&r.max_attempts()));
                assert!(!r.retryable_codes().is_empty());
                assert!(r.initial_backoff() > Duration::ZERO && r.max_backoff() > Duration::ZERO);
                assert!(r.backoff_multiplier() > 0.0);
                assert!(
                    r.to_policy().is_ok(),
                    "a valid retry policy the core refused"
                );
            }
            Some(MethodPolicy::Hedging(h)) => {
                assert!((2..=5).contains(&h.max_attempts()));
                assert!(
                    h.to_policy().is_ok(),
                    "a valid hedging policy the core refused"
                );
            }
            None => {}
        }
    }
    if let Some(t) = config.retry_throttling() {
        assert!((1..=1000).contains(&t.max_tokens()) && t.token_ratio_milli() >= 1);
        assert!(
            t.token_bucket().is_ok(),
            "valid throttling the core refused"
        );
    }
    for path in ["/a.B/C", text, "/", "//", "/x/"] {
        let _ = config.method_config(path).map(MethodConfig::timeout);
    }
}

/// The proto3 duration parser: what parses prints back (whole seconds and
/// nine fractional digits) to the same value.
pub fn durations(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = parse_duration(text) {
        let canonical = format!("{}.{:09}s", d.as_secs(), d.subsec_nanos());
        assert_eq!(parse_duration(&canonical), Ok(d));
    }
}

/// The response-head readers a server's bytes reach: `grpc-status` and
/// `grpc-retry-pushback-ms`. The bytes are split in two at the first NUL;
/// each half becomes one header's value (when it is a valid header value).
/// Neither reader panics; a status is always one of the 17 codes; a valid
/// pushback is the non-negative whole number of milliseconds the text
/// spells (`-0` is zero, as grpc-go reads it).
pub fn response_heads(data: &[u8]) {
    let (status, pushback) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let mut headers = http::HeaderMap::new();
    if let Ok(v) = http::HeaderValue::from_bytes(status) {
        headers.insert("grpc-status", v);
    }
    if let Ok(v) = http::HeaderValue::from_bytes(pushback) {
        headers.insert(crate::PUSHBACK_HEADER, v);
    }
    if let Some(code) = crate::head_status(&headers) {
        assert!(code.number() <= 16);
    }
    if let Some(Ok(wait)) = crate::pushback(&headers) {
        let text = std::str::from_utf8(pushback).expect("a valid pushback is text");
        let spelled: i64 = text.trim().parse().expect("a valid pushback is a number");
        assert_eq!(u128::try_from(spelled).ok(), Some(wait.as_millis()));
    }
}
