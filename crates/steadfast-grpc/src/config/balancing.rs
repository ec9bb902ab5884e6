//! `loadBalancingConfig`: gRFC A50's `outlier_detection_experimental`, read
//! into the core's [`OutlierDetection`], field by field, so that every error
//! names its field.

use serde_json::{Map, Value};
use steadfast::endpoint::{FailurePercentage, OutlierDetection, SuccessRate};

use super::ServiceConfigError;
use super::parse::{duration, object};

type Result<T> = std::result::Result<T, ServiceConfigError>;

/// The load-balancing policies this client runs: A50's outlier detection
/// (around its pick), and the plain ones (its pick alone: steadfast always
/// picks by load, the power of two choices).
const PLAIN: [&str; 2] = ["round_robin", "pick_first"];
const OUTLIER: &str = "outlier_detection_experimental";

/// What a `loadBalancingConfig` list asks of this client: the first policy
/// in it that the client runs (gRPC's rule), which is outlier detection
/// with its settings, or a plain policy (`None`: no ejection).
///
/// # Errors
/// A list that is not a list of one-key objects, one that names no policy
/// the client runs, or an invalid outlier-detection setting.
pub(crate) fn load_balancing(v: &Value) -> Result<Option<OutlierDetection>> {
    let field = "loadBalancingConfig";
    let Value::Array(policies) = v else {
        return Err(ServiceConfigError::new(field, "must be an array", v));
    };
    for (i, policy) in policies.iter().enumerate() {
        let here = format!("{field}[{i}]");
        let entry = object(policy, &here)?;
        let mut keys = entry.iter();
        let (Some((name, settings)), None) = (keys.next(), keys.next()) else {
            return Err(ServiceConfigError::new(
                here,
                "must be an object with exactly one key, the policy's name",
                policy,
            ));
        };
        if name == OUTLIER {
            return outlier_detection(settings, &format!("{here}.{OUTLIER}")).map(Some);
        }
        if PLAIN.contains(&name.as_str()) {
            return Ok(None);
        }
    }
    Err(ServiceConfigError::new(
        field,
        "must name a policy this client runs (outlier_detection_experimental, round_robin or pick_first)",
        v,
    ))
}

/// gRFC A50's settings, with its defaults for what is left out; an
/// ejection rule left out is not run (A50).
fn outlier_detection(v: &Value, field: &str) -> Result<OutlierDetection> {
    let obj = object(v, field)?;
    let mut b = OutlierDetection::a50()
        .success_rate(None)
        .failure_percentage(None);
    if let Some(d) = present(obj, "interval") {
        b = b.interval(duration(d, &format!("{field}.interval"), false)?);
    }
    if let Some(d) = present(obj, "baseEjectionTime") {
        b = b.base_ejection_time(duration(d, &format!("{field}.baseEjectionTime"), false)?);
    }
    if let Some(d) = present(obj, "maxEjectionTime") {
        b = b.max_ejection_time(duration(d, &format!("{field}.maxEjectionTime"), false)?);
    }
    if let Some(p) = present(obj, "maxEjectionPercent") {
        b = b.max_ejection_percent(percent(p, &format!("{field}.maxEjectionPercent"))?);
    }
    if let Some(rule) = present(obj, "successRateEjection") {
        let here = format!("{field}.successRateEjection");
        let rule = object(rule, &here)?;
        let d = SuccessRate::default();
        b = b.success_rate(Some(SuccessRate {
            stdev_factor: whole(rule, &here, "stdevFactor", d.stdev_factor)?,
            enforcement_percentage: percent_or(
                rule,
                &here,
                "enforcementPercentage",
                d.enforcement_percentage,
            )?,
            minimum_hosts: whole(rule, &here, "minimumHosts", d.minimum_hosts)?,
            request_volume: whole(rule, &here, "requestVolume", d.request_volume)?,
        }));
    }
    if let Some(rule) = present(obj, "failurePercentageEjection") {
        let here = format!("{field}.failurePercentageEjection");
        let rule = object(rule, &here)?;
        let d = FailurePercentage::default();
        b = b.failure_percentage(Some(FailurePercentage {
            threshold: percent_or(rule, &here, "threshold", d.threshold)?,
            enforcement_percentage: percent_or(
                rule,
                &here,
                "enforcementPercentage",
                d.enforcement_percentage,
            )?,
            minimum_hosts: whole(rule, &here, "minimumHosts", d.minimum_hosts)?,
            request_volume: whole(rule, &here, "requestVolume", d.request_volume)?,
        }));
    }
    if let Some(child) = present(obj, "childPolicy")
        && !child.is_array()
    {
        return Err(ServiceConfigError::new(
            format!("{field}.childPolicy"),
            "must be an array",
            child,
        ));
    }
    b.build()
        .map_err(|e| ServiceConfigError::new(field, "must be a valid outlier detection", e))
}

fn present<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// A whole number that fits 32 bits (A50's `UInt32Value`).
fn whole(obj: &Map<String, Value>, field: &str, key: &str, default: u32) -> Result<u32> {
    match present(obj, key) {
        None => Ok(default),
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                ServiceConfigError::new(
                    format!("{field}.{key}"),
                    "must be a whole number that fits 32 bits",
                    v,
                )
            }),
    }
}

/// A percentage: a whole number in 0..=100 (A50 rejects more).
fn percent(v: &Value, field: &str) -> Result<u32> {
    match v.as_u64() {
        Some(n @ 0..=100) => Ok(u32::try_from(n).unwrap_or(100)),
        _ => Err(ServiceConfigError::new(
            field,
            "must be a whole number in 0..=100",
            v,
        )),
    }
}

fn percent_or(obj: &Map<String, Value>, field: &str, key: &str, default: u32) -> Result<u32> {
    match present(obj, key) {
        None => Ok(default),
        Some(v) => percent(v, &format!("{field}.{key}")),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn read(json: &str) -> Result<Option<OutlierDetection>> {
        load_balancing(&serde_json::from_str(json).expect("JSON"))
    }

    #[test]
    fn a50s_settings_and_defaults() {
        let od = read(
            r#"[{"outlier_detection_experimental": {
                "interval": "1s", "baseEjectionTime": "2s",
                "failurePercentageEjection": {"threshold": 50, "requestVolume": 10},
                "childPolicy": [{"round_robin": {}}]}}]"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(od.interval(), Duration::from_secs(1));
        assert_eq!(od.base_ejection_time(), Duration::from_secs(2));
        assert_eq!(od.max_ejection_time(), Duration::from_secs(300));
        assert_eq!(od.max_ejection_percent(), 10);
        // Left out: not run.
        assert_eq!(od.success_rate(), None);
        let fp = od.failure_percentage().unwrap();
        assert_eq!(
            (
                fp.threshold,
                fp.enforcement_percentage,
                fp.minimum_hosts,
                fp.request_volume
            ),
            (50, 100, 5, 10)
        );
    }

    #[test]
    fn the_first_policy_the_client_runs_wins() {
        assert_eq!(read(r#"[{"xds_wrr": {}}, {"round_robin": {}}]"#), Ok(None));
        assert!(
            read(r#"[{"round_robin": {}}, {"outlier_detection_experimental": {}}]"#)
                .unwrap()
                .is_none()
        );
        let err = read(r#"[{"weighted_target": {}}]"#).unwrap_err();
        assert_eq!(err.field(), "loadBalancingConfig");
    }

    #[test]
    fn bad_settings_name_their_field() {
        let err = read(r#"[{"outlier_detection_experimental": {"maxEjectionPercent": 101}}]"#)
            .unwrap_err();
        assert_eq!(
            err.field(),
            "loadBalancingConfig[0].outlier_detection_experimental.maxEjectionPercent"
        );
        let err = read(r#"[{"outlier_detection_experimental": {"interval": "0s"}}]"#).unwrap_err();
        assert!(err.field().ends_with(".interval"), "{err}");
        let err = read(
            r#"[{"outlier_detection_experimental": {"successRateEjection": {"stdevFactor": -1}}}]"#,
        )
        .unwrap_err();
        assert!(
            err.field().ends_with("successRateEjection.stdevFactor"),
            "{err}"
        );
        let err = read(r#"[{"a": {}, "b": {}}]"#).unwrap_err();
        assert_eq!(err.field(), "loadBalancingConfig[0]");
        assert!(read(r#"{"round_robin": {}}"#).is_err());
    }
}
