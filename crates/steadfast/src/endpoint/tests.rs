//! The endpoint parts on virtual time: the detector's arithmetic (with the
//! published worked examples), its timings, its cap; the load; the pick.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::rng::Rng;

const S: Duration = Duration::from_secs(1);

fn hosts(tallies: &[(u64, u64)]) -> Vec<Host> {
    tallies
        .iter()
        .map(|&(s, f)| {
            let mut h = Host::new();
            h.set_tally(s, f);
            h
        })
        .collect()
}

fn sweep(d: &mut Detector, now: Instant, hosts: &mut [Host]) -> Vec<Event> {
    let mut events = Vec::new();
    d.sweep(now, hosts, |e| events.push(e));
    events
}

fn ejected(events: &[Event]) -> Vec<usize> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ejected { host, .. } => Some(*host),
            _ => None,
        })
        .collect()
}

fn success_rate_only() -> OutlierDetectionBuilder {
    OutlierDetection::a50().failure_percentage(None)
}

fn failure_percentage_only(model: OutlierDetectionBuilder) -> OutlierDetectionBuilder {
    model
        .success_rate(None)
        .failure_percentage(Some(FailurePercentage {
            enforcement_percentage: 100,
            ..FailurePercentage::default()
        }))
}

#[test]
fn envoys_worked_example_threshold_is_52() {
    // {50, 100, 100, 100, 100} %: mean 90, stdev 20, threshold 90 - 1.9 × 20 = 52.
    let t0 = Instant::now();
    let mut d = Detector::new(success_rate_only().build().unwrap());
    let mut h = hosts(&[(50, 50), (100, 0), (100, 0), (100, 0), (100, 0)]);
    assert_eq!(ejected(&sweep(&mut d, t0, &mut h)), [0]);
    // {50, 60, 100, 100, 100} %: mean 82, stdev 22.27, threshold 39.7: none out.
    let mut d = Detector::new(success_rate_only().build().unwrap());
    let mut h = hosts(&[(50, 50), (60, 40), (100, 0), (100, 0), (100, 0)]);
    assert!(sweep(&mut d, t0, &mut h).is_empty());
    // At factor 1.0 the threshold is 59.7: the 50 % endpoint is out, the 60 % one is not.
    let mut d = Detector::new(
        OutlierDetection::a50()
            .failure_percentage(None)
            .success_rate(Some(SuccessRate {
                stdev_factor: 1000,
                ..SuccessRate::default()
            }))
            .build()
            .unwrap(),
    );
    assert_eq!(ejected(&sweep(&mut d, t0, &mut h)), [0]);
}

#[test]
fn success_rate_needs_minimum_hosts_with_the_volume() {
    let t0 = Instant::now();
    let mut d = Detector::new(success_rate_only().build().unwrap());
    // One of the five below request_volume (100): four judged < minimum_hosts (5).
    let mut h = hosts(&[(0, 100), (100, 0), (100, 0), (100, 0), (99, 0)]);
    assert!(sweep(&mut d, t0, &mut h).is_empty());
    let mut h = hosts(&[(0, 100), (100, 0), (100, 0), (100, 0), (100, 0)]);
    assert_eq!(ejected(&sweep(&mut d, t0, &mut h)), [0]);
}

#[test]
fn a50_failure_percentage_is_strictly_over_the_threshold() {
    let t0 = Instant::now();
    let tallies = [(15, 85), (100, 0), (100, 0), (100, 0), (100, 0)];
    let mut a50 = Detector::new(
        failure_percentage_only(OutlierDetection::a50())
            .build()
            .unwrap(),
    );
    assert!(
        sweep(&mut a50, t0, &mut hosts(&tallies)).is_empty(),
        "85 % is not over 85"
    );
    let mut envoy = Detector::new(
        failure_percentage_only(OutlierDetection::envoy())
            .build()
            .unwrap(),
    );
    assert_eq!(
        ejected(&sweep(&mut envoy, t0, &mut hosts(&tallies))),
        [0],
        "Envoy: at 85"
    );
    let over = [(14, 86), (100, 0), (100, 0), (100, 0), (100, 0)];
    assert_eq!(ejected(&sweep(&mut a50, t0, &mut hosts(&over))), [0]);
}

#[test]
fn failure_percentage_minimum_hosts_counts_differ_by_model() {
    let t0 = Instant::now();
    // Five endpoints, only two with the volume (50): A50 counts the five.
    let tallies = [(0, 60), (60, 0), (1, 0), (1, 0), (1, 0)];
    let mut a50 = Detector::new(
        failure_percentage_only(OutlierDetection::a50())
            .build()
            .unwrap(),
    );
    assert_eq!(ejected(&sweep(&mut a50, t0, &mut hosts(&tallies))), [0]);
    let mut envoy = Detector::new(
        failure_percentage_only(OutlierDetection::envoy())
            .build()
            .unwrap(),
    );
    assert!(sweep(&mut envoy, t0, &mut hosts(&tallies)).is_empty());
}

#[test]
fn a50_always_allows_one_ejection_and_stops_over_the_cap() {
    let t0 = Instant::now();
    // Two of five failing everything; 10 %: one ejected, the second overflows.
    let tallies = [(0, 100), (0, 100), (100, 0), (100, 0), (100, 0)];
    let mut d = Detector::new(
        failure_percentage_only(OutlierDetection::a50())
            .build()
            .unwrap(),
    );
    let events = sweep(&mut d, t0, &mut hosts(&tallies));
    assert_eq!(
        events,
        [
            Event::Ejected {
                host: 0,
                method: Method::FailurePercentage,
                multiplier: 1
            },
            Event::Unenforced {
                host: 1,
                method: Method::FailurePercentage,
                reason: Unenforced::MaxEjectionOverflow
            },
        ]
    );
    // 0 %: A50 still ejects one; Envoy none, unless always_eject_one_host.
    let zero = |b: OutlierDetectionBuilder| failure_percentage_only(b).max_ejection_percent(0);
    let mut a50 = Detector::new(zero(OutlierDetection::a50()).build().unwrap());
    assert_eq!(ejected(&sweep(&mut a50, t0, &mut hosts(&tallies))), [0]);
    let mut envoy = Detector::new(zero(OutlierDetection::envoy()).build().unwrap());
    assert!(ejected(&sweep(&mut envoy, t0, &mut hosts(&tallies))).is_empty());
    let mut one = Detector::new(
        zero(OutlierDetection::envoy())
            .always_eject_one_host(true)
            .build()
            .unwrap(),
    );
    assert_eq!(ejected(&sweep(&mut one, t0, &mut hosts(&tallies))), [0]);
    // 40 % of five is two: A50 allows a third (40 is not over 40), Envoy stops at two.
    let all_bad = [(0, 100), (0, 100), (0, 100), (100, 0), (100, 0)];
    let forty = |b: OutlierDetectionBuilder| failure_percentage_only(b).max_ejection_percent(40);
    let mut a50 = Detector::new(forty(OutlierDetection::a50()).build().unwrap());
    assert_eq!(
        ejected(&sweep(&mut a50, t0, &mut hosts(&all_bad))),
        [0, 1, 2]
    );
    let mut envoy = Detector::new(forty(OutlierDetection::envoy()).build().unwrap());
    assert_eq!(
        ejected(&sweep(&mut envoy, t0, &mut hosts(&all_bad))),
        [0, 1]
    );
}

#[test]
fn ejection_time_is_base_times_multiplier_and_returns_at_the_sweep_after() {
    let t0 = Instant::now();
    let bad = [(0, 100), (100, 0), (100, 0), (100, 0), (100, 0)];
    for (model, returns_at) in [
        (OutlierDetection::a50(), 40),
        (OutlierDetection::envoy(), 30),
    ] {
        let mut d = Detector::new(failure_percentage_only(model).build().unwrap());
        let mut h = hosts(&bad);
        assert_eq!(ejected(&sweep(&mut d, t0, &mut h)), [0]);
        let mut back = None;
        for tick in 1..=6u64 {
            h.iter_mut().for_each(|x| x.set_tally(0, 0));
            let events = sweep(&mut d, t0 + 10 * S * tick as u32, &mut h);
            if events.contains(&Event::Returned { host: 0 }) {
                back = Some(tick * 10);
                break;
            }
        }
        // A50: the first sweep strictly after 30 s; Envoy: at 30 s.
        assert_eq!(back, Some(returns_at));
        assert_eq!(
            h[0].multiplier(),
            1,
            "not lowered at the sweep that returns it"
        );
    }
}

#[test]
fn the_multiplier_grows_per_ejection_decays_per_sweep_and_the_time_is_capped() {
    let config = failure_percentage_only(OutlierDetection::a50())
        .max_ejection_time(Duration::from_secs(70))
        .build()
        .unwrap();
    assert_eq!(config.ejection_time(1), 30 * S);
    assert_eq!(config.ejection_time(2), 60 * S);
    assert_eq!(config.ejection_time(3), 70 * S, "capped");
    assert_eq!(config.ejection_time(u32::MAX), 70 * S);
    // A cap below the base: the base.
    let short = OutlierDetection::a50()
        .max_ejection_time(S)
        .build()
        .unwrap();
    assert_eq!(short.ejection_time(5), 30 * S);

    let t0 = Instant::now();
    let mut d = Detector::new(config);
    let mut h = hosts(&[(0, 100), (100, 0), (100, 0), (100, 0), (100, 0)]);
    let mut now = t0;
    sweep(&mut d, now, &mut h);
    // Out 30 s: back at 40 s; failing again at once: multiplier 2, 60 s.
    while h[0].is_ejected() {
        now += 10 * S;
        h.iter_mut().for_each(|x| x.set_tally(0, 0));
        sweep(&mut d, now, &mut h);
    }
    assert_eq!(now - t0, 40 * S);
    now += 10 * S;
    h[0].set_tally(0, 100);
    let events = sweep(&mut d, now, &mut h);
    assert_eq!(
        events,
        [Event::Ejected {
            host: 0,
            method: Method::FailurePercentage,
            multiplier: 2
        }]
    );
    let second = now;
    while h[0].is_ejected() {
        now += 10 * S;
        h.iter_mut().for_each(|x| x.set_tally(0, 0));
        sweep(&mut d, now, &mut h);
    }
    assert_eq!(
        now - second,
        70 * S,
        "60 s, returned at the first sweep after"
    );
    // In service, the multiplier falls one per sweep.
    for expected in [1, 0, 0] {
        now += 10 * S;
        h.iter_mut().for_each(|x| x.set_tally(0, 0));
        sweep(&mut d, now, &mut h);
        assert_eq!(h[0].multiplier(), expected);
    }
}

#[test]
fn enforcement_percentage_is_drawn_and_reported() {
    let t0 = Instant::now();
    let tallies = [(0, 100), (100, 0), (100, 0), (100, 0), (100, 0)];
    // Envoy's default failure percentage: detected, enforced 0 %.
    let mut envoy = Detector::new(
        OutlierDetection::envoy()
            .success_rate(None)
            .build()
            .unwrap(),
    );
    assert_eq!(
        sweep(&mut envoy, t0, &mut hosts(&tallies)),
        [Event::Unenforced {
            host: 0,
            method: Method::FailurePercentage,
            reason: Unenforced::EnforcementPercentage
        }]
    );
    // Half the time, seeded: over 1000 sweeps, near half ejected.
    let config = OutlierDetection::a50()
        .success_rate(None)
        .failure_percentage(Some(FailurePercentage {
            enforcement_percentage: 50,
            ..FailurePercentage::default()
        }))
        .seed(9)
        .build()
        .unwrap();
    let mut d = Detector::new(config);
    let enforced = (0..1000)
        .filter(|_| !ejected(&sweep(&mut d, t0, &mut hosts(&tallies))).is_empty())
        .count();
    assert!((400..600).contains(&enforced), "{enforced} of 1000");
}

#[test]
fn envoys_consecutive_rules_eject_at_once() {
    let t0 = Instant::now();
    let mut d = Detector::new(OutlierDetection::envoy().build().unwrap());
    let mut h = hosts(&[(0, 0); 5]);
    let mut events = Vec::new();
    d.consecutive(t0, &mut h, 2, Method::Consecutive5xx, |e| events.push(e));
    assert_eq!(
        events,
        [Event::Ejected {
            host: 2,
            method: Method::Consecutive5xx,
            multiplier: 1
        }]
    );
    // Out already: nothing more. Gateway errors: enforced 0 % by default.
    events.clear();
    d.consecutive(t0, &mut h, 2, Method::Consecutive5xx, |e| events.push(e));
    // (One of five out: Envoy's 10 % cap would refuse any other; a fresh set.)
    let mut fresh = hosts(&[(0, 0); 5]);
    d.consecutive(t0, &mut fresh, 3, Method::ConsecutiveGatewayFailure, |e| {
        events.push(e);
    });
    assert_eq!(
        events,
        [Event::Unenforced {
            host: 3,
            method: Method::ConsecutiveGatewayFailure,
            reason: Unenforced::EnforcementPercentage
        }]
    );
    // A50 has no consecutive rule.
    let mut a50 = Detector::new(OutlierDetection::a50().build().unwrap());
    let mut h = hosts(&[(0, 0); 5]);
    a50.consecutive(t0, &mut h, 0, Method::Consecutive5xx, |_| {
        panic!("A50 has no such rule")
    });
    assert!(!h[0].is_ejected());
}

#[test]
fn what_counts_as_a_failure_follows_the_model() {
    let a50 = Detector::new(OutlierDetection::a50().build().unwrap());
    let envoy = Detector::new(OutlierDetection::envoy().build().unwrap());
    for (answer, a, e) in [
        (Answer::Ok, false, false),
        (Answer::ServerError, true, true),
        (Answer::GatewayError, true, true),
        (Answer::ClientError, true, false),
    ] {
        assert_eq!(
            (a50.is_failure(answer), envoy.is_failure(answer)),
            (a, e),
            "{answer:?}"
        );
    }
}

#[test]
fn a_bad_configuration_is_a_clear_error() {
    let zero = OutlierDetection::a50()
        .interval(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(zero.field(), "interval");
    let pct = OutlierDetection::a50()
        .failure_percentage(Some(FailurePercentage {
            threshold: 101,
            ..Default::default()
        }))
        .build()
        .unwrap_err();
    assert_eq!(pct.field(), "failure_percentage.threshold");
    let volume = OutlierDetection::a50()
        .success_rate(Some(SuccessRate {
            request_volume: 0,
            ..Default::default()
        }))
        .build()
        .unwrap_err();
    assert_eq!(volume.field(), "success_rate.request_volume");
    let streak = OutlierDetection::envoy()
        .consecutive_5xx(Some(Consecutive {
            threshold: 0,
            enforcement_percentage: 100,
        }))
        .build()
        .unwrap_err();
    assert_eq!(streak.field(), "consecutive_5xx");
    assert!(
        !OutlierDetection::a50()
            .success_rate(None)
            .failure_percentage(None)
            .build()
            .unwrap()
            .detects()
    );
}

#[test]
fn peak_ewma_peaks_decays_and_clamps_hints() {
    let t0 = Instant::now();
    let mut rtt = PeakEwma::new(DEFAULT_DECAY, DEFAULT_RTT, t0);
    assert_eq!(rtt.estimate(t0), DEFAULT_RTT);
    assert!((rtt.load(3, t0) - 4.0).abs() < 1e-12);
    rtt.observe(Duration::from_millis(10), t0 + 10 * S);
    // Decayed from 1 s over 10 s, then the sample pulled it down.
    let e = (-1.0f64).exp();
    let want = 1.0 * e + 0.010 * (1.0 - e);
    assert!((rtt.estimate(t0 + 10 * S).as_secs_f64() - want).abs() < 1e-9);
    // A hint of a year counts as 300 s; none, or a small one, as 5 s.
    let mut hinted = PeakEwma::new(DEFAULT_DECAY, Duration::from_millis(5), t0);
    hinted.penalize(Some(Duration::from_secs(365 * 86_400)), t0);
    assert_eq!(hinted.estimate(t0), MAX_PENALTY);
    let mut plain = PeakEwma::new(DEFAULT_DECAY, Duration::from_millis(5), t0);
    plain.penalize(None, t0);
    assert_eq!(plain.estimate(t0), MIN_PENALTY);
    let mut small = PeakEwma::new(DEFAULT_DECAY, Duration::from_millis(5), t0);
    small.penalize(Some(Duration::from_millis(1)), t0);
    assert_eq!(small.estimate(t0), MIN_PENALTY);
    // Idle, the estimate forgets: an endpoint not heard from is tried again.
    assert!(hinted.estimate(t0 + 100 * S) < Duration::from_millis(20));
}

struct Set {
    eligible: Vec<bool>,
    loads: Vec<f64>,
}

/// Loads here are small whole numbers: exact in a float.
#[allow(clippy::float_cmp)]
fn same(a: f64, b: f64) -> bool {
    a == b
}

impl Candidates for Set {
    fn count(&self) -> usize {
        self.eligible.len()
    }
    fn eligible(&self, i: usize) -> bool {
        self.eligible[i]
    }
    fn load(&self, i: usize) -> f64 {
        self.loads[i]
    }
}

#[test]
fn two_choices_spread_over_equal_endpoints() {
    let set = Set {
        eligible: vec![true; 4],
        loads: vec![1.0; 4],
    };
    let mut rng = Rng::with_seed(3);
    let mut seen = [0u32; 4];
    for _ in 0..4000 {
        seen[power_of_two(&set, &mut rng).unwrap()] += 1;
    }
    assert!(seen.iter().all(|&n| (800..1200).contains(&n)), "{seen:?}");
}

proptest! {
    #[test]
    fn the_pick_is_eligible_and_never_the_unique_worst(
        cells in proptest::collection::vec((any::<bool>(), 0u8..8), 0..12),
        seed in any::<u64>(),
    ) {
        let set = Set {
            eligible: cells.iter().map(|c| c.0).collect(),
            loads: cells.iter().map(|c| f64::from(c.1)).collect(),
        };
        let mut rng = Rng::with_seed(seed);
        let eligible: Vec<usize> = (0..set.count()).filter(|&i| set.eligible[i]).collect();
        for _ in 0..16 {
            let pick = power_of_two(&set, &mut rng);
            match pick {
                None => prop_assert!(eligible.is_empty()),
                Some(i) => {
                    prop_assert!(set.eligible[i]);
                    if eligible.len() >= 2 {
                        let worst = eligible.iter().map(|&j| set.loads[j]).fold(f64::MIN, f64::max);
                        let unique = eligible.iter().filter(|&&j| same(set.loads[j], worst)).count() == 1;
                        prop_assert!(!(unique && same(set.loads[i], worst)));
                    }
                }
            }
        }
    }

    #[test]
    fn ejections_stay_within_the_cap_but_for_the_one_allowed(
        n in 1usize..12,
        max_percent in 0u32..=100,
        envoy in any::<bool>(),
        sweeps in proptest::collection::vec(proptest::collection::vec((0u64..120, 0u64..120), 12), 1..8),
        seed in any::<u64>(),
    ) {
        let model = if envoy { OutlierDetection::envoy() } else { OutlierDetection::a50() };
        let config = model
            .max_ejection_percent(max_percent)
            .failure_percentage(Some(FailurePercentage { enforcement_percentage: 100, minimum_hosts: 1, ..Default::default() }))
            .success_rate(Some(SuccessRate { minimum_hosts: 1, ..Default::default() }))
            .seed(seed)
            .build()
            .unwrap();
        let mut d = Detector::new(config);
        let mut h = vec![Host::new(); n];
        let t0 = Instant::now();
        for (k, tallies) in sweeps.iter().enumerate() {
            for (host, &(s, f)) in h.iter_mut().zip(tallies) {
                host.set_tally(s, f);
            }
            d.sweep(t0 + 10 * S * k as u32, &mut h, |_| {});
            let out = h.iter().filter(|x| x.is_ejected()).count() as u64;
            let cap = u64::from(max_percent) * n as u64; // in hundredths of an endpoint
            if envoy {
                // Each ejection needed the share under the cap.
                prop_assert!(out == 0 || (out - 1) * 100 < cap, "{out} of {n} at {max_percent} %");
            } else {
                // Each needed it at most the cap, so one more than the cap at most.
                prop_assert!(out == 0 || (out - 1) * 100 <= cap, "{out} of {n} at {max_percent} %");
            }
        }
    }
}

fn set_with(outlier: Option<OutlierDetection>, panic: u32) -> Endpoints {
    Endpoints::builder()
        .seed(11)
        .outlier_detection(outlier)
        .panic_threshold(panic)
        .default_rtt(Duration::from_millis(10))
        .build()
        .expect("a valid set")
}

#[test]
fn the_set_picks_the_less_loaded_and_counts_calls_in_flight() {
    let t0 = Instant::now();
    let set = set_with(None, 50);
    let a = set.insert("a", t0);
    let b = set.insert("b", t0);
    // Hold calls on one endpoint: the next picks go to the other.
    let first = set.pick(t0).unwrap();
    let busy = first.id();
    let held: Vec<Picked> = (0..3)
        .map(|_| set.pick(t0).unwrap())
        .filter(|p| p.id() == busy)
        .collect();
    drop(held);
    let other = if busy == a { b } else { a };
    assert_eq!(
        set.pick(t0).unwrap().id(),
        other,
        "1 in flight against none"
    );
    let state = set.snapshot(t0);
    assert_eq!(state.iter().find(|e| e.id == busy).unwrap().in_flight, 1);
    drop(first);
    assert!(
        set.snapshot(t0).iter().all(|e| e.in_flight == 0),
        "dropped picks leave"
    );
}

#[test]
fn a_removed_or_unready_endpoint_gets_nothing_new() {
    let t0 = Instant::now();
    let set = set_with(None, 0);
    let a = set.insert("a", t0);
    let b = set.insert("b", t0);
    let on_a = set.pick_avoiding(t0, &[b]).unwrap();
    assert_eq!(on_a.id(), a);
    assert!(set.remove(a));
    assert!(!set.remove(a));
    for _ in 0..50 {
        assert_eq!(set.pick(t0).unwrap().id(), b);
    }
    // The call in flight on the removed endpoint finishes without harm.
    on_a.finish(Answer::ServerError, None, t0 + S);
    set.set_ready(b, false);
    assert!(set.pick(t0).is_none(), "no ready endpoint");
    set.set_ready(b, true);
    assert_eq!(set.pick(t0).unwrap().id(), b);
}

#[test]
fn a_hint_sends_calls_elsewhere_while_it_lasts() {
    let t0 = Instant::now();
    let set = set_with(None, 50);
    let a = set.insert("a", t0);
    let b = set.insert("b", t0);
    let p = set.pick_avoiding(t0, &[b]).unwrap();
    assert_eq!(p.id(), a);
    // 429 with Retry-After: 30 s.
    p.finish(Answer::ClientError, Some(30 * S), t0);
    for _ in 0..50 {
        assert_eq!(set.pick(t0 + S).unwrap().id(), b);
    }
    let a_rtt = set
        .snapshot(t0)
        .into_iter()
        .find(|e| e.id == a)
        .unwrap()
        .rtt;
    assert_eq!(a_rtt, 30 * S);
}

/// Finishes `n` calls on each endpoint at `now`, `bad` answering `answer`.
fn traffic(set: &Endpoints, now: Instant, per: usize, bad: EndpointId, answer: Answer) -> usize {
    let mut on_bad = 0;
    for _ in 0..per {
        let p = set.pick(now).expect("a ready endpoint");
        if p.id() == bad {
            on_bad += 1;
            p.finish(answer, None, now);
        } else {
            p.finish(Answer::Ok, None, now);
        }
    }
    on_bad
}

#[test]
fn a_failing_endpoint_is_ejected_at_the_sweep_and_returns_after_its_time() {
    let t0 = Instant::now();
    let set = Endpoints::builder()
        .seed(5)
        .default_rtt(Duration::from_millis(10))
        .build()
        .unwrap();
    let ids: Vec<EndpointId> = (0..5)
        .map(|i| set.insert(format!("10.0.0.{i}:80"), t0))
        .collect();
    let bad = ids[2];
    // The bad endpoint answers every call with a 4xx (gRPC's
    // RESOURCE_EXHAUSTED, say) and no hint: a failure for A50, and no
    // penalty to its load, so it keeps its share of the calls and its
    // tally reaches the volumes (a server error would have sent the calls
    // elsewhere at once: see `a_hint_sends_calls_elsewhere_while_it_lasts`).
    let mut now = t0;
    let mut sent_to_bad = 0;
    for _ in 0..99 {
        now += Duration::from_millis(100);
        sent_to_bad += traffic(&set, now, 20, bad, Answer::ClientError);
    }
    assert!(!set.snapshot(now).iter().any(|e| e.ejected), "no sweep yet");
    assert!(
        sent_to_bad >= 50,
        "the bad endpoint got {sent_to_bad} calls"
    );
    // The sweep at 10 s ejects it; from then on it gets nothing.
    now = t0 + 10 * S;
    let on_bad = traffic(&set, now, 200, bad, Answer::ClientError);
    assert_eq!(on_bad, 0);
    let state = set.snapshot(now);
    assert!(state.iter().find(|e| e.id == bad).unwrap().ejected);
    assert_eq!(state.iter().filter(|e| e.ejected).count(), 1);
    // Back at the first sweep strictly after 30 s out: 50 s.
    now = t0 + 40 * S;
    traffic(&set, now, 10, bad, Answer::Ok);
    assert!(
        set.snapshot(now)
            .iter()
            .find(|e| e.id == bad)
            .unwrap()
            .ejected
    );
    now = t0 + 50 * S;
    let _ = set.pick(now);
    assert!(!set.snapshot(now).iter().any(|e| e.ejected));
}

#[test]
fn in_panic_the_pick_ignores_ejection() {
    let t0 = Instant::now();
    let envoy = OutlierDetection::envoy()
        .max_ejection_percent(100)
        .build()
        .unwrap();
    let set = set_with(Some(envoy), 50);
    let ids: Vec<EndpointId> = (0..4).map(|i| set.insert(format!("h{i}"), t0)).collect();
    // Five server errors in a row eject at once (Envoy's consecutive rule).
    // A pick that avoids every other endpoint lands on `id` while it is eligible.
    let fail_on = |id: EndpointId| {
        let others: Vec<EndpointId> = ids.iter().copied().filter(|o| *o != id).collect();
        for _ in 0..5 {
            let p = set.pick_avoiding(t0, &others).unwrap();
            assert_eq!(p.id(), id);
            p.finish(Answer::ServerError, None, t0);
        }
    };
    fail_on(ids[0]);
    assert!(set.snapshot(t0)[0].ejected);
    for _ in 0..50 {
        assert_ne!(set.pick(t0).unwrap().id(), ids[0]);
    }
    fail_on(ids[1]);
    // Two of four eligible: 50 %, not under the threshold: no panic yet.
    for _ in 0..50 {
        let id = set.pick(t0).unwrap().id();
        assert!(id == ids[2] || id == ids[3]);
    }
    // A third out: one of four eligible, under 50 %: every ready one is picked.
    fail_on(ids[2]);
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        seen.insert(set.pick(t0).unwrap().id());
    }
    assert_eq!(seen.len(), 4, "panic: ejection ignored");
}

#[test]
fn a_retry_avoids_the_endpoints_tried_while_another_is_eligible() {
    let t0 = Instant::now();
    let set = set_with(None, 50);
    let ids: Vec<EndpointId> = (0..3).map(|i| set.insert(format!("h{i}"), t0)).collect();
    for _ in 0..50 {
        let p = set.pick_avoiding(t0, &ids[..2]).unwrap();
        assert_eq!(p.id(), ids[2]);
    }
    // Every endpoint tried: one of them rather than none.
    assert!(set.pick_avoiding(t0, &ids).is_some());
}

#[test]
fn a_bad_set_configuration_is_a_clear_error() {
    let e = Endpoints::builder()
        .panic_threshold(101)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "panic_threshold");
    let e = Endpoints::builder()
        .decay(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "decay");
}

proptest! {
    #[test]
    fn the_set_never_picks_what_it_must_not(
        ops in proptest::collection::vec((0u8..6, 0usize..6, 0u8..4), 1..120),
        seed in any::<u64>(),
    ) {
        let t0 = Instant::now();
        let envoy = OutlierDetection::envoy().max_ejection_percent(100).seed(seed).build().unwrap();
        let set = Endpoints::builder().seed(seed).outlier_detection(Some(envoy)).build().unwrap();
        let mut live: Vec<EndpointId> = Vec::new();
        let mut removed: Vec<EndpointId> = Vec::new();
        let mut unready: Vec<EndpointId> = Vec::new();
        let mut held: Vec<Picked> = Vec::new();
        let mut now = t0;
        for (op, which, answer) in ops {
            now += Duration::from_millis(700);
            match op {
                0 => live.push(set.insert(format!("e{}", live.len()), now)),
                1 if !live.is_empty() => {
                    let id = live.remove(which % live.len());
                    set.remove(id);
                    removed.push(id);
                }
                2 if !live.is_empty() => {
                    let id = live[which % live.len()];
                    if unready.contains(&id) {
                        unready.retain(|u| *u != id);
                        set.set_ready(id, true);
                    } else {
                        unready.push(id);
                        set.set_ready(id, false);
                    }
                }
                3 | 4 => {
                    let state = set.snapshot(now);
                    let eligible = state.iter().filter(|e| e.ready && !e.ejected).count();
                    match set.pick(now) {
                        None => prop_assert!(state.iter().all(|e| !e.ready)),
                        Some(p) => {
                            prop_assert!(!removed.contains(&p.id()));
                            prop_assert!(!unready.contains(&p.id()));
                            let picked = state.iter().find(|e| e.id == p.id()).unwrap();
                            // Ejected only in panic: fewer than half eligible.
                            prop_assert!(!picked.ejected || eligible * 100 < 50 * state.len());
                            held.push(p);
                        }
                    }
                }
                _ if !held.is_empty() => {
                    let p = held.remove(which % held.len());
                    let a = [Answer::Ok, Answer::ServerError, Answer::GatewayError, Answer::ClientError][answer as usize];
                    if which % 2 == 0 { p.finish(a, None, now) } else { drop(p) }
                }
                _ => {}
            }
        }
        drop(held);
        prop_assert!(set.snapshot(now).iter().all(|e| e.in_flight == 0));
    }
}

#[test]
fn a_set_idle_for_a_year_catches_up_at_once_and_exactly() {
    let t0 = Instant::now();
    let envoy = OutlierDetection::envoy().build().expect("valid");
    let set = set_with(Some(envoy), 0);
    let ids: Vec<EndpointId> = (0..5).map(|i| set.insert(format!("h{i}"), t0)).collect();
    // Five server errors in a row eject h0 at once.
    for _ in 0..5 {
        let p = set.pick_avoiding(t0, &ids[1..]).expect("h0 is eligible");
        p.finish(Answer::ServerError, None, t0);
    }
    assert!(set.snapshot(t0)[0].ejected);
    // A year later the next pick runs the missed sweeps: h0 is back, its
    // multiplier decayed to nothing, and the next sweep is due within an interval.
    let later = t0 + Duration::from_secs(365 * 86_400);
    let _ = set.pick(later);
    let state = set.snapshot(later);
    assert!(!state[0].ejected);
    assert_eq!(state[0].multiplier, 0);
    // One more interval on: a sweep runs (h0 failing again is judged afresh).
    for _ in 0..5 {
        let p = set.pick_avoiding(later, &ids[1..]).expect("h0 is eligible");
        p.finish(Answer::ServerError, None, later);
    }
    assert!(
        set.snapshot(later)[0].ejected,
        "the consecutive rule ejects at once again"
    );
    assert_eq!(set.snapshot(later)[0].multiplier, 1);
}

/// A request that never got through holds its endpoint out of the picking
/// on the gRPC connection backoff: 1 s, then 1.6 s ± 20 %; while held it is
/// not ready, not eligible and never picked; an answer starts the curve
/// over.
#[test]
fn a_refused_connection_holds_the_endpoint_on_the_connection_backoff() {
    use crate::Verdict;
    use crate::classify::AnyError;
    let t0 = Instant::now();
    let set = Endpoints::builder()
        .seed(5)
        .outlier_detection(None)
        .build()
        .unwrap();
    let a = set.insert("a:1", t0);
    let b = set.insert("b:1", t0);
    let refused: Result<(), &str> = Err("connection refused");
    let answered: Result<(), &str> = Ok(());
    let pick_a = |now: Instant| loop {
        // The pick is random between two: take the one on `a`.
        let p = set.pick_avoiding(now, &[b]).expect("a ready endpoint");
        if p.id() == a {
            return p;
        }
    };
    let ready = |now: Instant| set.snapshot(now).iter().find(|e| e.id == a).unwrap().ready;
    pick_a(t0).judge(&AnyError, Verdict::Unsent, &refused, t0);
    // Held for exactly 1 s (the first step has no jitter).
    for at in [t0, t0 + S / 2, t0 + S - Duration::from_nanos(1)] {
        assert!(!ready(at));
        assert!(!set.has_eligible(at, &[b]));
        for _ in 0..20 {
            assert_eq!(
                set.pick(at).unwrap().id(),
                b,
                "a held endpoint is never picked"
            );
        }
    }
    assert!(ready(t0 + S));
    // Refused again: 1.6 s ± 20 %.
    let t1 = t0 + S;
    pick_a(t1).judge(&AnyError, Verdict::Unsent, &refused, t1);
    assert!(!ready(t1 + Duration::from_millis(1279)));
    assert!(ready(t1 + Duration::from_millis(1921)));
    // An answer starts the curve over: the next refusal holds it 1 s.
    let t2 = t1 + Duration::from_secs(2);
    pick_a(t2).judge(&AnyError, Verdict::Success, &answered, t2);
    let t3 = t2 + S;
    pick_a(t3).judge(&AnyError, Verdict::Unsent, &refused, t3);
    assert!(!ready(t3 + S - Duration::from_nanos(1)));
    assert!(ready(t3 + S));

    // A set without a connection backoff never holds.
    let plain = Endpoints::builder()
        .connection_backoff(None)
        .outlier_detection(None)
        .build()
        .unwrap();
    let only = plain.insert("only:1", t0);
    plain
        .pick(t0)
        .unwrap()
        .judge(&AnyError, Verdict::Unsent, &refused, t0);
    assert!(plain.has_eligible(t0, &[]));
    assert_eq!(plain.pick(t0).unwrap().id(), only);
}
