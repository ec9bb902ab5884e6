//! The per-call retry metrics of gRFC A96, recorded when a call ends.
//!
//! | name | unit | what |
//! |---|---|---|
//! | `grpc.client.call.retries` | `{retry}` | attempts after the first, of a call with a retry policy |
//! | `grpc.client.call.transparent_retries` | `{transparent_retry}` | never recorded: steadfast makes no transparent retries (every attempt it sends counts against `maxAttempts`) |
//! | `grpc.client.call.hedges` | `{hedge}` | copies after the first, of a call with a hedging policy |
//! | `grpc.client.call.retry_delay` | `s` | the total wait between a call's retries (no attempt in flight) |
//!
//! Each is labelled `grpc.method` (the full method name, without the leading
//! `/`) and `grpc.target` (the layer's target). As A96 says, a zero is not
//! recorded: a call that needed no retry or hedge records nothing, so the
//! success path pays one comparison.
//!
//! Every recording is a `tracing` event at debug level (its target is this
//! module, `steadfast_grpc::metrics`; it is inside the call's span) whose fields carry the
//! metric names; with the `metrics` feature, each is also recorded as a
//! histogram through the [`metrics`](https://docs.rs/metrics) facade, for
//! whatever recorder (Prometheus, OpenTelemetry...) the program installs.

use std::time::Duration;

/// `grpc.client.call.retries`.
pub const RETRIES: &str = "grpc.client.call.retries";
/// `grpc.client.call.transparent_retries` (never recorded: see the module docs).
pub const TRANSPARENT_RETRIES: &str = "grpc.client.call.transparent_retries";
/// `grpc.client.call.hedges`.
pub const HEDGES: &str = "grpc.client.call.hedges";
/// `grpc.client.call.retry_delay`.
pub const RETRY_DELAY: &str = "grpc.client.call.retry_delay";

/// What a call that ended did beyond its first attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extra {
    /// A call with a retry policy: attempts after the first, and the total
    /// time waited between them.
    Retries { retries: u32, delay: Duration },
    /// A call with a hedging policy: copies after the first.
    Hedges { hedges: u32 },
}

/// Records a finished call's A96 metrics for `method` (the request path)
/// to `target`; nothing for a call with no retry and no hedge.
#[inline]
pub(crate) fn record(extra: Extra, method: &str, target: &str) {
    match extra {
        Extra::Retries { retries: 0, .. } | Extra::Hedges { hedges: 0 } => {}
        _ => record_nonzero(extra, method.trim_start_matches('/'), target),
    }
}

#[cold]
#[inline(never)]
fn record_nonzero(extra: Extra, method: &str, target: &str) {
    match extra {
        Extra::Retries { retries, delay } => {
            let seconds = delay.as_secs_f64();
            tracing::debug!(
                grpc.method = method,
                grpc.target = target,
                grpc.client.call.retries = retries,
                grpc.client.call.retry_delay = seconds,
                "steadfast: gRPC call retried"
            );
            #[cfg(feature = "metrics")]
            facade::retries(method, target, retries, seconds);
        }
        Extra::Hedges { hedges } => {
            tracing::debug!(
                grpc.method = method,
                grpc.target = target,
                grpc.client.call.hedges = hedges,
                "steadfast: gRPC call hedged"
            );
            #[cfg(feature = "metrics")]
            facade::hedges(method, target, hedges);
        }
    }
}

/// The same through the `metrics` facade.
#[cfg(feature = "metrics")]
mod facade {
    use ::metrics::{Unit, describe_histogram, histogram};

    use super::{HEDGES, RETRIES, RETRY_DELAY, TRANSPARENT_RETRIES};

    /// Describes the histograms to the installed recorder. On every
    /// recording (a call that retried or hedged, off the success path), not
    /// once per process: a recorder installed after the first such call
    /// still learns the units.
    fn describe() {
        describe_histogram!(
            RETRIES,
            Unit::Count,
            "Number of retries during the client call."
        );
        describe_histogram!(
            TRANSPARENT_RETRIES,
            Unit::Count,
            "Number of transparent retries during the client call."
        );
        describe_histogram!(
            HEDGES,
            Unit::Count,
            "Number of hedges during the client call."
        );
        describe_histogram!(
            RETRY_DELAY,
            Unit::Seconds,
            "Total time of delay while there is no active attempt during the client call."
        );
    }

    pub(super) fn retries(method: &str, target: &str, retries: u32, seconds: f64) {
        describe();
        let labels = [
            ("grpc.method", method.to_owned()),
            ("grpc.target", target.to_owned()),
        ];
        histogram!(RETRIES, &labels).record(f64::from(retries));
        histogram!(RETRY_DELAY, &labels).record(seconds);
    }

    pub(super) fn hedges(method: &str, target: &str, hedges: u32) {
        describe();
        let labels = [
            ("grpc.method", method.to_owned()),
            ("grpc.target", target.to_owned()),
        ];
        histogram!(HEDGES, &labels).record(f64::from(hedges));
    }
}
