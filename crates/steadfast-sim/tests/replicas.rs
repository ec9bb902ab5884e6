//! The `replicas` scenario: one bad replica among good ones, with retries
//! anywhere, retries elsewhere through an endpoint set, and with ejection.

use std::time::Duration;

use steadfast_sim::replicas::{
    self, ANYWHERE, ELSEWHERE, ELSEWHERE_EJECTING, Ejection, ReplicasConfig, ReplicasStrategy,
};

fn small() -> ReplicasConfig {
    ReplicasConfig {
        call_rate: 400.0,
        duration: Duration::from_secs(30),
        ..ReplicasConfig::default()
    }
}

#[test]
fn retries_elsewhere_never_meet_the_bad_replica_twice() {
    let result = replicas::run(&small()).expect("valid config");
    let anywhere = result.strategy(ANYWHERE).expect("standard");
    let elsewhere = result.strategy(ELSEWHERE).expect("standard");
    let ejecting = result.strategy(ELSEWHERE_EJECTING).expect("standard");
    // Same calls for every strategy (same seed).
    assert_eq!(anywhere.calls, elsewhere.calls);
    // A random pick sends the bad replica its fifth of every attempt, and
    // fails the calls that drew it three times: about (1/5)^3.
    assert!((0.17..0.23).contains(&anywhere.bad_share), "{anywhere:?}");
    assert!(anywhere.met_bad_twice > 0);
    assert!(anywhere.success_rate < 0.999);
    // Through the set: no call meets it twice, every call succeeds, and
    // the load penalty keeps it nearly idle.
    for s in [elsewhere, ejecting] {
        assert_eq!(s.met_bad_twice, 0, "{s:?}");
        assert!((s.success_rate - 1.0).abs() < f64::EPSILON, "{s:?}");
        assert!(s.bad_attempts * 10 < anywhere.bad_attempts, "{s:?}");
        assert!(s.attempts_per_call < anywhere.attempts_per_call);
    }
    assert!(
        result.agreement.as_ref().is_some_and(|a| a.agrees),
        "{:?}",
        result.agreement
    );
}

#[test]
fn a_replica_failing_some_calls_is_ejected_only_with_detection() {
    // Half the replicas' worth of calls fail on the bad one, once in two:
    // the penalty steers both set strategies; the A50 strategy runs too.
    let config = ReplicasConfig {
        bad_failure: 0.5,
        strategies: vec![
            ReplicasStrategy {
                name: "a50".to_owned(),
                max_attempts: 2,
                elsewhere: true,
                ejection: Ejection::A50,
            },
            ReplicasStrategy {
                name: "anywhere".to_owned(),
                max_attempts: 2,
                elsewhere: false,
                ejection: Ejection::None,
            },
        ],
        ..small()
    };
    let result = replicas::run(&config).expect("valid config");
    let a50 = result.strategy("a50").expect("configured");
    let anywhere = result.strategy("anywhere").expect("configured");
    assert_eq!(a50.met_bad_twice, 0);
    assert!(a50.bad_attempts < anywhere.bad_attempts);
    // Without the standard strategies' names there is nothing to hold the
    // run against.
    assert!(result.agreement.is_none());
}

#[test]
fn the_same_seed_gives_the_same_numbers() {
    let config = ReplicasConfig {
        call_rate: 100.0,
        duration: Duration::from_secs(10),
        ..ReplicasConfig::default()
    };
    assert_eq!(
        replicas::run(&config).unwrap(),
        replicas::run(&config).unwrap()
    );
    let other = ReplicasConfig {
        seed: 2,
        ..config.clone()
    };
    assert_ne!(
        replicas::run(&config).unwrap().strategies[0].bad_attempts,
        replicas::run(&other).unwrap().strategies[0].bad_attempts
    );
}

#[test]
fn bad_settings_are_refused_with_the_field() {
    for (config, field) in [
        (
            ReplicasConfig {
                replicas: 1,
                bad: 0,
                ..small()
            },
            "`replicas`",
        ),
        (ReplicasConfig { bad: 5, ..small() }, "`bad`"),
        (
            ReplicasConfig {
                bad_failure: 1.5,
                ..small()
            },
            "`bad_failure`",
        ),
        (
            ReplicasConfig {
                call_rate: 0.0,
                ..small()
            },
            "`call_rate`",
        ),
        (
            ReplicasConfig {
                strategies: Vec::new(),
                ..small()
            },
            "strateg",
        ),
    ] {
        let err = replicas::run(&config).unwrap_err().to_string();
        assert!(err.contains(field), "{field}: {err}");
    }
}
