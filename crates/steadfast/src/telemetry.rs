//! Metrics through the `metrics` facade (feature `metrics`): nothing is
//! recorded without the feature, and nothing here sits on a path a
//! successful call takes (refusals and window closes only).
//!
//! | name | kind | labels | when |
//! |---|---|---|---|
//! | `steadfast.concurrency.limit` | gauge | `limit` | at build and at every window close |
//! | `steadfast.concurrency.in_flight` | gauge | `limit` | at every window close (a sample, not a live count) |
//! | `steadfast.concurrency.refused` | counter | `limit` | every refusal |

/// A concurrency limit named `name` refused an attempt.
#[inline]
pub(crate) fn limit_refused(name: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("steadfast.concurrency.refused", "limit" => name).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = name;
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
