//! The `breaker` scenario: what a circuit breaker buys and costs when a
//! dependency goes down and comes back.

use std::time::Duration;

use steadfast_sim::breaker::{self, BREAKER, BREAKER_AND_BUDGET, BreakerConfig, NO_BREAKER};

fn small() -> BreakerConfig {
    BreakerConfig {
        clients: 20,
        call_rate: 400.0,
        duration: Duration::from_secs(40),
        outage_start: Duration::from_secs(10),
        outage_length: Duration::from_secs(15),
        ..BreakerConfig::default()
    }
}

#[test]
fn the_breaker_spares_the_down_server_and_costs_a_break_of_recovery() {
    let config = small();
    let result = breaker::run(&config).expect("valid config");
    let plain = result.strategy(NO_BREAKER).expect("standard");
    let guarded = result.strategy(BREAKER).expect("standard");
    let both = result.strategy(BREAKER_AND_BUDGET).expect("standard");
    // Same calls for every strategy (same seed).
    assert_eq!(plain.calls, guarded.calls);
    // Without a breaker every call tries 3 times against the down server.
    assert!(
        plain.late_outage_rate > 2.5 * 400.0,
        "{}",
        plain.late_outage_rate
    );
    assert_eq!((plain.refused, plain.openings), (0, 0));
    // With one, once open, only the probes go: 20 clients, 1 probe per 5 s.
    assert!(
        guarded.late_outage_rate <= 20.0 / 5.0 * 1.2,
        "{}",
        guarded.late_outage_rate
    );
    // With a budget too, retries are few, so the failure ratio climbs more
    // slowly and some breakers open later: still a trickle.
    assert!(both.late_outage_rate * 100.0 < plain.late_outage_rate);
    for s in [guarded, both] {
        assert!(s.down_attempts * 3 < plain.down_attempts);
        assert!(s.openings >= 20, "every client's breaker opened");
        // What it buys: the recovering server's first second is quieter.
        assert!(s.first_second_load < plain.first_second_load);
        // What it costs: calls refused after the server was back, until
        // each client's probe went through (within one break).
        assert!(s.refused_while_up > 0);
        let recovery = s.recovery_s.expect("recovered");
        assert!(recovery > 0.0 && recovery <= 5.25, "{recovery}");
    }
    assert!(plain.recovery_s.expect("recovered") <= 0.25);
    assert!(
        result.agreement.as_ref().is_some_and(|a| a.agrees),
        "{:?}",
        result.agreement
    );
}

#[test]
fn same_seed_same_numbers() {
    let config = BreakerConfig {
        duration: Duration::from_secs(20),
        outage_start: Duration::from_secs(5),
        outage_length: Duration::from_secs(5),
        ..small()
    };
    assert_eq!(
        breaker::run(&config).unwrap(),
        breaker::run(&config).unwrap()
    );
}

#[test]
fn bad_settings_are_refused_by_name() {
    let err = |c: BreakerConfig| breaker::run(&c).unwrap_err().to_string();
    assert!(
        err(BreakerConfig {
            clients: 0,
            ..small()
        })
        .contains("`clients`")
    );
    assert!(
        err(BreakerConfig {
            outage_length: Duration::from_secs(60),
            ..small()
        })
        .contains("`outage_length`")
    );
    assert!(
        err(BreakerConfig {
            strategies: vec![],
            ..small()
        })
        .contains("`strategies`")
    );
    let mut bad_breaker = breaker::BreakerStrategy::standard();
    if let Some(b) = bad_breaker[1].breaker.as_mut() {
        b.probes = 0;
    }
    let e = err(BreakerConfig {
        strategies: bad_breaker,
        ..small()
    });
    assert!(e.contains("`probes`"), "{e}");
}

#[test]
fn the_report_has_a_breaker_section_with_two_charts() {
    let config = steadfast_sim::SimConfig {
        breaker: Some(small()),
        ..steadfast_sim::SimConfig::none()
    };
    let report = steadfast_sim::run_all(&config).unwrap();
    let summary = report.summary();
    assert!(
        summary.starts_with("== breaker: a dependency down"),
        "{summary}"
    );
    assert!(
        summary.contains("calls refused") && summary.contains("while up"),
        "{summary}"
    );
    let dir = std::env::temp_dir().join(format!("steadfast-sim-breaker-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = report.write_to(&dir).unwrap();
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name()?.to_str().map(str::to_owned))
        .collect();
    assert_eq!(
        names,
        [
            "index.html",
            "breaker_attempts.svg",
            "breaker_attempts.png",
            "breaker_success.svg",
            "breaker_success.png"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
