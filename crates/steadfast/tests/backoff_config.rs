//! Configuration validation: every rule gives a `ConfigError` naming the
//! field and the rule, never a panic.

use std::error::Error;
use std::time::Duration;

use steadfast::backoff::{BackoffBuilder, GrpcConnectionBackoff};
use steadfast::{Backoff, ConfigError, Jitter};

fn err(b: BackoffBuilder) -> ConfigError {
    match b.build() {
        Ok(b) => panic!("expected an error, built {b:?}"),
        Err(e) => e,
    }
}

#[test]
fn multiplier_must_be_finite_and_at_least_one() {
    for builder in [Backoff::exponential(), Backoff::grpc_go()] {
        for m in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -2.0, 0.0, 0.999] {
            let e = err(builder.multiplier(m));
            assert_eq!(e.field(), "multiplier");
            assert_eq!(e.rule(), "must be a finite number >= 1");
        }
        for m in [1.0, 1.6, 1e300] {
            assert!(builder.multiplier(m).build().is_ok(), "{m}");
        }
    }
}

#[test]
fn additive_jitter_takes_any_maximum_and_saturates() {
    // Every curve that takes a jitter takes an additive one, of any size:
    // a maximum past u64::MAX ns acts as that one, and delays saturate
    // there instead of overflowing.
    for builder in [
        Backoff::constant(Duration::from_secs(1)),
        Backoff::linear(),
        Backoff::exponential(),
        Backoff::shift_exponential(),
        Backoff::fibonacci(),
    ] {
        for m in [Duration::ZERO, Duration::from_nanos(1), Duration::MAX] {
            let b = builder
                .jitter(Jitter::Additive(m))
                .max_delay(Duration::MAX)
                .seed(3)
                .build()
                .unwrap();
            assert_eq!(b.jitter(), Jitter::Additive(m));
            let ceiling = Duration::from_nanos(u64::MAX);
            assert!(b.delays().take(100).all(|d| d <= ceiling), "{b:?}");
        }
    }
    let e = err(Backoff::grpc_go().jitter(Jitter::Additive(Duration::from_secs(1))));
    assert_eq!(
        e.rule(),
        "must be Proportional or None (grpc-go's jitter is a factor)"
    );
}

#[test]
fn a6_multiplier_must_be_positive() {
    for builder in [Backoff::grpc_a6(), Backoff::grpc_a6_legacy()] {
        for m in [f64::NAN, f64::INFINITY, -1.0, 0.0] {
            let e = err(builder.multiplier(m));
            assert_eq!(
                (e.field(), e.rule()),
                ("multiplier", "must be a finite number > 0")
            );
        }
        assert!(builder.multiplier(0.5).build().is_ok());
    }
}

#[test]
fn proportional_jitter_within_zero_and_one() {
    for f in [f64::NAN, f64::INFINITY, -0.01, 1.0001, 2.0] {
        let e = err(Backoff::exponential().jitter(Jitter::Proportional(f)));
        assert_eq!(e.field(), "jitter");
        assert!(e.to_string().contains("within [0, 1]"), "{e}");
    }
    for f in [0.0, 0.33, 1.0] {
        assert!(
            Backoff::linear()
                .jitter(Jitter::Proportional(f))
                .build()
                .is_ok()
        );
    }
}

#[test]
fn min_delay_must_not_exceed_max_delay() {
    let e = err(Backoff::exponential()
        .min_delay(Duration::from_secs(2))
        .max_delay(Duration::from_secs(1)));
    assert_eq!(e.field(), "min_delay");
    assert_eq!(e.rule(), "must not exceed max_delay");
    // Against the default max (10 s) too.
    assert_eq!(
        err(Backoff::exponential().min_delay(Duration::from_secs(11))).field(),
        "min_delay"
    );
    assert!(
        Backoff::exponential()
            .min_delay(Duration::from_secs(1))
            .max_delay(Duration::from_secs(1))
            .build()
            .is_ok()
    );
}

#[test]
fn max_attempts_must_be_at_least_one() {
    let e = err(Backoff::fibonacci().max_attempts(0));
    assert_eq!(e.field(), "max_attempts");
    let one = Backoff::fibonacci().max_attempts(1).build().unwrap();
    assert_eq!(one.delays().count(), 0, "one attempt: no retry, no delay");
}

#[test]
fn shift_must_be_at_least_one() {
    assert_eq!(err(Backoff::shift_exponential().shift(0)).field(), "shift");
    assert!(Backoff::shift_exponential().shift(u32::MAX).build().is_ok());
}

#[test]
fn settings_that_do_not_apply_are_errors() {
    let cases: [(BackoffBuilder, &str); 15] = [
        (
            Backoff::constant(Duration::from_secs(1)).multiplier(2.0),
            "multiplier",
        ),
        (Backoff::linear().multiplier(2.0), "multiplier"),
        (Backoff::fibonacci().multiplier(2.0), "multiplier"),
        (Backoff::shift_exponential().multiplier(2.0), "multiplier"),
        (Backoff::decorrelated().multiplier(2.0), "multiplier"),
        (Backoff::exponential().step(Duration::from_secs(1)), "step"),
        (Backoff::exponential().shift(2), "shift"),
        (Backoff::decorrelated().jitter(Jitter::Full), "jitter"),
        (Backoff::decorrelated_v2().jitter(Jitter::None), "jitter"),
        (
            Backoff::grpc_a6().jitter(Jitter::Proportional(0.2)),
            "jitter",
        ),
        (Backoff::grpc_a6_legacy().jitter(Jitter::Full), "jitter"),
        (Backoff::grpc_go().jitter(Jitter::Equal), "jitter"),
        (
            Backoff::grpc_go().jitter(Jitter::Additive(Duration::from_millis(1))),
            "jitter",
        ),
        (
            Backoff::grpc_a6().jitter(Jitter::Additive(Duration::ZERO)),
            "jitter",
        ),
        (
            Backoff::decorrelated().jitter(Jitter::Additive(Duration::from_secs(1))),
            "jitter",
        ),
    ];
    for (builder, field) in cases {
        assert_eq!(err(builder).field(), field, "{builder:?}");
    }
}

#[test]
fn unknown_name_is_an_error_and_known_names_build() {
    let e = Backoff::named("expo").unwrap_err();
    assert_eq!(e.field(), "name");
    for name in [
        "constant",
        "linear",
        "exponential",
        "shift-exponential",
        "fibonacci",
        "decorrelated",
        "decorrelated-v2",
        "grpc-go",
        "grpc-a6",
        "grpc-a6-legacy",
    ] {
        let b = Backoff::named(name).unwrap().build().unwrap();
        assert_eq!(b.name(), name);
    }
}

#[test]
fn errors_are_std_errors_with_readable_messages() {
    let e = err(Backoff::exponential().multiplier(f64::NAN));
    let as_error: &dyn Error = &e;
    assert!(as_error.source().is_none());
    assert_eq!(
        e.to_string(),
        "invalid exponential backoff: `multiplier` must be a finite number >= 1 (got NaN)"
    );
    let e = GrpcConnectionBackoff::builder()
        .jitter(-1.0)
        .build()
        .unwrap_err();
    assert_eq!(e.component(), "grpc connection backoff");
}

#[test]
fn extreme_but_valid_durations_build() {
    for d in [Duration::ZERO, Duration::from_nanos(1), Duration::MAX] {
        for builder in [
            Backoff::constant(d),
            Backoff::linear().initial(d).step(d),
            Backoff::exponential().initial(d).max_delay(Duration::MAX),
            Backoff::shift_exponential()
                .initial(d)
                .max_delay(Duration::MAX),
            Backoff::fibonacci().initial(d).max_delay(Duration::MAX),
            Backoff::decorrelated().initial(d).max_delay(Duration::MAX),
            Backoff::decorrelated_v2()
                .initial(d)
                .max_delay(Duration::MAX),
            Backoff::grpc_go().initial(d).max_delay(d),
            Backoff::grpc_a6().initial(d).max_delay(d),
        ] {
            let b = builder.build().unwrap();
            assert_eq!(b.delays_seeded(1).take(200).count(), 200, "{b:?}");
        }
    }
}

#[test]
fn values_have_the_common_traits() {
    fn value<T: Clone + Copy + std::fmt::Debug + PartialEq + Send + Sync + 'static + Default>() {}
    fn iterator<T: Iterator<Item = Duration> + Clone + std::fmt::Debug + Send + Sync>() {}
    value::<Backoff>();
    value::<Jitter>();
    value::<GrpcConnectionBackoff>();
    iterator::<steadfast::backoff::Delays>();
    iterator::<steadfast::backoff::Delays<GrpcConnectionBackoff>>();
    // Debug is readable: durations, not raw nanoseconds.
    let shown = format!("{:?}", Backoff::default());
    assert!(
        shown.contains("initial: 100ms") && shown.contains("max_delay: 10s"),
        "{shown}"
    );
}
