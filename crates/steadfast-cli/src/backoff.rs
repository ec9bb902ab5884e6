//! From a parsed [`BackoffSpec`] to the core's [`Backoff`], through the
//! core's builders: their validation (a multiplier below 1, a jitter factor
//! outside `[0, 1]`, a key that does not apply) is the validation of the
//! command line. `jitter=additive:50ms` is the core's `Jitter::Additive`
//! (the curve plus up to 50 ms, capped at `max`); `a6` and `grpc` refuse it,
//! their jitter being fixed by their specifications.
//!
//! | preset         | core builder                                   |
//! |----------------|------------------------------------------------|
//! | `constant`     | `Backoff::constant(delay)` (default 1s)        |
//! | `linear`       | `Backoff::linear()`                            |
//! | `exponential`  | `Backoff::exponential()`                       |
//! | `fibonacci`    | `Backoff::fibonacci()`                         |
//! | `decorrelated` | `Backoff::decorrelated()` (AWS)                |
//! | `a6`           | `Backoff::grpc_a6()`; with `jitter=full`, `Backoff::grpc_a6_legacy()` |
//! | `grpc`         | `GrpcConnectionBackoff::builder()`, its delays |
//!
//! ```
//! use steadfast::backoff::Schedule;
//! let spec = "exponential:initial=100ms,max=5s,jitter=full".parse()?;
//! let backoff = steadfast_cli::backoff::build(&spec, Some(7))?;
//! assert_eq!(backoff.name(), "exponential");
//! assert_eq!(backoff.seed(), Some(7));
//! let bad = "exponential:multiplier=0.5".parse()?;
//! assert!(steadfast_cli::backoff::build(&bad, None).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::Duration;

use steadfast::backoff::GrpcConnectionBackoff;
use steadfast::{Backoff, ConfigError, Jitter};

use crate::duration::format_duration;
use crate::spec::{BackoffSpec, JitterSpec, Preset};

fn jitter(j: JitterSpec) -> Jitter {
    match j {
        JitterSpec::None => Jitter::None,
        JitterSpec::Full => Jitter::Full,
        JitterSpec::Equal => Jitter::Equal,
        JitterSpec::Proportional(f) => Jitter::Proportional(f),
        JitterSpec::Additive(m) => Jitter::Additive(m),
    }
}

/// The A6 jitter the specification fixes: a factor of 0.2.
const A6_JITTER: f64 = 0.2;

/// Builds the schedule `spec` names, seeded with `seed` (`None`: fresh
/// entropy for each call).
///
/// # Errors
/// The core builder's [`ConfigError`] for a value it refuses; for `a6`, a
/// jitter other than its own `0.2` or the pre-2024 `full`; for `grpc`, a
/// jitter that is not a proportional factor; for every preset but
/// `constant`, an `initial` above `max` (given or the preset's default).
pub fn build(spec: &BackoffSpec, seed: Option<u64>) -> Result<Backoff, ConfigError> {
    let backoff = if spec.preset == Preset::Grpc {
        build_grpc(spec, seed)?
    } else {
        build_curve(spec, seed)?
    };
    check_initial_below_max(spec, &backoff)?;
    Ok(backoff)
}

/// Refuses a first delay above the cap (`exponential:initial=10s,max=1s`,
/// or `initial=20s` under the default `max=10s`): every delay would be the
/// cap, and the spec would not say what the user meant. The core's builders
/// accept it (the cap simply holds); the command line does not.
fn check_initial_below_max(spec: &BackoffSpec, backoff: &Backoff) -> Result<(), ConfigError> {
    // Constant has no cap; its `delay` is its whole curve.
    if spec.preset == Preset::Constant || backoff.initial() <= backoff.max_delay() {
        return Ok(());
    }
    let max_is = if spec.max.is_some() {
        ""
    } else {
        ", the preset's default"
    };
    let component = match spec.preset {
        Preset::Constant => "constant backoff",
        Preset::Linear => "linear backoff",
        Preset::Exponential => "exponential backoff",
        Preset::Fibonacci => "fibonacci backoff",
        Preset::Decorrelated => "decorrelated backoff",
        Preset::A6 => "grpc-a6 backoff",
        Preset::Grpc => "grpc connection backoff",
    };
    Err(ConfigError::new(
        component,
        "initial",
        "must not be above `max`: every delay would be `max`",
        format_args!(
            "initial={} with max={}{max_is}",
            format_duration(backoff.initial()),
            format_duration(backoff.max_delay())
        ),
    ))
}

fn build_curve(spec: &BackoffSpec, seed: Option<u64>) -> Result<Backoff, ConfigError> {
    let mut builder = match spec.preset {
        Preset::Constant => Backoff::constant(spec.initial.unwrap_or(Duration::from_secs(1))),
        Preset::Linear => Backoff::linear(),
        Preset::Exponential => Backoff::exponential(),
        Preset::Fibonacci => Backoff::fibonacci(),
        Preset::Decorrelated => Backoff::decorrelated(),
        Preset::A6 => match spec.jitter {
            None => Backoff::grpc_a6(),
            Some(JitterSpec::Proportional(f)) if f == A6_JITTER => Backoff::grpc_a6(),
            Some(JitterSpec::Full) => Backoff::grpc_a6_legacy(),
            Some(other) => {
                return Err(ConfigError::new(
                    "grpc-a6 backoff",
                    "jitter",
                    "is fixed by gRFC A6: 0.2 (the current text) or full (before 2024)",
                    other.to_string(),
                ));
            }
        },
        Preset::Grpc => return build_grpc(spec, seed),
    };
    if spec.preset != Preset::Constant
        && let Some(d) = spec.initial
    {
        builder = builder.initial(d);
    }
    if let Some(d) = spec.step {
        builder = builder.step(d);
    }
    if let Some(d) = spec.max {
        builder = builder.max_delay(d);
    }
    if let Some(m) = spec.multiplier {
        builder = builder.multiplier(m);
    }
    // A6 takes its jitter from the curve chosen above.
    if spec.preset != Preset::A6
        && let Some(j) = spec.jitter
    {
        builder = builder.jitter(jitter(j));
    }
    if let Some(s) = seed {
        builder = builder.seed(s);
    }
    builder.build()
}

fn build_grpc(spec: &BackoffSpec, seed: Option<u64>) -> Result<Backoff, ConfigError> {
    let mut builder = GrpcConnectionBackoff::builder();
    if let Some(d) = spec.initial {
        builder = builder.initial(d);
    }
    if let Some(d) = spec.max {
        builder = builder.max_backoff(d);
    }
    if let Some(m) = spec.multiplier {
        builder = builder.multiplier(m);
    }
    match spec.jitter {
        None => {}
        Some(JitterSpec::None) => builder = builder.jitter(0.0),
        Some(JitterSpec::Proportional(f)) => builder = builder.jitter(f),
        Some(other) => {
            return Err(ConfigError::new(
                "grpc connection backoff",
                "jitter",
                "must be a proportional factor such as 0.2 (or none)",
                other.to_string(),
            ));
        }
    }
    if let Some(s) = seed {
        builder = builder.seed(s);
    }
    Ok(builder.build()?.schedule())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use steadfast::backoff::{Rng, Schedule, ScheduleState};

    proptest! {
        /// Whatever parses is either built or refused with an error: the
        /// core's builders never panic on values from the command line, and
        /// what they build gives delays without panicking.
        #[test]
        fn any_parsed_spec_builds_or_is_refused(
            preset in proptest::sample::select(Preset::ALL.to_vec()),
            initial in proptest::option::of(0u64..u64::MAX),
            step in proptest::option::of(0u64..u64::MAX),
            max in proptest::option::of(0u64..u64::MAX),
            multiplier in proptest::option::of(prop_oneof![0.0f64..3.0, 0.0f64..1e300]),
            jitter in proptest::option::of(prop_oneof![
                Just(JitterSpec::None),
                Just(JitterSpec::Full),
                Just(JitterSpec::Equal),
                (0.0f64..2.0).prop_map(JitterSpec::Proportional),
                (0u64..u64::MAX).prop_map(|n| JitterSpec::Additive(Duration::from_nanos(n))),
                Just(JitterSpec::Additive(Duration::MAX)),
            ]),
            seed in any::<u64>(),
        ) {
            let keys = preset.keys();
            let has = |k| keys.contains(&k);
            let spec = BackoffSpec {
                preset,
                initial: initial.filter(|_| has(crate::spec::Key::Initial)).map(Duration::from_nanos),
                step: step.filter(|_| has(crate::spec::Key::Step)).map(Duration::from_nanos),
                max: max.filter(|_| has(crate::spec::Key::Max)).map(Duration::from_nanos),
                multiplier: multiplier.filter(|_| has(crate::spec::Key::Multiplier)),
                jitter: jitter.filter(|_| has(crate::spec::Key::Jitter)),
            };
            // The spec's text goes through the same path as the command line.
            let reparsed: BackoffSpec = spec.to_string().parse().expect("canonical form parses");
            if let Ok(b) = build(&reparsed, Some(seed)) {
                let mut state = ScheduleState::new();
                let mut rng = Rng::with_seed(seed);
                for _ in 0..50 {
                    if b.next_delay(&mut state, &mut rng).is_none() {
                        break;
                    }
                }
            }
        }
    }

    fn built(text: &str) -> Result<Backoff, ConfigError> {
        build(&text.parse().expect("spec parses"), Some(1))
    }

    fn first(b: &Backoff, n: usize) -> Vec<Duration> {
        let mut state = ScheduleState::new();
        let mut rng = Rng::with_seed(3);
        (0..n)
            .map_while(|_| b.next_delay(&mut state, &mut rng))
            .collect()
    }

    #[test]
    fn every_preset_builds_with_defaults() {
        for p in Preset::ALL {
            let b = build(&BackoffSpec::preset(p), None).unwrap();
            assert!(!first(&b, 3).is_empty(), "{}", p.name());
        }
    }

    #[test]
    fn parameters_reach_the_curve() {
        let ms = Duration::from_millis;
        let b = built("constant:delay=7ms").unwrap();
        assert_eq!(first(&b, 3), [ms(7), ms(7), ms(7)]);
        let b = built("linear:initial=10ms,step=5ms,max=18ms").unwrap();
        assert_eq!(first(&b, 4), [ms(10), ms(15), ms(18), ms(18)]);
        let b = built("exponential:initial=1ms,multiplier=3,max=20ms,jitter=none").unwrap();
        assert_eq!(first(&b, 4), [ms(1), ms(3), ms(9), ms(20)]);
        let b = built("fibonacci:initial=1ms,jitter=none").unwrap();
        assert_eq!(first(&b, 5), [ms(1), ms(1), ms(2), ms(3), ms(5)]);
        let b = built("decorrelated:initial=10ms,max=50ms").unwrap();
        assert!(first(&b, 20).iter().all(|d| (ms(10)..=ms(50)).contains(d)));
        assert_eq!(built("a6").unwrap().name(), "grpc-a6");
        assert_eq!(built("a6:jitter=20%").unwrap().name(), "grpc-a6");
        assert_eq!(built("a6:jitter=full").unwrap().name(), "grpc-a6-legacy");
        // Additive jitter: the curve plus [0, 5 ms), capped at `max`.
        let b = built("linear:initial=10ms,step=10ms,max=35ms,jitter=additive:5ms").unwrap();
        assert_eq!(b.jitter(), Jitter::Additive(ms(5)));
        for (n, d) in first(&b, 6).into_iter().enumerate() {
            let curve = ms(10 * (n as u64 + 1)).min(ms(35));
            assert!(curve <= d && d < curve + ms(5) && d <= ms(35), "{n}: {d:?}");
        }
        let g = built("grpc:jitter=none").unwrap();
        assert_eq!(first(&g, 2), [ms(1000), ms(1600)]);
        assert_eq!(g.seed(), Some(1));
    }

    #[test]
    fn the_core_refuses_bad_values() {
        for (text, field) in [
            ("exponential:multiplier=0.5", "multiplier"),
            ("exponential:jitter=1.5", "jitter"),
            ("grpc:jitter=2", "jitter"),
            ("grpc:jitter=full", "jitter"),
            ("a6:jitter=equal", "jitter"),
            ("grpc:multiplier=0.9", "multiplier"),
            ("grpc:jitter=additive:1s", "jitter"),
            ("a6:jitter=additive:1s", "jitter"),
        ] {
            let err = built(text).unwrap_err();
            assert_eq!(err.field(), field, "{text}: {err}");
        }
    }

    #[test]
    fn an_initial_delay_above_the_cap_is_refused() {
        for (text, shown) in [
            ("exponential:initial=10s,max=1s", "initial=10s with max=1s)"),
            (
                "exponential:initial=20s",
                "initial=20s with max=10s, the preset's default)",
            ),
            ("linear:initial=2s,max=1s", "initial=2s with max=1s)"),
            ("fibonacci:initial=1m", "initial=1m with max=10s"),
            ("decorrelated:initial=5s,max=1s", "initial=5s with max=1s"),
            ("a6:initial=2s", "initial=2s with max=1s"),
            ("grpc:initial=200s", "initial=3m20s with max=2m"),
        ] {
            let err = built(text).unwrap_err();
            assert_eq!(err.field(), "initial", "{text}: {err}");
            let message = err.to_string();
            assert!(message.contains("above `max`"), "{text}: {message}");
            assert!(message.contains(shown), "{text}: {message}");
        }
        // Equal is fine, and constant has no cap.
        for text in [
            "exponential:initial=1s,max=1s",
            "a6:initial=1s",
            "linear:initial=1h",
            "constant:delay=1h",
        ] {
            assert!(built(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn seeds_make_schedules_reproducible() {
        let spec: BackoffSpec = "exponential".parse().unwrap();
        let a = build(&spec, Some(9)).unwrap();
        let b = build(&spec, Some(9)).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.seed(), Some(9));
    }
}
