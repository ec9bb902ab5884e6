//! Metrics through the `metrics` facade (feature `metrics`): nothing is
//! recorded without the feature, and nothing here sits on a path a
//! successful call takes (refusals and window closes only).
//!
//! | name | kind | labels | when |
//! |---|---|---|---|
//! | `steadfast.concurrency.limit` | gauge | `limit` | at build and at every window close |
//! | `steadfast.concurrency.in_flight` | gauge | `limit` | at every window close (a sample, not a live count) |
//! | `steadfast.concurrency.refused` | counter | `limit` | every refusal (its handle registered when the limit is built: install the recorder first) |
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
