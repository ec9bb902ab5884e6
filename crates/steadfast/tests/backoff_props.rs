//! Property tests for every schedule and every jitter kind: bounds, cap
//! after jitter, monotone envelopes, determinism under a seed, limits, and
//! no panic for extreme configurations and attempt numbers near `u32::MAX`.

use std::time::Duration;

use proptest::prelude::*;
use steadfast::backoff::{BackoffBuilder, Rng, Schedule, ScheduleState};
use steadfast::{Backoff, Jitter};

fn nanos() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1u64..1_000_000,
        1_000_000u64..100_000_000_000,
        100_000_000_000u64..=u64::MAX,
        Just(u64::MAX),
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![nanos().prop_map(Duration::from_nanos), Just(Duration::MAX),]
}

fn jitter() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        Just(Jitter::None),
        Just(Jitter::Full),
        Just(Jitter::Equal),
        (0.0f64..=1.0).prop_map(Jitter::Proportional),
        Just(Jitter::Proportional(1.0)),
        additive(),
    ]
}

fn additive() -> impl Strategy<Value = Jitter> {
    prop_oneof![
        nanos().prop_map(|n| Jitter::Additive(Duration::from_nanos(n))),
        Just(Jitter::Additive(Duration::ZERO)),
        Just(Jitter::Additive(Duration::MAX)),
    ]
}

/// The range a jitter maps the (floored, capped) envelope `env` into,
/// before the floor and the cap, in nanoseconds.
fn spread(j: Jitter, env: f64) -> (f64, f64) {
    match j {
        Jitter::Additive(m) => (env, env + m.as_nanos() as f64),
        _ => (env * j.min_factor(), env * j.max_factor()),
    }
}

fn multiplier() -> impl Strategy<Value = f64> {
    // Whole multipliers (up to 2^32) take the integer curve, others the float one.
    prop_oneof![
        1.0f64..4.0,
        4.0f64..1e6,
        Just(1.0),
        Just(2.0),
        Just(3.0),
        Just(4_294_967_296.0),
        Just(4_294_967_297.0),
        Just(1e300)
    ]
}

/// A curve that takes any jitter: (builder without jitter, name).
fn jitterable() -> impl Strategy<Value = BackoffBuilder> {
    let constant = duration().prop_map(Backoff::constant);
    let linear = (duration(), duration()).prop_map(|(i, s)| Backoff::linear().initial(i).step(s));
    let exponential = (duration(), multiplier())
        .prop_map(|(i, m)| Backoff::exponential().initial(i).multiplier(m));
    let shift = (duration(), 1u32..=u32::MAX)
        .prop_map(|(i, s)| Backoff::shift_exponential().initial(i).shift(s));
    let fibonacci = duration().prop_map(|i| Backoff::fibonacci().initial(i));
    prop_oneof![constant, linear, exponential, shift, fibonacci]
}

/// Limits drawn so that min <= max.
fn limits() -> impl Strategy<Value = (Duration, Duration)> {
    (duration(), duration()).prop_map(|(a, b)| if a <= b { (a, b) } else { (b, a) })
}

fn any_builder() -> impl Strategy<Value = BackoffBuilder> {
    let with_jitter = (jitterable(), jitter()).prop_map(|(b, j)| b.jitter(j));
    let grpc_go = (duration(), multiplier(), 0.0f64..=1.0).prop_map(|(i, m, f)| {
        Backoff::grpc_go()
            .initial(i)
            .multiplier(m)
            .jitter(Jitter::Proportional(f))
    });
    let a6 =
        (duration(), 0.01f64..10.0).prop_map(|(i, m)| Backoff::grpc_a6().initial(i).multiplier(m));
    let a6_legacy = (duration(), 0.01f64..10.0)
        .prop_map(|(i, m)| Backoff::grpc_a6_legacy().initial(i).multiplier(m));
    let decorrelated = duration().prop_map(|i| Backoff::decorrelated().initial(i));
    let v2 = duration().prop_map(|i| Backoff::decorrelated_v2().initial(i));
    prop_oneof![with_jitter, grpc_go, a6, a6_legacy, decorrelated, v2]
}

/// The largest delay a schedule may give: its cap, or for the gRPC
/// schedules the cap times the jitter's largest factor (and for grpc-go,
/// whose first delay is the base delay exactly, at least that).
fn ceiling(b: &Backoff) -> f64 {
    let max = b.max_delay().as_nanos() as f64;
    let floor = b.min_delay().as_nanos() as f64;
    if b.caps_after_jitter() {
        max
    } else if b.name() == "grpc-go" {
        (max * b.jitter().max_factor())
            .max(floor)
            .max(b.initial().as_nanos() as f64)
    } else {
        (max * b.jitter().max_factor()).max(floor)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Jittered delay n lies within [min factor, max factor] x the unjittered
    /// delay n (a twin without jitter), after floor and cap.
    #[test]
    fn jitter_bounds_around_the_envelope(
        builder in jitterable(), j in jitter(), (min, max) in limits(), seed in any::<u64>()
    ) {
        let plain = builder.min_delay(min).max_delay(max).jitter(Jitter::None).build().unwrap();
        let jittered = builder.min_delay(min).max_delay(max).jitter(j).seed(seed).build().unwrap();
        let cap = |d: Duration| d.as_nanos().min(u128::from(u64::MAX)) as f64;
        let (lo_ns, hi_ns) = (cap(min), cap(max));
        for (n, (env, d)) in plain.delays().zip(jittered.delays()).take(64).enumerate() {
            let (env, d) = (env.as_nanos() as f64, d.as_nanos() as f64);
            let (lo, hi) = spread(j, env);
            let tol = 2.0 + hi * 1e-12;
            let (lo, hi) = (lo.max(lo_ns).min(hi_ns), hi.max(lo_ns).min(hi_ns));
            prop_assert!(d >= lo - tol && d <= hi + tol, "n={} env={} d={} [{}, {}]", n, env, d, lo, hi);
            prop_assert!(d <= hi_ns + 1.0, "cap after jitter");
        }
    }

    /// Additive jitter, exactly: each delay is the curve's (capped, as an
    /// unjittered twin without a floor gives it) plus `floor(m * r / 2^64)`
    /// for the next raw word `r` of the seeded generator, then the floor,
    /// then the cap again: never below the curve, below `curve + m` unless
    /// the floor lifts it, never above the cap. A zero maximum gives the
    /// delays of no jitter and draws nothing.
    #[test]
    fn additive_jitter_adds_to_the_curve_then_caps(
        builder in jitterable(), m in nanos(), (min, max) in limits(), seed in any::<u64>()
    ) {
        let builder = builder.max_delay(max);
        let curve_only = builder.jitter(Jitter::None).build().unwrap();
        let jittered = builder
            .min_delay(min)
            .jitter(Jitter::Additive(Duration::from_nanos(m)))
            .build()
            .unwrap();
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let (floor, cap) = (ns(min), ns(max));
        let (mut s0, mut s1) = (ScheduleState::new(), ScheduleState::new());
        let (mut r0, mut r1) = (Rng::with_seed(seed), Rng::with_seed(seed));
        for n in 0..64 {
            let curve = ns(curve_only.next_delay(&mut s0, &mut r0).unwrap());
            let word = r1.clone().next_u64();
            let d = ns(jittered.next_delay(&mut s1, &mut r1).unwrap());
            let added = ((u128::from(word) * u128::from(m)) >> 64) as u64;
            let want = curve.saturating_add(added).max(floor).min(cap);
            prop_assert_eq!(d, want, "n={} curve={}", n, curve);
            prop_assert!(d >= curve, "below the curve");
            prop_assert!(m == 0 || u128::from(d) < u128::from(curve) + u128::from(m) || d == floor);
        }
        let with_floor = builder.min_delay(min).seed(seed);
        let zero = with_floor.jitter(Jitter::Additive(Duration::ZERO)).build().unwrap();
        let none = with_floor.jitter(Jitter::None).build().unwrap();
        prop_assert!(zero.delays().take(64).eq(none.delays().take(64)));
    }

    /// Unjittered curves (grpc-go's included) never decrease.
    #[test]
    fn envelopes_are_monotone(
        builder in prop_oneof![jitterable(), (duration(), multiplier()).prop_map(|(i, m)| Backoff::grpc_go().initial(i).multiplier(m))],
        max in duration()
    ) {
        let plain = builder.max_delay(max).jitter(Jitter::None).build().unwrap();
        let delays: Vec<Duration> = plain.delays().take(200).collect();
        prop_assert!(delays[1..].windows(2).all(|w| w[0] <= w[1]), "{:?}", delays);
        // grpc-go's first delay is its base delay even above the cap.
        if plain.name() != "grpc-go" || plain.initial() <= max {
            prop_assert!(delays[0] <= delays[1], "{:?}", delays);
        }
    }

    /// Same seed, same schedule; the iterator and `next_delay` agree.
    #[test]
    fn deterministic_under_a_seed(builder in any_builder(), seed in any::<u64>()) {
        let b = builder.seed(seed).build().unwrap();
        let a: Vec<Duration> = b.delays().take(40).collect();
        prop_assert_eq!(&a, &b.delays().take(40).collect::<Vec<_>>());
        prop_assert_eq!(&a, &b.delays_seeded(seed).take(40).collect::<Vec<_>>());
        let mut state = ScheduleState::new();
        let mut rng = Rng::with_seed(seed);
        let by_hand: Vec<Duration> = (0..40).filter_map(|_| b.next_delay(&mut state, &mut rng)).collect();
        prop_assert_eq!(a, by_hand);
    }

    /// Every schedule respects its ceiling and floor, at any step, including
    /// states driven to steps and retry counts near u32::MAX; no panic.
    #[test]
    fn no_panic_and_bounded_at_extreme_steps(
        builder in any_builder(), (min, max) in limits(), step in prop_oneof![0u32..100, 1000u32..1100, (u32::MAX - 4)..=u32::MAX, any::<u32>()],
        seed in any::<u64>()
    ) {
        let b = builder.min_delay(min).max_delay(max).build().unwrap();
        let mut state = ScheduleState::at_step(step);
        let mut rng = Rng::with_seed(seed);
        let ceil = ceiling(&b);
        for _ in 0..6 {
            let d = b.next_delay(&mut state, &mut rng).unwrap();
            let ns = d.as_nanos() as f64;
            prop_assert!(ns <= ceil * (1.0 + 1e-12) + 1.0, "{:?}: {:?} over {}", b, d, ceil);
            prop_assert!(d >= min.min(Duration::from_nanos(u64::MAX)), "{:?} under floor", d);
        }
        prop_assert_eq!(state.step, step.saturating_add(6));
        prop_assert_eq!(state.retries, step.saturating_add(6));
        prop_assert_eq!(b.delay_at(step, &mut rng) <= Duration::from_nanos(u64::MAX), true);
    }

    /// max_attempts counts the first attempt: at most max_attempts - 1 delays.
    #[test]
    fn max_attempts_counts_the_first(builder in any_builder(), attempts in 1u32..50) {
        let b = builder.max_attempts(attempts).seed(1).build().unwrap();
        prop_assert_eq!(b.delays().count(), attempts as usize - 1);
        // Also from a state already past the limit.
        let mut state = ScheduleState::at_step(u32::MAX);
        prop_assert_eq!(b.next_delay(&mut state, &mut Rng::with_seed(0)), None);
    }

    /// The sum of the delays never exceeds max_total_delay; with a floor it
    /// is reached exactly (the last delay is clipped).
    #[test]
    fn max_total_delay_clips_the_last(
        builder in any_builder(), total_ms in 0u64..20_000, floor_ms in 1u64..50, seed in any::<u64>()
    ) {
        let total = Duration::from_millis(total_ms);
        let b = builder
            .min_delay(Duration::from_millis(floor_ms))
            .max_delay(Duration::from_secs(30))
            .max_total_delay(total)
            .seed(seed)
            .build()
            .unwrap();
        let delays: Vec<Duration> = b.delays().take(100_000).collect();
        let sum: Duration = delays.iter().sum();
        prop_assert!(delays.len() < 100_000, "the schedule ends");
        prop_assert_eq!(sum, total);
        prop_assert!(delays.iter().all(|d| !d.is_zero()));
    }

    /// grpc-go with its defaults: delay 0 is 1 s exactly, delay n within
    /// [0.8, 1.2] x min(1 s x 1.6^n, 120 s).
    #[test]
    fn grpc_go_bounds(seed in any::<u64>()) {
        let b = Backoff::grpc_go().seed(seed).build().unwrap();
        for (n, d) in b.delays().take(40).enumerate() {
            let env = (1.6f64.powi(n as i32)).min(120.0);
            let s = d.as_secs_f64();
            if n == 0 {
                prop_assert_eq!(d, Duration::from_secs(1));
            } else {
                prop_assert!(s >= env * 0.8 - 1e-9 && s <= env * 1.2 + 1e-9, "n={} {} vs {}", n, s, env);
            }
        }
    }

    /// gRFC A6 (current and legacy) with arbitrary valid settings.
    #[test]
    fn a6_bounds(initial_ms in 1u64..10_000, max_ms in 1u64..100_000, m in 0.1f64..5.0, seed in any::<u64>()) {
        let (i, max) = (Duration::from_millis(initial_ms), Duration::from_millis(max_ms));
        let b = Backoff::grpc_a6().initial(i).max_delay(max).multiplier(m).seed(seed).build().unwrap();
        let l = Backoff::grpc_a6_legacy().initial(i).max_delay(max).multiplier(m).seed(seed).build().unwrap();
        for (n, (d, dl)) in b.delays().zip(l.delays()).take(30).enumerate() {
            let env = (i.as_secs_f64() * m.powi(n as i32)).min(max.as_secs_f64());
            let (s, sl) = (d.as_secs_f64(), dl.as_secs_f64());
            prop_assert!(s >= env * 0.8 - 1e-6 && s <= env * 1.2 + 1e-6, "n={} {} vs {}", n, s, env);
            prop_assert!(sl >= 0.0 && sl <= env + 1e-6, "legacy n={} {} vs {}", n, sl, env);
        }
    }

    /// AWS decorrelated jitter: within [base, min(cap, 3 x previous)].
    #[test]
    fn decorrelated_bounds(base_ms in 1u64..1000, cap_s in 1u64..100, seed in any::<u64>()) {
        let (base, cap) = (Duration::from_millis(base_ms), Duration::from_secs(cap_s));
        let b = Backoff::decorrelated().initial(base).max_delay(cap).seed(seed).build().unwrap();
        let mut prev = base;
        for d in b.delays().take(50) {
            prop_assert!(d >= base.min(cap) && d <= cap && d <= prev * 3 + Duration::from_nanos(1), "{:?} after {:?}", d, prev);
            prev = d;
        }
    }

    /// Polly V2: non-negative, capped; the running sum follows the formula's
    /// telescoping envelope S * m * 2^t * tanh(sqrt(4t)) with t in [k-1, k].
    #[test]
    fn decorrelated_v2_bounds(median_ms in 1u64..1000, seed in any::<u64>()) {
        let m = Duration::from_millis(median_ms);
        let b = Backoff::decorrelated_v2().initial(m).max_delay(Duration::MAX).seed(seed).build().unwrap();
        let term = |t: f64| t.exp2() * (4.0 * t).sqrt().tanh() / 1.4 * m.as_nanos() as f64;
        let mut sum = 0.0;
        for (k, d) in b.delays().take(20).enumerate() {
            sum += d.as_nanos() as f64;
            let k = k as f64 + 1.0;
            prop_assert!(sum >= term(k - 1.0) - k - 1.0 && sum <= term(k) + k + 1.0, "k={} sum={}", k, sum);
        }
        let capped = Backoff::decorrelated_v2().initial(m).seed(seed).build().unwrap();
        prop_assert!(capped.delays().take(60).all(|d| d <= Duration::from_secs(10)));
    }
}
