//! Service configs as grpc-go and grpc-java read them, and every A6 rule
//! an invalid one breaks, each rejected whole with its field named.

use std::time::Duration;

use proptest::prelude::*;
use steadfast_grpc::Code;
use steadfast_grpc::config::{MethodConfig, MethodPolicy, ParseOptions, ServiceConfig};

fn retry(fields: &str) -> String {
    format!(
        r#"{{"methodConfig": [{{"name": [{{"service": "pkg.Svc"}}], "retryPolicy": {{{fields}}}}}]}}"#
    )
}

const GOOD_RETRY: &str = r#""maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]"#;

#[test]
fn codes_as_integers_or_names_in_any_case() {
    let config = ServiceConfig::from_json(&retry(
        r#""maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14, "unavailable", "Deadline_Exceeded", "ABORTED"]"#,
    ))
    .expect("valid: grpc-go and grpc-java accept it");
    let Some(MethodPolicy::Retry(r)) = config
        .method_config("/pkg.Svc/Get")
        .and_then(MethodConfig::policy)
    else {
        panic!("a retry policy");
    };
    assert_eq!(
        r.retryable_codes(),
        &[Code::Unavailable, Code::DeadlineExceeded, Code::Aborted]
    );
    assert!(r.retries(Code::Unavailable) && !r.retries(Code::Internal));
}

#[test]
fn max_attempts_above_the_cap_is_clamped_silently() {
    let config = ServiceConfig::from_json(&retry(
        r#""maxAttempts": 100, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14]"#,
    ))
    .expect("valid");
    let policy = config
        .method_config("/pkg.Svc/Get")
        .and_then(MethodConfig::policy)
        .expect("policy");
    assert_eq!(policy.max_attempts(), 5);
    let raised = ServiceConfig::from_json_with(
        &retry(r#""maxAttempts": 100, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14]"#),
        ParseOptions::default().max_attempts_cap(10),
    )
    .expect("valid");
    assert_eq!(
        raised
            .method_config("/pkg.Svc/Get")
            .and_then(MethodConfig::policy)
            .map(MethodPolicy::max_attempts),
        Some(10)
    );
}

#[test]
fn every_broken_rule_names_its_field() {
    let cases: Vec<(String, &str)> = vec![
        ("not json".to_owned(), ""),
        ("[]".to_owned(), "(the config)"),
        (r#"{"methodConfig": {}}"#.to_owned(), "methodConfig"),
        (r#"{"methodConfig": [{"name": []}]}"#.to_owned(), "methodConfig[0].name"),
        (r#"{"methodConfig": [{"name": [{"method": "Get"}]}]}"#.to_owned(), "methodConfig[0].name[0].method"),
        (r#"{"methodConfig": [{"name": [{"service": 7}]}]}"#.to_owned(), "methodConfig[0].name[0].service"),
        (r#"{"methodConfig": [{"name": [{"service": "a.B"}], "timeout": "1"}]}"#.to_owned(), "methodConfig[0].timeout"),
        (r#"{"methodConfig": [{"name": [{"service": "a.B"}], "timeout": "-1s"}]}"#.to_owned(), "methodConfig[0].timeout"),
        (r#"{"methodConfig": [{"name": [{"service": "a.B"}]}, {"name": [{"service": "a.B"}]}]}"#.to_owned(), "methodConfig[1].name[0]"),
        (retry(r#""maxAttempts": 1, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14]"#), "methodConfig[0].retryPolicy.maxAttempts"),
        (retry(r#""maxAttempts": 2.5, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14]"#), "methodConfig[0].retryPolicy.maxAttempts"),
        (retry(r#""maxAttempts": "3", "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14]"#), "methodConfig[0].retryPolicy.maxAttempts"),
        (retry(r#""initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14]"#), "methodConfig[0].retryPolicy.maxAttempts"),
        (retry(r#""maxAttempts": 3, "initialBackoff": "0s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14]"#), "methodConfig[0].retryPolicy.initialBackoff"),
        (retry(r#""maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1.0000000001s", "backoffMultiplier": 2, "retryableStatusCodes": [14]"#), "methodConfig[0].retryPolicy.maxBackoff"),
        (retry(r#""maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 0, "retryableStatusCodes": [14]"#), "methodConfig[0].retryPolicy.backoffMultiplier"),
        (retry(r#""maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": -2, "retryableStatusCodes": [14]"#), "methodConfig[0].retryPolicy.backoffMultiplier"),
        (retry(r#""maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": []"#), "methodConfig[0].retryPolicy.retryableStatusCodes"),
        (retry(r#""maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [17]"#), "methodConfig[0].retryPolicy.retryableStatusCodes[0]"),
        (retry(r#""maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE", "TRY_AGAIN"]"#), "methodConfig[0].retryPolicy.retryableStatusCodes[1]"),
        (format!(r#"{{"methodConfig": [{{"name": [{{"service": "a.B"}}], "retryPolicy": {{{GOOD_RETRY}}}, "hedgingPolicy": {{"maxAttempts": 2}}}}]}}"#), "methodConfig[0]"),
        (r#"{"methodConfig": [{"name": [{"service": "a.B"}], "hedgingPolicy": {"maxAttempts": 1}}]}"#.to_owned(), "methodConfig[0].hedgingPolicy.maxAttempts"),
        (r#"{"methodConfig": [{"name": [{"service": "a.B"}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "soon"}}]}"#.to_owned(), "methodConfig[0].hedgingPolicy.hedgingDelay"),
        (r#"{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}"#.to_owned(), "retryThrottling.maxTokens"),
        (r#"{"retryThrottling": {"maxTokens": 1001, "tokenRatio": 0.1}}"#.to_owned(), "retryThrottling.maxTokens"),
        (r#"{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0}}"#.to_owned(), "retryThrottling.tokenRatio"),
        (r#"{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.0004}}"#.to_owned(), "retryThrottling.tokenRatio"),
        (r#"{"retryThrottling": {"maxTokens": 10}}"#.to_owned(), "retryThrottling.tokenRatio"),
    ];
    for (json, field) in cases {
        let err = ServiceConfig::from_json(&json).expect_err(&json);
        assert_eq!(err.field(), field, "{json}: {err}");
        assert!(
            err.to_string().starts_with("invalid service config: "),
            "{err}"
        );
    }
}

#[test]
fn the_most_specific_name_wins() {
    let config = ServiceConfig::from_json(
        r#"{"methodConfig": [
            {"name": [{}], "timeout": "9s"},
            {"name": [{"service": "a.B"}], "timeout": "2s"},
            {"name": [{"service": "a.B", "method": "Slow"}, {"service": "c.D", "method": "X"}], "timeout": "30s"}
        ]}"#,
    )
    .expect("valid");
    let timeout = |path| config.method_config(path).and_then(MethodConfig::timeout);
    assert_eq!(timeout("/a.B/Slow"), Some(Duration::from_secs(30)));
    assert_eq!(timeout("/a.B/Fast"), Some(Duration::from_secs(2)));
    assert_eq!(timeout("/c.D/X"), Some(Duration::from_secs(30)));
    assert_eq!(timeout("/c.D/Y"), Some(Duration::from_secs(9)));
    assert_eq!(timeout("not a path"), None);
    assert_eq!(timeout("/a.B/Slow/extra"), None);
}

#[test]
fn hedging_policies_and_throttling_become_core_values() {
    let config = ServiceConfig::from_json(
        r#"{"methodConfig": [{"name": [{"service": "a.B"}],
              "hedgingPolicy": {"maxAttempts": 4, "nonFatalStatusCodes": ["UNAVAILABLE", 13]}}],
            "retryThrottling": {"maxTokens": 100, "tokenRatio": 0.1239}}"#,
    )
    .expect("valid");
    let Some(MethodPolicy::Hedging(h)) = config
        .method_config("/a.B/C")
        .and_then(MethodConfig::policy)
    else {
        panic!("a hedging policy");
    };
    assert_eq!(h.hedging_delay(), Duration::ZERO); // absent: all copies at once
    assert_eq!(h.non_fatal_codes(), &[Code::Unavailable, Code::Internal]);
    assert_eq!(h.to_policy().expect("valid").max_attempts(), 4);
    let t = config.retry_throttling().expect("throttling");
    assert_eq!((t.max_tokens(), t.token_ratio_milli()), (100, 123)); // three decimals
    assert_eq!(t.token_bucket().expect("valid").milli_tokens(), 100_000);
}

#[test]
fn the_retry_policy_draws_the_a6_backoff() {
    let config = ServiceConfig::from_json(&retry(
        r#""maxAttempts": 5, "initialBackoff": "0.5s", "maxBackoff": "2s", "backoffMultiplier": 3, "retryableStatusCodes": [14]"#,
    ))
    .expect("valid");
    let Some(MethodPolicy::Retry(r)) = config
        .method_config("/pkg.Svc/Get")
        .and_then(MethodConfig::policy)
    else {
        panic!("a retry policy");
    };
    let backoff = r.backoff().expect("valid");
    for (n, d) in backoff.delays().take(6).enumerate() {
        let envelope = (0.5 * 3_f64.powi(n as i32)).min(2.0);
        let d = d.as_secs_f64();
        assert!(
            d >= envelope * 0.8 - 1e-9 && d <= envelope * 1.2 + 1e-9,
            "retry {}: {d} vs {envelope}",
            n + 1
        );
    }
}

proptest! {
    /// No JSON, however hostile, panics the parser.
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        let _ = ServiceConfig::from_json(&text);
    }

    #[test]
    fn arbitrary_numbers_in_every_numeric_field_never_panic(
        attempts in prop_oneof![any::<i64>().prop_map(|n| n.to_string()), any::<f64>().prop_map(|x| format!("{x:e}"))],
        multiplier in prop_oneof![any::<i64>().prop_map(|n| n.to_string()), any::<f64>().prop_map(|x| format!("{x:e}"))],
        tokens in prop_oneof![any::<i64>().prop_map(|n| n.to_string()), any::<f64>().prop_map(|x| format!("{x:e}"))],
        ratio in prop_oneof![any::<i64>().prop_map(|n| n.to_string()), any::<f64>().prop_map(|x| format!("{x:e}"))],
    ) {
        let json = format!(
            r#"{{"methodConfig": [{{"name": [{{}}], "retryPolicy": {{"maxAttempts": {attempts}, "initialBackoff": "1s", "maxBackoff": "2s", "backoffMultiplier": {multiplier}, "retryableStatusCodes": [14]}}}}],
                "retryThrottling": {{"maxTokens": {tokens}, "tokenRatio": {ratio}}}}}"#
        );
        if let Ok(config) = ServiceConfig::from_json(&json) {
            let policy = config.method_config("/a.B/C").and_then(MethodConfig::policy).expect("policy");
            prop_assert!((2..=5).contains(&policy.max_attempts()));
            if let Some(MethodPolicy::Retry(r)) = Some(policy) {
                prop_assert!(r.to_policy().is_ok());
            }
            prop_assert!(config.retry_throttling().expect("throttling").token_bucket().is_ok());
        }
    }
}

/// The README's config file parses and routes as A6's example says.
#[test]
fn the_a6_example_file_parses() {
    let config =
        ServiceConfig::from_json(include_str!("a6_example.json")).expect("A6's own example");
    assert_eq!(config.method_configs().len(), 2);
    assert!(matches!(
        config
            .method_config("/grpc.testing.TestService/Hedged")
            .and_then(MethodConfig::policy),
        Some(MethodPolicy::Hedging(_))
    ));
}
