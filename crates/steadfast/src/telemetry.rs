//! What steadfast records through the [`metrics`](https://docs.rs/metrics)
//! facade (feature `metrics`), for a dashboard: every name, its kind, its
//! labels and when it changes. Nothing is recorded without the feature,
//! and nothing on a path a successful call takes (refusals, window closes
//! and changes of state only). Install the recorder before building the
//! limits and breakers it should see: their handles are registered when
//! they are built. The same facts go to `tracing` as events, and each
//! value can be read without side effects from its owner's snapshot
//! ([`ConcurrencyLimit::snapshot`](crate::limit::ConcurrencyLimit::snapshot),
//! [`CircuitBreaker::snapshot`](crate::control::CircuitBreaker::snapshot),
//! [`Endpoints::snapshot`](crate::endpoint::Endpoints::snapshot)).
//!
//! The gRPC crate adds gRFC A96's per-call retry metrics (`steadfast-grpc`,
//! its own feature `metrics`).
//! | name | kind | labels | when |
//! |---|---|---|---|
//! | `steadfast.concurrency.limit` | gauge | `limit` | at build and at every window close |
//! | `steadfast.concurrency.in_flight` | gauge | `limit` | at every window close (a sample, not a live count) |
//! | `steadfast.concurrency.refused` | counter | `limit` | every refusal (its handle registered when the limit is built: install the recorder first) |
//! | `steadfast.concurrency.window_samples` | gauge | `limit` | at every window close of an adaptive limit: the attempts that finished in the window |
//! | `steadfast.concurrency.window_drops` | gauge | `limit` | at every window close: the window's drop signals (timeouts, overload answers) |
//! | `steadfast.concurrency.window_rtt_seconds` | gauge | `limit` | at every window close with a measured success: the window's average round trip |
//! | `steadfast.breaker.state` | gauge | `breaker` | at every change of a circuit breaker's state: 0 closed, 1 half-open, 2 open, 3 isolated (registered when the breaker is built) |
//! | `steadfast.breaker.opened` | counter | `breaker` | every time a circuit breaker opens (registered when the breaker is built) |
//! | `steadfast.fallback` | counter | `call`, `reason` | every time a call's fallback answers |
//! | `grpc.lb.outlier_detection.ejections_enforced` | counter | `grpc.lb.outlier_detection.detection_method` | every ejection by outlier detection (gRFC A91's name) |
//! | `grpc.lb.outlier_detection.ejections_unenforced` | counter | `grpc.lb.outlier_detection.detection_method`, `grpc.lb.outlier_detection.unenforced_reason` | every outlier found and not ejected |
//! | `steadfast.endpoint.retry_overflow` | counter | none | every retry or hedged copy an endpoint set's retry cap turned away (Envoy's `upstream_rq_retry_overflow`) |
//! | `steadfast.rate.fleet` | counter | `limit`, `outcome` | every check of a fleet rate limit (`admitted`, `refused`, `cached`, `backend_error`, `timeout`, `local_admitted`, `local_refused`, `closed`) |

/// The counter of a concurrency limit's refusals
/// (`steadfast.concurrency.refused`), registered once, when the limit is
/// built: a refusal then counts without building the metric's key, which
/// allocates (a refusal allocates nothing). Install the recorder before
/// building the limits it should see, as for every metric registered at
/// build.
#[derive(Clone)]
pub(crate) struct RefusalCounter {
    #[cfg(feature = "metrics")]
    counter: metrics::Counter,
}

impl RefusalCounter {
    /// The counter of the limit named `name`.
    pub(crate) fn new(name: &'static str) -> Self {
        #[cfg(not(feature = "metrics"))]
        let _ = name;
        Self {
            #[cfg(feature = "metrics")]
            counter: metrics::counter!("steadfast.concurrency.refused", "limit" => name),
        }
    }

    /// The limit refused an attempt.
    #[inline]
    pub(crate) fn increment(&self) {
        #[cfg(feature = "metrics")]
        self.counter.increment(1);
    }
}

/// A concurrency limit named `name` is `limit`, with `in_flight` attempts.
#[inline]
pub(crate) fn limit_window(name: &'static str, limit: u32, in_flight: u32) {
    #[cfg(feature = "metrics")]
    {
        metrics::gauge!("steadfast.concurrency.limit", "limit" => name).set(f64::from(limit));
        metrics::gauge!("steadfast.concurrency.in_flight", "limit" => name)
            .set(f64::from(in_flight));
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (name, limit, in_flight);
}

/// An adaptive concurrency limit named `name` closed a window of
/// `samples` attempts, `drops` of them drop signals, `rtt` their average
/// round trip (if a success was measured).
#[inline]
pub(crate) fn limit_window_closed(
    name: &'static str,
    samples: u32,
    drops: u32,
    rtt: Option<std::time::Duration>,
) {
    #[cfg(feature = "metrics")]
    {
        metrics::gauge!("steadfast.concurrency.window_samples", "limit" => name)
            .set(f64::from(samples));
        metrics::gauge!("steadfast.concurrency.window_drops", "limit" => name)
            .set(f64::from(drops));
        if let Some(rtt) = rtt {
            metrics::gauge!("steadfast.concurrency.window_rtt_seconds", "limit" => name)
                .set(rtt.as_secs_f64());
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (name, samples, drops, rtt);
}

/// A circuit breaker's gauge of its state (`steadfast.breaker.state`) and
/// counter of its openings (`steadfast.breaker.opened`), registered once,
/// when the breaker is built: a change of state then records without
/// building the metrics' keys, which allocates (opening a breaker
/// allocates nothing). Install the recorder before building the breakers
/// it should see.
#[derive(Clone)]
pub(crate) struct BreakerMetrics {
    #[cfg(feature = "metrics")]
    state: metrics::Gauge,
    #[cfg(feature = "metrics")]
    opened: metrics::Counter,
}

impl BreakerMetrics {
    /// The metrics of the breaker named `name`.
    pub(crate) fn new(name: &'static str) -> Self {
        #[cfg(not(feature = "metrics"))]
        let _ = name;
        Self {
            #[cfg(feature = "metrics")]
            state: metrics::gauge!("steadfast.breaker.state", "breaker" => name),
            #[cfg(feature = "metrics")]
            opened: metrics::counter!("steadfast.breaker.opened", "breaker" => name),
        }
    }

    /// The breaker changed to the state whose gauge level is `level`
    /// (`opened`: to open).
    #[inline]
    pub(crate) fn changed(&self, level: u8, opened: bool) {
        #[cfg(feature = "metrics")]
        {
            self.state.set(f64::from(level));
            if opened {
                self.opened.increment(1);
            }
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (level, opened);
    }
}

/// A fleet rate limit named `name` answered a check with `outcome`.
#[inline]
pub(crate) fn fleet_check(name: &'static str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("steadfast.rate.fleet", "limit" => name, "outcome" => outcome).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (name, outcome);
}

/// The fallback of the call named `call` answered a call that stopped for `reason`.
#[inline]
pub(crate) fn fallback_fired(call: &'static str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("steadfast.fallback", "call" => call, "reason" => reason).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (call, reason);
}

/// Outlier detection ejected an endpoint it found by `method`.
#[inline]
pub(crate) fn ejection_enforced(method: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "grpc.lb.outlier_detection.ejections_enforced",
        "grpc.lb.outlier_detection.detection_method" => method
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = method;
}

/// Outlier detection found an outlier by `method` and did not eject it, for `reason`.
#[inline]
pub(crate) fn ejection_unenforced(method: &'static str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(
        "grpc.lb.outlier_detection.ejections_unenforced",
        "grpc.lb.outlier_detection.detection_method" => method,
        "grpc.lb.outlier_detection.unenforced_reason" => reason
    )
    .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (method, reason);
}

/// An endpoint set's retry cap turned a retry or hedged copy away (Envoy's
/// `upstream_rq_retry_overflow`).
#[inline]
pub(crate) fn retry_overflow() {
    #[cfg(feature = "metrics")]
    metrics::counter!("steadfast.endpoint.retry_overflow").increment(1);
}
