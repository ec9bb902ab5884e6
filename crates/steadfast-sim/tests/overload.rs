//! The `overload` scenario: a capacity drop under a fixed arrival rate,
//! with no concurrency limit, static limits and adaptive ones.

mod common;

use std::time::Duration;

use steadfast_sim::overload::{
    self, AIMD, GRADIENT2, NO_LIMIT, OverloadConfig, OverloadLimit, OverloadResult,
    OverloadStrategyResult, VEGAS, WITH_RETRIES,
};
use steadfast_sim::storm::Incident;

fn run(config: &OverloadConfig) -> OverloadResult {
    overload::run(config).expect("valid config")
}

fn get<'a>(r: &'a OverloadResult, name: &str) -> &'a OverloadStrategyResult {
    r.strategy(name)
        .unwrap_or_else(|| panic!("no strategy {name}"))
}

#[test]
fn without_a_limit_the_queue_takes_latency_and_goodput_down() {
    let r = run(&common::small_overload());
    let none = get(&r, NO_LIMIT);
    let unloaded = none.p99_before_ms.expect("successes before the drop");
    let during = none.p99_during_ms.expect("some successes in the drop");
    assert!(during > 4.0 * unloaded, "{during} vs {unloaded}");
    // The queue outgrew the attempt timeout: the server served callers who
    // had left, and goodput collapsed to a fraction of the 250/s left.
    assert!(none.timed_out > 0 && none.wasted > 0);
    assert!(none.goodput_during < 50.0, "{}", none.goodput_during);
    // Before and after, the server takes the whole load.
    assert!(none.goodput_before > 450.0 && none.goodput_after > 450.0);
    assert_eq!(none.shed, 0);
    assert!(none.limit.is_none());
}

#[test]
fn adaptive_limits_follow_the_drop_and_the_recovery() {
    let r = run(&common::small_overload());
    for name in [GRADIENT2, VEGAS] {
        let s = get(&r, name);
        let t = s.limit.as_ref().expect("a limit trace");
        assert!(s.adaptive);
        assert!(t.during < t.before, "{name}: {} -> {}", t.before, t.during);
        assert!(t.after > t.during, "{name}: {} -> {}", t.during, t.after);
        assert!(f64::from(t.lowest_during) < t.before, "{name}");
        let down = t.drop_follow_s.expect("came down");
        let up = t.recovery_follow_s.expect("went up");
        // Within the drop (8 s) and the time after it (8 s).
        assert!(down < 8.0 && up < 8.0, "{name}: {down} / {up}");
        // One sample per 100 ms over the whole run.
        assert_eq!(t.samples.len(), 241, "{name}");
    }
    // Gradient2, the default of every integration, keeps the latency near
    // the unloaded one and the server busy with wanted work.
    let unloaded = get(&r, NO_LIMIT).p99_before_ms.expect("unloaded p99");
    let g = get(&r, GRADIENT2);
    let p99 = g.p99_during_ms.expect("successes in the drop");
    assert!(p99 < 2.0 * unloaded, "{p99} vs {unloaded}");
    assert!(g.goodput_during > 0.9 * 250.0, "{}", g.goodput_during);
    assert!(g.shed > 0 && g.timed_out == 0, "{} {}", g.shed, g.timed_out);
}

#[test]
fn in_flight_never_exceeds_the_limit() {
    let r = run(&common::small_overload());
    for s in &r.strategies {
        let Some(t) = &s.limit else { continue };
        assert_eq!(t.over_limit, 0, "{}", s.name);
        let most = t.samples.iter().copied().max().unwrap_or(0);
        assert!(
            t.max_in_flight <= most.max(1),
            "{}: {} > {most}",
            s.name,
            t.max_in_flight
        );
    }
    let fixed = r
        .config
        .strategies
        .iter()
        .filter_map(|s| match s.limit {
            OverloadLimit::Fixed { slots } => Some((s.name.as_str(), slots)),
            _ => None,
        })
        .collect::<Vec<_>>();
    assert!(!fixed.is_empty());
    for (name, slots) in fixed {
        let t = get(&r, name).limit.as_ref().expect("a trace");
        assert!(t.max_in_flight <= slots, "{name}");
        assert!(t.samples.iter().all(|&v| v == slots), "{name}");
    }
}

#[test]
fn every_call_is_shed_served_or_failed_exactly_once() {
    let r = run(&common::small_overload());
    let calls = r.strategies[0].calls;
    assert!(calls > 10_000);
    for s in &r.strategies {
        // The same calls for every strategy (same seed).
        assert_eq!(s.calls, calls, "{}", s.name);
        assert!(s.succeeded + s.shed <= s.calls, "{}", s.name);
        if s.max_attempts == 1 {
            // A call refused its slot makes no attempt; every other makes one.
            assert_eq!(s.attempts + s.shed, s.calls, "{}", s.name);
            assert_eq!(s.shed_retries, 0, "{}", s.name);
        } else {
            assert!(s.attempts + s.shed >= s.calls, "{}", s.name);
        }
    }
    // Without a limit, retries multiply the attempts in the drop.
    let retried = get(&r, &format!("{NO_LIMIT}{WITH_RETRIES}"));
    assert!(retried.attempts as f64 > 1.3 * retried.calls as f64);
}

#[test]
fn aimd_grows_while_it_sees_no_drop() {
    // AIMD shrinks on drops only; a deep queue and a long timeout give it
    // none, so it grows while the server slows down.
    let r = run(&common::small_overload());
    let a = get(&r, AIMD);
    let t = a.limit.as_ref().expect("a trace");
    assert_eq!(a.rejected, 0);
    assert!(t.during > t.before, "{} -> {}", t.before, t.during);
    // A short queue answers 503 before the wait passes the timeout: drops,
    // and AIMD comes down.
    let mut shallow = common::small_overload();
    shallow.server.queue_limit = 10;
    let r = run(&shallow);
    let a = get(&r, AIMD);
    let t = a.limit.as_ref().expect("a trace");
    assert!(a.rejected > 0);
    assert!(t.during < t.before, "{} -> {}", t.before, t.during);
}

#[test]
fn the_run_agrees_with_netflix_on_its_defaults_scaled_down() {
    let r = run(&common::small_overload());
    let a = r.agreement.as_ref().expect("a comparison");
    assert!(a.source.contains("Performance Under Load"));
    assert!(a.agrees, "{a}");
    assert!(a.detail.contains(GRADIENT2), "{a}");
}

#[test]
fn same_seed_same_numbers_other_seed_other_numbers() {
    let config = OverloadConfig {
        strategies: common::small_overload()
            .strategies
            .into_iter()
            .filter(|s| s.name == GRADIENT2 || s.name == NO_LIMIT)
            .collect(),
        ..common::small_overload()
    };
    let a = run(&config);
    assert_eq!(a, run(&config));
    let b = run(&OverloadConfig { seed: 2, ..config });
    assert_ne!(a.strategies, b.strategies);
}

#[test]
fn bad_settings_are_refused_by_name() {
    let err = |c: OverloadConfig| overload::run(&c).unwrap_err().to_string();
    let base = common::small_overload;
    for (capacity, field) in [(1.0, "`drop.capacity`"), (0.0, "`drop.capacity`")] {
        let e = err(OverloadConfig {
            drop: Incident::overload(Duration::from_secs(8), Duration::from_secs(8), capacity),
            ..base()
        });
        assert!(e.contains(field), "{e}");
    }
    let e = err(OverloadConfig {
        drop: Incident::outage(Duration::from_secs(8), Duration::from_secs(8)),
        ..base()
    });
    assert!(e.contains("`drop.capacity`"), "{e}");
    let e = err(OverloadConfig {
        drop: Incident::overload(Duration::from_secs(8), Duration::from_secs(15), 0.25),
        ..base()
    });
    assert!(
        e.contains("`drop`") && e.contains("before `duration`"),
        "{e}"
    );
    let e = err(OverloadConfig {
        drop: Incident::overload(Duration::from_secs(1), Duration::from_secs(8), 0.25),
        ..base()
    });
    assert!(e.contains("`drop`"), "{e}");
    let e = err(OverloadConfig {
        window: Duration::ZERO,
        ..base()
    });
    assert!(e.contains("`window`"), "{e}");
    let mut bad = base();
    bad.strategies[4].limit = OverloadLimit::Vegas(overload::Bounds {
        initial: 5,
        min: 10,
        max: 4,
    });
    assert!(err(bad).contains("`strategies.limit.max`"));
    let mut bad = base();
    bad.strategies[1].limit = OverloadLimit::Fixed { slots: 0 };
    assert!(err(bad).contains("`strategies.limit.slots`"));
}

#[test]
fn the_report_has_an_overload_section_with_three_charts() {
    let config = steadfast_sim::SimConfig {
        overload: Some(common::small_overload()),
        ..steadfast_sim::SimConfig::none()
    };
    let report = steadfast_sim::run_all(&config).unwrap();
    let summary = report.summary();
    assert!(summary.starts_with("== overload"), "{summary}");
    for text in [
        "static 20",
        "Gradient2 + retries",
        "Performance Under Load",
        "The adaptive limits (window 100ms)",
        "Retries (3 attempts)",
    ] {
        assert!(summary.contains(text), "{text}: {summary}");
    }
    let dir = std::env::temp_dir().join(format!("steadfast-sim-overload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = report.write_to(&dir).unwrap();
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name()?.to_str().map(str::to_owned))
        .collect();
    for stem in ["overload_limit", "overload_goodput", "overload_latency"] {
        for ext in ["svg", "png"] {
            assert!(
                names.contains(&format!("{stem}.{ext}")),
                "{stem}.{ext}: {names:?}"
            );
        }
    }
    let index = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(index.contains("id=\"overload\""));
    let _ = std::fs::remove_dir_all(&dir);
}
