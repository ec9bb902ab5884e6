//! The metastable scenario: the qualitative result of the papers, pinned
//! under fixed seeds, and its settings checked before anything runs.

use std::time::Duration;

use steadfast_sim::SimError;
use steadfast_sim::metastable::{
    self, CLIENT_THROTTLING, DEADLINE, MetastableConfig, NO_RETRIES, PLAIN, PROMPT_RECOVERY_S,
    RETRY_BUDGET, TOKEN_BUCKET,
};
use steadfast_sim::storm::Incident;

/// The default scenario, cut to 60 s so the suite stays quick in debug
/// builds: 30 s of calm, a 10 s trigger, 20 s after it.
fn short(seed: u64) -> MetastableConfig {
    MetastableConfig {
        duration: Duration::from_secs(60),
        seed,
        ..MetastableConfig::default()
    }
}

#[test]
fn plain_retries_stay_collapsed_after_the_trigger_and_the_cures_recover() {
    for seed in [1, 2, 3] {
        let r = metastable::run(&short(seed)).unwrap();
        let get = |name| r.strategy(name).unwrap();
        let plain = get(PLAIN);
        // Healthy before the trigger: the offered load (700/s) gets through.
        assert!(plain.goodput_before > 650.0, "seed {seed}: {plain:?}");
        // Collapsed after it, with the trigger long gone.
        assert_eq!(plain.recovery_s, None, "seed {seed}");
        assert!(
            plain.goodput_end < 0.05 * plain.goodput_before,
            "seed {seed}"
        );
        assert!(plain.amplification_after > 2.5, "seed {seed}");
        // The sustaining effect: most of the server's work is for callers
        // who have left.
        assert!(plain.wasted_share() > 0.5, "seed {seed}");
        for cure in [DEADLINE, RETRY_BUDGET, TOKEN_BUCKET, NO_RETRIES] {
            let s = get(cure);
            let recovered = s.recovery_s.unwrap_or(f64::INFINITY);
            assert!(
                recovered <= PROMPT_RECOVERY_S,
                "seed {seed}: {cure} recovered after {recovered} s"
            );
            // The last 10 s (well after the recovery) run at full goodput.
            let last: u64 = (50..60).map(|i| s.successes_per_bucket.count_at(i)).sum();
            assert!(
                last as f64 / 10.0 > 0.9 * s.goodput_before,
                "seed {seed}: {cure}: {last} in the last 10 s"
            );
        }
        // The controls hold the extra load to a few percent.
        assert!(get(RETRY_BUDGET).amplification_during < 1.2, "seed {seed}");
        assert!(get(TOKEN_BUCKET).amplification_during < 1.2, "seed {seed}");
        // The deadline's server drops expired work instead of serving it.
        let deadline = get(DEADLINE);
        assert!(
            deadline.dropped > 0 && deadline.wasted_share() < 0.1,
            "seed {seed}"
        );
        assert!(
            deadline.goodput_during > plain.goodput_during,
            "seed {seed}"
        );
        let agreement = r.agreement.as_ref().unwrap();
        assert!(agreement.agrees, "seed {seed}: {agreement}");
        assert!(agreement.source.contains("Bronson"));
        assert!(agreement.source.contains("Huang"));
    }
}

#[test]
fn the_default_run_agrees_with_the_papers() {
    let r = metastable::run(&MetastableConfig::default()).unwrap();
    let a = r.agreement.as_ref().unwrap();
    assert!(a.agrees, "{a}");
    assert!(a.to_string().contains("This run agrees"));
    // The adaptive throttle recovers slowly (its 2-minute window): it is
    // still below its earlier goodput at the end of the default run.
    let throttle = r.strategy(CLIENT_THROTTLING).unwrap();
    assert!(throttle.goodput_end < 0.9 * throttle.goodput_before);
    assert!(throttle.refused_locally > 0);
}

#[test]
fn without_a_trigger_plain_retries_stay_healthy() {
    // The same load with no trigger: retries alone do not collapse the
    // server, so the collapse above is the trigger's lasting effect.
    let config = MetastableConfig {
        trigger: Incident::overload(Duration::from_secs(30), Duration::from_secs(10), 1.0),
        ..short(1)
    };
    let r = metastable::run(&config).unwrap();
    let plain = r.strategy(PLAIN).unwrap();
    assert!(plain.goodput_end > 0.9 * plain.goodput_before, "{plain:?}");
    assert!(plain.amplification_after < 1.05);
    assert!(!r.agreement.unwrap().agrees, "no collapse, so no agreement");
}

#[test]
fn a_lower_load_rides_out_the_same_trigger() {
    // At 20 % of capacity even tripled load (60 %) fits: plain retries recover.
    let config = MetastableConfig {
        call_rate: 200.0,
        ..short(1)
    };
    let r = metastable::run(&config).unwrap();
    assert!(r.strategy(PLAIN).unwrap().recovery_s.is_some());
}

#[test]
fn same_seed_same_numbers() {
    let a = metastable::run(&short(9)).unwrap();
    let b = metastable::run(&short(9)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn bad_settings_are_refused_before_running() {
    let field = |config: MetastableConfig| match metastable::run(&config) {
        Err(SimError::Config { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let d = MetastableConfig::default;
    assert_eq!(
        field(MetastableConfig {
            attempt_timeout: Duration::ZERO,
            ..d()
        }),
        "attempt_timeout"
    );
    assert_eq!(
        field(MetastableConfig {
            duration: Duration::from_secs(40),
            ..d()
        }),
        "trigger"
    );
    assert_eq!(
        field(MetastableConfig {
            trigger: Incident::overload(Duration::ZERO, Duration::from_secs(10), 0.3),
            ..d()
        }),
        "trigger"
    );
    assert_eq!(
        field(MetastableConfig {
            clients: 1_000_001,
            ..d()
        }),
        "clients"
    );
    assert_eq!(
        field(MetastableConfig {
            call_rate: 1e9,
            ..d()
        }),
        "call_rate"
    );
    assert_eq!(
        field(MetastableConfig {
            call_rate: f64::NAN,
            ..d()
        }),
        "call_rate"
    );
    assert_eq!(
        field(MetastableConfig {
            trigger: Incident::overload(Duration::from_secs(1), Duration::from_secs(1), 1.5),
            ..d()
        }),
        "trigger.capacity"
    );
}
