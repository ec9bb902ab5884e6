//! Same seed, same numbers, bit for bit; another seed, other numbers.

mod common;

#[test]
fn same_seed_gives_identical_results() {
    let a = steadfast_sim::run_all(&common::small().with_seed(11)).unwrap();
    let b = steadfast_sim::run_all(&common::small().with_seed(11)).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    assert_eq!(a.summary(), b.summary());
}

#[test]
fn different_seeds_give_different_numbers() {
    let a = steadfast_sim::run_all(&common::small().with_seed(1)).unwrap();
    let b = steadfast_sim::run_all(&common::small().with_seed(2)).unwrap();
    let (ha, hb) = (a.herd.unwrap(), b.herd.unwrap());
    let full = |h: &steadfast_sim::herd::HerdResult| {
        h.strategies
            .iter()
            .find(|s| s.name == "full jitter")
            .unwrap()
            .total_attempts
    };
    assert_ne!(full(&ha), full(&hb));
    let (sa, sb) = (a.storm.unwrap(), b.storm.unwrap());
    assert_ne!(sa.strategies[0].calls, sb.strategies[0].calls);
    assert_ne!(sa.strategies, sb.strategies);
}

#[test]
fn every_storm_strategy_sees_the_same_calls() {
    let r = steadfast_sim::storm::run(&common::small_storm()).unwrap();
    let calls = r.strategies[0].calls;
    assert!(calls > 1000);
    for s in &r.strategies {
        assert_eq!(s.calls, calls, "{}", s.name);
        assert_eq!(
            s.calls_per_bucket, r.strategies[0].calls_per_bucket,
            "{}",
            s.name
        );
    }
}
