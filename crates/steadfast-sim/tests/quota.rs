//! The `quota` scenario: many clients sharing one provider's quota, with no
//! limit (retries ignoring or honouring Retry-After), per-client limits and
//! one shared limit.

mod common;

use std::time::Duration;

use steadfast_sim::quota::{
    self, HONOURING, IGNORING, PER_CLIENT, PER_CLIENT_WAITING, QuotaConfig, QuotaResult,
    QuotaStrategyResult, RetryAfter, SHARED, SHARED_WAITING,
};

fn run(config: &QuotaConfig) -> QuotaResult {
    quota::run(config).expect("valid config")
}

fn get<'a>(r: &'a QuotaResult, name: &str) -> &'a QuotaStrategyResult {
    r.strategy(name)
        .unwrap_or_else(|| panic!("no strategy {name}"))
}

#[test]
fn with_a_limit_of_the_quota_the_provider_gets_no_more_than_it_and_refuses_nothing() {
    for skew in [1.0, 0.0] {
        let r = run(&QuotaConfig {
            skew,
            ..common::small_quota()
        });
        let burst = f64::from(r.config.burst());
        for name in [SHARED, SHARED_WAITING, PER_CLIENT, PER_CLIENT_WAITING] {
            let s = get(&r, name);
            // In every stretch of time t, at most the burst + t × the rate.
            assert!(s.peak_burst <= burst, "{name} {skew}: {}", s.peak_burst);
            assert_eq!(s.rejected, 0, "{name} {skew}");
            assert_eq!(s.attempts, s.admitted, "{name} {skew}");
            assert_eq!(s.gave_up(), 0, "{name} {skew}");
            // Demand is above the quota: the rest is refused at the client.
            assert!(s.refused_locally > s.calls / 5, "{name} {skew}");
            assert!(s.received_per_s <= 100.0 + burst / 20.0, "{name} {skew}");
        }
        // The shared limit is the provider's quota: it uses all of it.
        let shared = get(&r, SHARED);
        assert!(shared.peak_burst > 0.9 * burst, "{}", shared.peak_burst);
        assert!(
            shared.goodput_per_s > 0.98 * 100.0,
            "{}",
            shared.goodput_per_s
        );
    }
}

#[test]
fn without_a_limit_the_provider_sees_a_storm_of_attempts() {
    let r = run(&common::small_quota());
    let burst = f64::from(r.config.burst());
    for name in [IGNORING, HONOURING] {
        let s = get(&r, name);
        assert!(
            s.received_per_s > 2.0 * 100.0,
            "{name}: {}",
            s.received_per_s
        );
        assert!(s.rejected_per_s > 100.0, "{name}: {}", s.rejected_per_s);
        assert!(s.peak_burst > 10.0 * burst, "{name}: {}", s.peak_burst);
        assert_eq!(s.refused_locally, 0, "{name}");
        // No retry policy makes the quota bigger: about its worth gets through.
        assert!(
            (s.goodput_per_s - 100.0).abs() < 5.0,
            "{name}: {}",
            s.goodput_per_s
        );
    }
}

#[test]
fn ignoring_retry_after_sends_more_attempts_per_call_than_honouring_it() {
    let r = run(&common::small_quota());
    let (ignoring, honouring) = (get(&r, IGNORING), get(&r, HONOURING));
    assert!(
        ignoring.attempts_per_call() > 1.5 * honouring.attempts_per_call(),
        "{} vs {}",
        ignoring.attempts_per_call(),
        honouring.attempts_per_call()
    );
    assert!(ignoring.rejected > 2 * honouring.rejected);
    // The provider's wait, said in whole seconds, is 1 s: with less than
    // that left of its 2 s deadline, a call stops at once (the policy never
    // waits past the deadline); the backoff's short delays spend the
    // attempts instead.
    assert_eq!(r.config.retry_after, RetryAfter::Seconds);
    assert!(honouring.past_deadline > honouring.calls / 5);
    assert_eq!(honouring.exhausted, 0);
    assert!(ignoring.exhausted > ignoring.calls / 5);
    assert_eq!(ignoring.past_deadline, 0);
    // ... so honouring waits a second before it fails, or succeeds late.
    let failed = honouring.failed_p50_ms.expect("failures");
    assert!((1_000.0..2_000.0).contains(&failed), "{failed}");
    assert!(honouring.p99_ms.expect("successes") > 1_000.0);
}

#[test]
fn exact_hints_bring_the_retries_back_together() {
    // In milliseconds the hint is the provider's exact wait: every request
    // refused in the same 10 ms is told the same instant, so honouring it
    // does not lower the load; the calls fail sooner, though.
    let r = run(&QuotaConfig {
        retry_after: RetryAfter::Millis,
        ..common::small_quota()
    });
    let (ignoring, honouring) = (get(&r, IGNORING), get(&r, HONOURING));
    assert!(
        honouring.attempts_per_call() > 0.9 * ignoring.attempts_per_call(),
        "{} vs {}",
        honouring.attempts_per_call(),
        ignoring.attempts_per_call()
    );
    assert!(honouring.failed_p50_ms < ignoring.failed_p50_ms);
}

#[test]
fn per_client_shares_waste_quota_under_uneven_demand_a_shared_limit_does_not() {
    let uneven = run(&common::small_quota());
    let unused = uneven.config.unused_shares();
    assert!(unused > 15.0, "{unused}");
    for name in [PER_CLIENT, PER_CLIENT_WAITING] {
        let s = get(&uneven, name);
        // The quiet clients' shares go unused while the busy ones are refused.
        assert!(
            s.goodput_per_s < 100.0 - 0.8 * unused,
            "{name}: {} with {unused} unused",
            s.goodput_per_s
        );
    }
    let shared = get(&uneven, SHARED);
    assert!(shared.goodput_per_s > 0.98 * 100.0);
    // With even demand every share is used: they do as well.
    let even = run(&QuotaConfig {
        skew: 0.0,
        ..common::small_quota()
    });
    let (p, s) = (get(&even, PER_CLIENT), get(&even, SHARED));
    assert!(
        (p.goodput_per_s - s.goodput_per_s).abs() < 0.03 * s.goodput_per_s,
        "{} vs {}",
        p.goodput_per_s,
        s.goodput_per_s
    );
}

#[test]
fn waiting_for_a_turn_adds_latency_not_goodput_under_sustained_demand() {
    let r = run(&common::small_quota());
    let (refusing, waiting) = (get(&r, SHARED), get(&r, SHARED_WAITING));
    assert!(waiting.waited_for_turn > waiting.calls / 4);
    assert_eq!(refusing.waited_for_turn, 0);
    // The turns book up to 1 s ahead: the calls that get one wait for it.
    assert!(waiting.p50_ms.expect("successes") > 500.0);
    assert!(refusing.p50_ms.expect("successes") < 100.0);
    // ... and the calls beyond are refused all the same.
    assert!(waiting.refused_locally > waiting.calls / 4);
    assert!((waiting.goodput_per_s - refusing.goodput_per_s).abs() < 2.0);
    // A turn never comes past the call's deadline: none was cut there.
    assert_eq!(waiting.past_deadline, 0);
    // Refused at once means failed at once.
    assert_eq!(refusing.failed_p50_ms, Some(0.0));
}

#[test]
fn every_call_ends_exactly_once_and_every_strategy_sees_the_same_calls() {
    let r = run(&common::small_quota());
    let calls = r.strategies[0].calls;
    assert!(calls > 2_500, "{calls}");
    for s in &r.strategies {
        assert_eq!(s.calls, calls, "{}", s.name);
        assert_eq!(s.succeeded + s.failed(), s.calls, "{}", s.name);
        assert_eq!(s.admitted + s.rejected, s.attempts, "{}", s.name);
        // Every request admitted is a success, but one answered after its
        // call's deadline.
        assert!(s.admitted >= s.succeeded, "{}", s.name);
        assert!(s.succeeded + s.cut_at_deadline >= s.admitted, "{}", s.name);
        assert!(s.attempts_per_call() <= 4.0, "{}", s.name);
        // One bucket a second over the run, and the retries finishing after it.
        assert!(s.received_per_bucket.counts().len() >= 20, "{}", s.name);
        let received: u64 = s.received_per_bucket.counts().iter().sum();
        assert_eq!(received, s.attempts, "{}", s.name);
    }
}

#[test]
fn same_seed_same_numbers_other_seed_other_numbers() {
    let config = common::small_quota();
    let a = run(&config);
    assert_eq!(a, run(&config));
    let b = run(&QuotaConfig { seed: 2, ..config });
    assert_ne!(a.strategies, b.strategies);
    assert_ne!(a.strategies[0].calls, b.strategies[0].calls);
}

#[test]
fn bad_settings_are_refused_by_name() {
    let err = |c: QuotaConfig| quota::run(&c).unwrap_err().to_string();
    let base = common::small_quota;
    for (config, field) in [
        (QuotaConfig { quota: 0, ..base() }, "`quota`"),
        (
            QuotaConfig {
                quota: 2_000_000_000,
                ..base()
            },
            "`quota`",
        ),
        (
            QuotaConfig {
                burst: Some(0),
                ..base()
            },
            "`burst`",
        ),
        (
            QuotaConfig {
                clients: 0,
                ..base()
            },
            "`clients`",
        ),
        (
            QuotaConfig {
                call_rate: f64::NAN,
                ..base()
            },
            "`call_rate`",
        ),
        (
            QuotaConfig {
                skew: -1.0,
                ..base()
            },
            "`skew`",
        ),
        (
            QuotaConfig {
                skew: f64::INFINITY,
                ..base()
            },
            "`skew`",
        ),
        (
            QuotaConfig {
                duration: Duration::ZERO,
                ..base()
            },
            "`duration`",
        ),
        (
            QuotaConfig {
                deadline: Duration::ZERO,
                ..base()
            },
            "`deadline`",
        ),
        (
            QuotaConfig {
                deadline: Duration::from_secs(10_000_000),
                ..base()
            },
            "`deadline`",
        ),
        (
            QuotaConfig {
                max_attempts: 0,
                ..base()
            },
            "`max_attempts`",
        ),
        (
            QuotaConfig {
                max_attempts: 101,
                ..base()
            },
            "`max_attempts`",
        ),
        (
            QuotaConfig {
                strategies: Vec::new(),
                ..base()
            },
            "`strategies`",
        ),
        (
            QuotaConfig {
                call_rate: 1e7,
                ..base()
            },
            "`call_rate`",
        ),
        (
            QuotaConfig {
                latency: steadfast_sim::Latency::Mixture(Vec::new()),
                ..base()
            },
            "`mixture`",
        ),
    ] {
        let e = err(config);
        assert!(e.contains(field), "{field}: {e}");
        assert!(
            e.starts_with("invalid quota config") || e.starts_with("invalid latency"),
            "{e}"
        );
    }
}

#[test]
fn the_report_has_a_quota_section_with_three_charts() {
    let config = steadfast_sim::SimConfig {
        quota: Some(common::small_quota()),
        ..steadfast_sim::SimConfig::none()
    };
    let report = steadfast_sim::run_all(&config).unwrap();
    let summary = report.summary();
    assert!(summary.starts_with("== quota"), "{summary}");
    for text in [
        "20 clients share a provider's quota of 100 requests/s",
        "no limit, ignoring Retry-After",
        "shared limit, waiting",
        "beyond what its rate earns in that stretch was 100 (its burst: 100",
        "no retry strategy makes the quota bigger",
        "whole seconds make it 1 s",
        "% of the quota, where \"shared limit\" got",
        "adds latency, not goodput",
        "Seed 1",
    ] {
        assert!(summary.contains(text), "{text}: {summary}");
    }
    let dir = std::env::temp_dir().join(format!("steadfast-sim-quota-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = report.write_to(&dir).unwrap();
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name()?.to_str().map(str::to_owned))
        .collect();
    for stem in ["quota_received", "quota_goodput", "quota_latency"] {
        for ext in ["svg", "png"] {
            assert!(
                names.contains(&format!("{stem}.{ext}")),
                "{stem}.{ext}: {names:?}"
            );
        }
    }
    let index = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(index.contains("id=\"quota\""));
    let svg = std::fs::read_to_string(dir.join("quota_received.svg")).unwrap();
    assert!(svg.contains("the quota (100/s)"), "the reference line");
    let _ = std::fs::remove_dir_all(&dir);
}
