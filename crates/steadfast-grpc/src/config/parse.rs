//! JSON to a validated [`ServiceConfig`], field by field, so that every
//! error names its field.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{
    HedgingPolicyConfig, MethodConfig, MethodName, MethodPolicy, ParseOptions, RetryPolicyConfig,
    RetryThrottling, ServiceConfig, ServiceConfigError, parse_duration,
};
use crate::Code;

type Result<T> = std::result::Result<T, ServiceConfigError>;

pub(crate) fn service_config(json: &str, options: ParseOptions) -> Result<ServiceConfig> {
    let root: Value = serde_json::from_str(json)
        .map_err(|e| ServiceConfigError::new("", "must be valid JSON", e))?;
    from_value(&root, options)
}

pub(crate) fn service_config_bytes(json: &[u8], options: ParseOptions) -> Result<ServiceConfig> {
    let root: Value = serde_json::from_slice(json)
        .map_err(|e| ServiceConfigError::new("", "must be valid JSON", e))?;
    from_value(&root, options)
}

pub(crate) fn from_value(root: &Value, options: ParseOptions) -> Result<ServiceConfig> {
    let root = object(root, "(the config)")?;
    let methods = match root.get("methodConfig") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| method_config(v, &format!("methodConfig[{i}]"), options))
            .collect::<Result<_>>()?,
        Some(other) => {
            return Err(ServiceConfigError::new(
                "methodConfig",
                "must be an array",
                other,
            ));
        }
    };
    let mut seen = HashSet::new();
    for (i, config) in methods.iter().enumerate() {
        for (j, name) in config.names.iter().enumerate() {
            if !seen.insert(name.clone()) {
                return Err(ServiceConfigError::new(
                    format!("methodConfig[{i}].name[{j}]"),
                    "must not name a method that another entry names",
                    describe(name),
                ));
            }
        }
    }
    let throttling = match root.get("retryThrottling") {
        None | Some(Value::Null) => None,
        Some(v) => Some(retry_throttling(v)?),
    };
    let outlier = match root.get("loadBalancingConfig") {
        None | Some(Value::Null) => None,
        Some(v) => super::balancing::load_balancing(v)?,
    };
    Ok(ServiceConfig {
        methods,
        throttling,
        outlier,
    })
}

fn describe(name: &MethodName) -> String {
    match (&name.service, &name.method) {
        (Some(s), Some(m)) => format!("{s}/{m}"),
        (Some(s), None) => s.clone(),
        _ => "(the default)".to_owned(),
    }
}

pub(super) fn object<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| ServiceConfigError::new(field, "must be an object", v))
}

fn method_config(v: &Value, field: &str, options: ParseOptions) -> Result<MethodConfig> {
    let obj = object(v, field)?;
    let names = match obj.get("name") {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| method_name(v, &format!("{field}.name[{i}]")))
            .collect::<Result<_>>()?,
        other => {
            return Err(ServiceConfigError::new(
                format!("{field}.name"),
                "must be a non-empty array of names",
                other.unwrap_or(&Value::Null),
            ));
        }
    };
    let timeout = optional(obj, field, "timeout", |v, f| duration(v, f, true))?;
    let wait_for_ready = optional(obj, field, "waitForReady", |v, f| {
        v.as_bool()
            .ok_or_else(|| ServiceConfigError::new(f, "must be true or false", v))
    })?;
    let retry = optional(obj, field, "retryPolicy", |v, f| {
        retry_policy(v, f, options)
    })?;
    let hedging = optional(obj, field, "hedgingPolicy", |v, f| {
        hedging_policy(v, f, options)
    })?;
    let policy = match (retry, hedging) {
        (Some(_), Some(_)) => {
            return Err(ServiceConfigError::new(
                field,
                "must not have both a retryPolicy and a hedgingPolicy",
                "both",
            ));
        }
        (Some(r), None) => Some(MethodPolicy::Retry(r)),
        (None, Some(h)) => Some(MethodPolicy::Hedging(h)),
        (None, None) => None,
    };
    Ok(MethodConfig {
        names,
        timeout,
        wait_for_ready,
        policy,
    })
}

/// `parse(value, path)` for `key` of `obj`, if present and not null.
fn optional<T>(
    obj: &Map<String, Value>,
    field: &str,
    key: &str,
    parse: impl FnOnce(&Value, &str) -> Result<T>,
) -> Result<Option<T>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => parse(v, &format!("{field}.{key}")).map(Some),
    }
}

fn method_name(v: &Value, field: &str) -> Result<MethodName> {
    let obj = object(v, field)?;
    let text = |key: &str| -> Result<Option<String>> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(ServiceConfigError::new(
                format!("{field}.{key}"),
                "must be a string",
                other,
            )),
        }
    };
    let (service, method) = (text("service")?, text("method")?);
    if service.is_none() && method.is_some() {
        return Err(ServiceConfigError::new(
            format!("{field}.method"),
            "must not be set without a service",
            method.unwrap_or_default(),
        ));
    }
    Ok(MethodName { service, method })
}

pub(super) fn duration(v: &Value, field: &str, zero_ok: bool) -> Result<Duration> {
    let Value::String(text) = v else {
        return Err(ServiceConfigError::new(
            field,
            "must be a proto3 JSON duration string, like \"0.1s\"",
            v,
        ));
    };
    let d = parse_duration(text).map_err(|rule| ServiceConfigError::new(field, rule, text))?;
    if !zero_ok && d.is_zero() {
        return Err(ServiceConfigError::new(
            field,
            "must be greater than zero",
            text,
        ));
    }
    Ok(d)
}

fn required<'a>(obj: &'a Map<String, Value>, field: &str, key: &str) -> Result<&'a Value> {
    match obj.get(key) {
        None | Some(Value::Null) => Err(ServiceConfigError::new(
            format!("{field}.{key}"),
            "is required",
            "nothing",
        )),
        Some(v) => Ok(v),
    }
}

/// `maxAttempts`: an integer greater than 1, clamped to the cap.
fn max_attempts(obj: &Map<String, Value>, field: &str, options: ParseOptions) -> Result<u32> {
    let field = format!("{field}.maxAttempts");
    let v = required(
        obj,
        &field[..field.len() - ".maxAttempts".len()],
        "maxAttempts",
    )?;
    match v.as_u64() {
        Some(n) if n > 1 => Ok(u32::try_from(n).unwrap_or(u32::MAX).min(options.cap)),
        _ => Err(ServiceConfigError::new(
            field,
            "must be an integer greater than 1",
            v,
        )),
    }
}

fn codes(v: &Value, field: &str, non_empty: bool) -> Result<Vec<Code>> {
    let Value::Array(items) = v else {
        return Err(ServiceConfigError::new(
            field,
            "must be an array of status codes",
            v,
        ));
    };
    if non_empty && items.is_empty() {
        return Err(ServiceConfigError::new(field, "must not be empty", "[]"));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let code = match item {
            Value::String(name) => name.parse::<Code>().ok(),
            Value::Number(n) => n.as_i64().and_then(Code::from_i64),
            _ => None,
        }
        .ok_or_else(|| {
            ServiceConfigError::new(
                format!("{field}[{i}]"),
                "must be a gRPC status code: a name like \"UNAVAILABLE\" or a number from 0 to 16",
                item,
            )
        })?;
        if !out.contains(&code) {
            out.push(code);
        }
    }
    Ok(out)
}

fn retry_policy(v: &Value, field: &str, options: ParseOptions) -> Result<RetryPolicyConfig> {
    let obj = object(v, field)?;
    let max_attempts = max_attempts(obj, field, options)?;
    let initial_backoff = duration(
        required(obj, field, "initialBackoff")?,
        &format!("{field}.initialBackoff"),
        false,
    )?;
    let max_backoff = duration(
        required(obj, field, "maxBackoff")?,
        &format!("{field}.maxBackoff"),
        false,
    )?;
    let m = required(obj, field, "backoffMultiplier")?;
    let multiplier = match m.as_f64() {
        Some(x) if x.is_finite() && x > 0.0 => x,
        _ => {
            return Err(ServiceConfigError::new(
                format!("{field}.backoffMultiplier"),
                "must be a number greater than zero",
                m,
            ));
        }
    };
    let codes = codes(
        required(obj, field, "retryableStatusCodes")?,
        &format!("{field}.retryableStatusCodes"),
        true,
    )?;
    Ok(RetryPolicyConfig {
        max_attempts,
        initial_backoff,
        max_backoff,
        multiplier,
        codes,
    })
}

fn hedging_policy(v: &Value, field: &str, options: ParseOptions) -> Result<HedgingPolicyConfig> {
    let obj = object(v, field)?;
    let max_attempts = max_attempts(obj, field, options)?;
    let delay =
        optional(obj, field, "hedgingDelay", |v, f| duration(v, f, true))?.unwrap_or_default();
    let non_fatal =
        optional(obj, field, "nonFatalStatusCodes", |v, f| codes(v, f, false))?.unwrap_or_default();
    Ok(HedgingPolicyConfig {
        max_attempts,
        delay,
        non_fatal,
    })
}

fn retry_throttling(v: &Value) -> Result<RetryThrottling> {
    let field = "retryThrottling";
    let obj = object(v, field)?;
    let t = required(obj, field, "maxTokens")?;
    let max_tokens = match t.as_u64() {
        Some(n @ 1..=1000) => u32::try_from(n).unwrap_or(1000),
        _ => {
            return Err(ServiceConfigError::new(
                "retryThrottling.maxTokens",
                "must be a whole number in 1..=1000",
                t,
            ));
        }
    };
    let r = required(obj, field, "tokenRatio")?;
    let ratio_milli = match r.as_f64() {
        // A6: three decimals are used; what is finer is dropped.
        Some(x) if x.is_finite() && x > 0.0 && x <= 1e6 => (x * 1000.0 + 1e-9).floor(),
        _ => -1.0,
    };
    if ratio_milli < 1.0 {
        return Err(ServiceConfigError::new(
            "retryThrottling.tokenRatio",
            "must be a number greater than zero at three decimals (at least 0.001)",
            r,
        ));
    }
    Ok(RetryThrottling {
        max_tokens,
        // At most 1e9 thousandths, checked above: fits.
        ratio_milli: ratio_milli as u32,
    })
}
