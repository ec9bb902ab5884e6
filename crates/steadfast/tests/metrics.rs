//! What a dashboard reads through the `metrics` facade (feature `metrics`):
//! a circuit breaker's state and openings, an adaptive concurrency
//! limit's last window, each recorded where the state changes, with the
//! names of the table in `telemetry.rs`. On virtual time, with a recorder
//! local to the test.
#![cfg(feature = "metrics")]

use std::time::Duration;

use metrics_util::CompositeKey;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use steadfast::clock::VirtualClock;
use steadfast::control::{BreakerState, CircuitBreaker, Outcome, RetryControl, WindowKind};
use steadfast::limit::{Aimd, ConcurrencyLimit, Signal};

/// What the recorder holds now (taking it drains the recorder: read every
/// value of one moment from one snapshot).
struct Seen(Vec<(CompositeKey, DebugValue)>);

impl Seen {
    fn take(snapshotter: &Snapshotter) -> Self {
        Self(
            snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .map(|(key, _, _, value)| (key, value))
                .collect(),
        )
    }

    /// The value of the metric `name` whose labels are exactly `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<&DebugValue> {
        let mut want = labels.to_vec();
        want.sort_unstable();
        self.0
            .iter()
            .find(|(key, _)| {
                let key = key.key();
                let mut got: Vec<(&str, &str)> =
                    key.labels().map(|l| (l.key(), l.value())).collect();
                got.sort_unstable();
                key.name() == name && got == want
            })
            .map(|(_, value)| value)
    }

    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        match self.value(name, labels) {
            Some(DebugValue::Gauge(g)) => Some(g.into_inner()),
            _ => None,
        }
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> Option<u64> {
        match self.value(name, labels) {
            Some(DebugValue::Counter(c)) => Some(*c),
            _ => None,
        }
    }
}

#[test]
fn a_breaker_shows_its_state_and_counts_its_openings() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let clock = VirtualClock::new();
        let breaker = CircuitBreaker::builder()
            .name("payments")
            .window(WindowKind::Count(10))
            .min_calls(5)
            .failure_ratio(0.5)
            .break_duration(Duration::from_secs(5))
            .build_with_clock(clock.clone())
            .expect("valid settings");
        let payments = [("breaker", "payments")];
        // Registered when built: closed, never opened.
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge("steadfast.breaker.state", &payments), Some(0.0));
        assert_eq!(seen.counter("steadfast.breaker.opened", &payments), Some(0));
        let opened = |seen: &Seen| seen.counter("steadfast.breaker.opened", &payments);
        for _ in 0..5 {
            breaker.record(Outcome::RetryableFailure);
        }
        assert_eq!(breaker.state(), BreakerState::Open);
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge("steadfast.breaker.state", &payments), Some(2.0));
        assert_eq!(opened(&seen), Some(1));
        // The break ends: the next call is a probe, half-open; it succeeds.
        clock.advance(Duration::from_secs(5));
        breaker.admit().expect("a probe");
        assert_eq!(breaker.state(), BreakerState::HalfOpen);
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge("steadfast.breaker.state", &payments), Some(1.0));
        assert_eq!(opened(&seen), Some(0), "none since the last look");
        breaker.record(Outcome::Success);
        assert_eq!(breaker.state(), BreakerState::Closed);
        let seen = Seen::take(&snapshotter);
        assert_eq!(seen.gauge("steadfast.breaker.state", &payments), Some(0.0));
        assert_eq!(opened(&seen), Some(0));
    });
}

#[test]
fn an_adaptive_limit_shows_its_last_window() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let clock = VirtualClock::manual();
        let aimd = Aimd::builder()
            .initial_limit(4)
            .min_limit(1)
            .build()
            .expect("valid settings");
        let limit = ConcurrencyLimit::adaptive(aimd)
            .name("db")
            .window(Duration::from_secs(1), 4)
            .build_with_clock(clock.clone())
            .expect("valid settings");
        let db = [("limit", "db")];
        assert_eq!(
            Seen::take(&snapshotter).gauge("steadfast.concurrency.window_samples", &db),
            None
        );
        // Three successes of 1 s and one drop: the window closes at the fourth.
        let permits: Vec<_> = (0..4)
            .map(|_| limit.try_acquire().expect("a slot"))
            .collect();
        clock.advance(Duration::from_secs(1));
        let mut permits = permits.into_iter();
        permits.next().expect("four").finish(Signal::Dropped);
        permits.for_each(|p| p.finish(Signal::Success));
        let seen = Seen::take(&snapshotter);
        let window = |name| seen.gauge(name, &db);
        assert_eq!(window("steadfast.concurrency.window_samples"), Some(4.0));
        assert_eq!(window("steadfast.concurrency.window_drops"), Some(1.0));
        assert_eq!(
            window("steadfast.concurrency.window_rtt_seconds"),
            Some(1.0)
        );
        assert_eq!(
            window("steadfast.concurrency.limit"),
            Some(f64::from(limit.limit()))
        );
    });
}
