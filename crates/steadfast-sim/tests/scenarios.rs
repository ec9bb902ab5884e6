//! Each scenario's qualitative result, and bad input.

mod common;

use std::time::Duration;

use steadfast_sim::herd::{self, HerdConfig};
use steadfast_sim::storm::{self, StormConfig, StormControl, StormStrategy};
use steadfast_sim::{Latency, SimConfig, SimError};

#[test]
fn herd_full_jitter_peak_is_far_below_no_jitter() {
    let r = herd::run(&common::small_herd()).unwrap();
    let get = |name: &str| r.strategies.iter().find(|s| s.name == name).unwrap();
    let none = get(herd::NO_JITTER);
    let full = get(herd::FULL_JITTER);
    // Without jitter every client retries in lock-step: the whole herd lands
    // in one window when the server is back.
    assert_eq!(none.peak_per_window, 300);
    assert!(
        full.peak_per_window * 4 < none.peak_per_window,
        "full {} vs none {}",
        full.peak_per_window,
        none.peak_per_window
    );
    assert!(full.total_attempts < none.total_attempts);
    for s in &r.strategies {
        assert_eq!(s.connected, 300, "{}", s.name);
        assert!(s.all_connected_after_s.is_some(), "{}", s.name);
        // The server never accepts more than its limit per window.
        let accepted = s.connected_per_window.counts();
        assert!(accepted.iter().all(|&n| n <= 10), "{}", s.name);
    }
    assert!(
        r.agreement.as_ref().unwrap().agrees,
        "{}",
        r.agreement.unwrap()
    );
}

#[test]
fn storm_controls_cut_amplification_far_below_plain_retries() {
    let r = storm::run(&common::small_storm()).unwrap();
    let amp = |name: &str| r.strategy(name).unwrap().amplification;
    assert!((amp(storm::NO_RETRIES) - 1.0).abs() < 1e-9);
    assert!(amp(storm::PLAIN) > 2.8, "plain {}", amp(storm::PLAIN));
    assert!(
        amp(storm::TOKEN_BUCKET) < 1.2,
        "bucket {}",
        amp(storm::TOKEN_BUCKET)
    );
    assert!(
        amp(storm::RETRY_BUDGET) < 1.25,
        "budget {}",
        amp(storm::RETRY_BUDGET)
    );
    assert!(amp(storm::CLIENT_THROTTLING) < amp(storm::PLAIN));
    // Refusals are what cut it: the controls refused retries.
    assert!(r.strategy(storm::TOKEN_BUCKET).unwrap().retries_refused > 0);
    assert!(r.strategy(storm::RETRY_BUDGET).unwrap().retries_refused > 0);
    assert!(
        r.agreement.as_ref().unwrap().agrees,
        "{}",
        r.agreement.unwrap()
    );
    // Outside the incident the server keeps up: every strategy recovers.
    for name in [
        storm::NO_RETRIES,
        storm::PLAIN,
        storm::TOKEN_BUCKET,
        storm::RETRY_BUDGET,
    ] {
        let s = r.strategy(name).unwrap();
        assert!(
            s.recovery_s.is_some_and(|t| t < 2.0),
            "{name}: {:?}",
            s.recovery_s
        );
        assert!(
            s.success_rate > 0.5 && s.incident_success_rate < 0.2,
            "{name}"
        );
    }
}

#[test]
fn storm_overload_retries_make_things_worse() {
    let config = StormConfig {
        incident: storm::Incident::overload(Duration::from_secs(3), Duration::from_secs(4), 0.3),
        strategies: vec![
            StormStrategy {
                name: "none".into(),
                max_attempts: 1,
                control: StormControl::None,
            },
            StormStrategy {
                name: "plain".into(),
                max_attempts: 3,
                control: StormControl::None,
            },
        ],
        ..common::small_storm()
    };
    let r = storm::run(&config).unwrap();
    let none = r.strategy("none").unwrap();
    let plain = r.strategy("plain").unwrap();
    // Some calls still get through a partial overload, and retries add load.
    assert!(none.incident_success_rate > 0.2);
    assert!(plain.amplification > none.amplification);
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let herd = common::small_herd();
    let storm = common::small_storm();
    let cases: Vec<(&str, Result<(), SimError>)> = vec![
        (
            "clients",
            HerdConfig {
                clients: 0,
                ..herd.clone()
            }
            .validate(),
        ),
        (
            "window",
            HerdConfig {
                window: Duration::ZERO,
                ..herd.clone()
            }
            .validate(),
        ),
        (
            "outage",
            HerdConfig {
                outage: Duration::from_secs(7200),
                ..herd.clone()
            }
            .validate(),
        ),
        (
            "strategies",
            HerdConfig {
                strategies: vec![],
                ..herd.clone()
            }
            .validate(),
        ),
        (
            "clients",
            StormConfig {
                clients: 0,
                ..storm.clone()
            }
            .validate(),
        ),
        (
            "call_rate",
            StormConfig {
                call_rate: f64::NAN,
                ..storm.clone()
            }
            .validate(),
        ),
        (
            "call_rate",
            StormConfig {
                call_rate: -5.0,
                ..storm.clone()
            }
            .validate(),
        ),
        (
            "call_rate",
            StormConfig {
                call_rate: f64::INFINITY,
                ..storm.clone()
            }
            .validate(),
        ),
        (
            "duration",
            StormConfig {
                duration: Duration::ZERO,
                ..storm.clone()
            }
            .validate(),
        ),
        (
            "recovery_threshold",
            StormConfig {
                recovery_threshold: 1.5,
                ..storm.clone()
            }
            .validate(),
        ),
        (
            "incident",
            StormConfig {
                incident: storm::Incident::outage(Duration::from_secs(10), Duration::from_secs(10)),
                ..storm.clone()
            }
            .validate(),
        ),
        (
            "incident.capacity",
            StormConfig {
                incident: storm::Incident::overload(
                    Duration::ZERO,
                    Duration::from_secs(1),
                    f64::NAN,
                ),
                ..storm.clone()
            }
            .validate(),
        ),
    ];
    for (field, result) in cases {
        match result {
            Err(SimError::Config { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    // A control's own builder refuses its settings: a Core error, at run time.
    let bad_control = StormConfig {
        strategies: vec![StormStrategy {
            name: "bad".into(),
            max_attempts: 3,
            control: StormControl::TokenBucket {
                max_tokens: 10,
                token_ratio: f64::NAN,
            },
        }],
        ..storm.clone()
    };
    assert!(matches!(storm::run(&bad_control), Err(SimError::Core(_))));
    // Negative and NaN latencies are refused when parsed.
    assert!("exp:-3ms".parse::<Latency>().is_err());
    assert!("lognormal:1ms:NaN".parse::<Latency>().is_err());
    // run_all checks everything before running anything.
    let config = SimConfig {
        storm: Some(StormConfig {
            clients: 0,
            ..storm
        }),
        ..common::small()
    };
    assert!(steadfast_sim::run_all(&config).is_err());
}
