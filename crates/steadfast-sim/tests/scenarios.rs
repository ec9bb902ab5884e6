//! Each scenario's qualitative result, and bad input.

mod common;

use std::time::Duration;

use steadfast_sim::herd::{self, HerdConfig};
use steadfast_sim::storm::{self, StormConfig, StormControl, StormStrategy};
use steadfast_sim::tail::{self, TailConfig, TailHedge, TailStrategy};
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
            HerdConfig {
                clients: u32::MAX,
                ..herd.clone()
            }
            .validate(),
        ),
        (
            "horizon",
            HerdConfig {
                window: Duration::from_nanos(1),
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

#[test]
fn tail_hedging_cuts_the_999th_percentile_many_times_for_a_few_percent_more_requests() {
    let r = tail::run(&common::small_tail()).unwrap();
    let none = r.strategy(tail::NO_HEDGING).unwrap();
    let fixed = r.strategy(tail::FIXED_DELAY).unwrap();
    let adaptive = r.strategy(tail::ADAPTIVE_DELAY).unwrap();
    assert_eq!(none.requests, none.calls);
    assert!(none.extra_requests.abs() < 1e-12);
    for s in [fixed, adaptive] {
        assert_eq!(s.succeeded, s.calls, "{}", s.name);
        assert!(
            s.p999_ms * 4.0 < none.p999_ms,
            "{}: {} vs {}",
            s.name,
            s.p999_ms,
            none.p999_ms
        );
        assert!(
            s.extra_requests > 0.0 && s.extra_requests < 0.10,
            "{}: {}",
            s.name,
            s.extra_requests
        );
        // Hedging leaves the fast majority alone.
        assert!((s.p50_ms - none.p50_ms).abs() < 0.2, "{}", s.name);
    }
    assert!(
        r.agreement.as_ref().unwrap().agrees,
        "{}",
        r.agreement.unwrap()
    );
}

#[test]
fn tail_bad_hedging_settings_are_core_errors() {
    let config = TailConfig {
        strategies: vec![TailStrategy {
            name: "bad".into(),
            hedge: TailHedge::Adaptive {
                quantile: f64::NAN,
                fallback: Duration::from_millis(1),
                max_attempts: 2,
            },
        }],
        ..common::small_tail()
    };
    assert!(matches!(tail::run(&config), Err(SimError::Core(_))));
    let zero = TailConfig {
        calls: 0,
        ..common::small_tail()
    };
    assert!(matches!(
        zero.validate(),
        Err(SimError::Config { field: "calls", .. })
    ));
    let nan = TailConfig {
        call_rate: f64::NAN,
        ..common::small_tail()
    };
    assert!(matches!(
        nan.validate(),
        Err(SimError::Config {
            field: "call_rate",
            ..
        })
    ));
}

#[test]
fn sizes_that_cannot_finish_are_refused_up_front_naming_the_field_and_limit() {
    use steadfast_sim::SimError;
    use steadfast_sim::herd::HerdConfig;
    use steadfast_sim::storm::StormConfig;
    use steadfast_sim::tail::TailConfig;
    let refused = |r: Result<(), SimError>, want: &str, limit: &str| match r {
        Err(e @ SimError::Config { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&format!("`{want}`")), "{text}");
            assert!(text.contains(limit), "{text}");
        }
        other => panic!("{want}: {other:?}"),
    };
    refused(
        TailConfig {
            calls: u32::MAX,
            ..TailConfig::default()
        }
        .validate(),
        "calls",
        "20,000,000",
    );
    refused(
        HerdConfig {
            clients: 10_000_000,
            ..HerdConfig::default()
        }
        .validate(),
        "clients",
        "1,000,000",
    );
    refused(
        HerdConfig {
            horizon: Duration::from_secs(99_999_999_999 * 3600),
            ..HerdConfig::default()
        }
        .validate(),
        "horizon",
        "1,000,000 buckets",
    );
    refused(
        StormConfig {
            call_rate: 1e6,
            duration: Duration::from_secs(3600),
            ..StormConfig::default()
        }
        .validate(),
        "call_rate",
        "20,000,000 calls",
    );
    let mut storm = StormConfig::default();
    storm.server.concurrency = u32::MAX;
    storm.server.queue_limit = u32::MAX;
    refused(storm.validate(), "queue_limit", "10,000,000");
}
